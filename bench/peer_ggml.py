"""bench/compare.py's `ggml=PATH` program: ggml's flash attention, timed by its test-backend-ops.

    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b ggml=GGML-BUILD/bin/test-backend-ops issue12
    GGML_VK_VISIBLE_DEVICES=0 /usr/bin/python3 bench/compare.py --a VKATTN --b ggml-d99724f=PATH/test-backend-ops \\
        --ggml-backend Vulkan0 ggml-perf-list

Not a script: compare.py makes a Ggml per ggml program (`ggml=PATH`, or `LABEL=PATH` with PATH named
test-backend-ops: name the ggml commit in the label) and asks it to run one case at a time. ggml is not
part of vkattn: build its test-backend-ops yourself (docs/performance.md says how). ggml-vulkan leaves
CPU devices (lavapipe) out unless GGML_VK_VISIBLE_DEVICES names them.

Each case runs as `test-backend-ops perf -o FLASH_ATTN_EXT -b BACKEND --test-file FILE`, FILE holding
the case as one --test-file line (test_file_line; bench/cases/ggml-issue12-shapes.txt holds issue 12's
four that way): FLASH_ATTN_EXT (op 74 in the ggml this was written against; check ggml.h's enum for
yours) with an f32 output, scale 1/sqrt(dim), no max_bias or softcap, prec f32, sources Q f32, K and V
in the case's dtype (f32, f16, bf16), no mask. So plain dense cases without causal; ggml's test keeps Q
and O in f32 where vkattn stores all four in the case's dtype (kept as the record's "notes").

ggml prints such a case as name=...,type=...,ne=[...],op_params=[i:v,...],sources=T[ne],...
(parse_generic reads the shape back; it must be the case's) and its mean us/run over graphs holding the
op n_runs times, repeated until a second has passed, after a warm-up graph; no FLOP rate, so GFLOP/s
come from us/run and vkattn's FLOP count (benchlib.attention_flops, also ggml's op_flops). Mind the
time: test-backend-ops sizes a generic case's graph by memory, not FLOPs (up to ~8000 runs), so a
prefill case of a few MB runs thousands of times: hours on lavapipe; the decode cases take minutes.
"""
import os
import re
import struct
import subprocess
import tempfile

import benchlib as bl

KIND = "ggml"
OP = "FLASH_ATTN_EXT"
DEFAULT_BACKEND = "Vulkan0"
# FLASH_ATTN_EXT in ggml.h's enum ggml_op of the ggml this was written against (check yours), and the
# ggml_type of each vkattn storage dtype
FLASH_ATTN_EXT_OP = 74
GGML_TYPE = {"f32": 0, "f16": 1, "bf16": 30}
DTYPE_OF_GGML = {"f32": "f32", "f16": "f16", "bf16": "bf16"}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# "  FLASH_ATTN_EXT(hsk=...,v_is_view_of_k=0):   <pad>   1491 runs -   612.43 us/run - 134.22 MFLOP/run - 219.16 GFLOPS"
# or "...): not supported"; a memory-bound case ends "- 1234 kB/run - 5.67 GB/s" instead.
_PERF_LINE = re.compile(r"^\s*(?P<op>[A-Z][A-Z0-9_]*)\((?P<params>.*)\):\s*(?:(?P<unsupported>not supported)\b.*|"
                        r"(?P<runs>\d+) runs - +(?P<us>[0-9.]+(?:e[-+]?\d+)?) us/run - +(?P<rest>.*))$")
_FLOP_RATE = re.compile(r"(?P<per_run>[0-9.]+) (?P<unit>[kMGT])FLOP/run - +(?P<rate>[0-9.]+) (?P<rate_unit>[kMGT])FLOPS")
_UNIT = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_DEVICE = re.compile(r"^\s*Device description:\s*(?P<name>.+?)\s*$")
_BACKEND = re.compile(r"^Backend \d+/\d+:\s*(?P<name>\S+)")
_VK_DEVICE = re.compile(r"^ggml_vulkan:\s*(?P<index>\d+) = (?P<text>.+)$")
# ggml's type names in a generic case's sources (ggml_type_name)
_SOURCE = re.compile(r"(?P<type>[a-z0-9_]+)\[(?P<ne>[0-9,\s]+)\](?:nb\[[0-9,\s]+\])?")


# ---------------------------------------------------------------------------------------------------
# ggml's console output


def parse_ggml_output(text):
    """What `test-backend-ops perf` printed: {"device", "vulkan_devices", "results": [...]}.

    Each result: {"op", "params" (the string), "backend", "supported", and if supported "runs", "us_per_run",
    "printed_flops_per_s" (None for a memory-bound line), "printed_flops_per_run"}. Lines of other ops
    and of other backends' sections are kept too (the caller filters); ANSI colours are ignored.
    """
    results, device, backend, vk_devices = [], None, None, []
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        found = _BACKEND.match(line)
        if found:
            backend = found.group("name")
            continue
        found = _DEVICE.match(line)
        if found and device is None:
            device = found.group("name")
            continue
        found = _VK_DEVICE.match(line)
        if found:
            vk_devices.append(found.group("text").strip())
            continue
        found = _PERF_LINE.match(line)
        if not found:
            continue
        rec = {"op": found.group("op"), "params": found.group("params"), "backend": backend}
        if found.group("unsupported"):
            rec["supported"] = False
        else:
            rec.update(supported=True, runs=int(found.group("runs")), us_per_run=float(found.group("us")),
                       printed_flops_per_s=None, printed_flops_per_run=None)
            rate = _FLOP_RATE.search(found.group("rest"))
            if rate:
                rec["printed_flops_per_run"] = float(rate.group("per_run")) * _UNIT[rate.group("unit")]
                rec["printed_flops_per_s"] = float(rate.group("rate")) * _UNIT[rate.group("rate_unit")]
        results.append(rec)
    return {"device": device, "vulkan_devices": vk_devices, "results": results}


def split_params(text):
    """'a=1,b=[2,3],c=x' -> {'a': '1', 'b': '[2,3]', 'c': 'x'} (commas inside brackets kept)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise RuntimeError(f"ggml's parameter string {text!r}: {part!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def _int32_bits_as_float(value):
    return struct.unpack("<f", struct.pack("<i", int(value)))[0]


def parse_generic(text):
    """A --test-file case's string (test_generic_op::vars) in the perf list's terms.

    'name=N,type=f32,ne=[128,32,1,1],op_params=[0:1035273459,3:10],sources=f32[128,1,32,1],f16[...],f16[...]'
    -> {"name", "hsk", "hsv", "nh" (KV heads), "nr23" [query heads per KV head, batch], "kv", "nb", "type_K",
    "type_V", "type_Q", "mask", "sinks", "scale", "max_bias", "logit_softcap", "prec"}. Sources: Q [D, seq_q,
    H, B], K [D, seq_k, KVH, B], V [Dv, seq_k, KVH, B], a 4th the mask, a 5th the sinks.
    """
    head, sep, sources = text.partition(",sources=")
    if not sep:
        raise RuntimeError(f"ggml's {OP}({text}): a --test-file case without sources=")
    p = split_params(head)
    ops = {}
    for item in p.get("op_params", "[]").strip("[]").split(","):
        if item.strip():
            index, colon, value = item.partition(":")
            if not colon:
                raise RuntimeError(f"ggml's {OP}({text}): op_params entry {item!r} is not index:value")
            ops[int(index)] = int(value)
    srcs, pos = [], 0
    while pos < len(sources):
        found = _SOURCE.match(sources, pos)
        if not found:
            raise RuntimeError(f"ggml's {OP}({text}): cannot read the sources at {sources[pos:pos + 30]!r}")
        srcs.append((found.group("type"), [int(n) for n in found.group("ne").split(",")]))
        pos = found.end() + (1 if found.end() < len(sources) and sources[found.end()] == "," else 0)
    if len(srcs) < 3 or any(len(ne) != 4 for _, ne in srcs):
        raise RuntimeError(f"ggml's {OP}({text}): needs Q, K and V sources of 4 dims each")
    (tq, q), (tk, k), (tv, v) = srcs[:3]
    if q[2] % max(k[2], 1) or k[1] != v[1] or k[2] != v[2] or k[0] != q[0]:
        raise RuntimeError(f"ggml's {OP}({text}): Q {q}, K {k}, V {v} are not one attention problem")
    return {"name": p.get("name"), "hsk": q[0], "hsv": v[0], "nh": k[2], "nr23": [q[2] // k[2], q[3]], "kv": k[1],
            "nb": q[1], "type_K": tk, "type_V": tv, "type_Q": tq, "mask": int(len(srcs) > 3),
            "sinks": int(len(srcs) > 4), "scale": _int32_bits_as_float(ops.get(0, 0)),
            "max_bias": _int32_bits_as_float(ops.get(1, 0)), "logit_softcap": _int32_bits_as_float(ops.get(2, 0)),
            "prec": "f32" if ops.get(3, 0) == 10 else "def"}


def ggml_flops(p):
    """test_flash_attn_ext::op_flops: 2 * nh*nr23[0] * nb * (hsk + hsv) * kv * nr23[1]."""
    return 2 * p["nh"] * p["nr23"][0] * p["nb"] * (p["hsk"] + p["hsv"]) * p["kv"] * p["nr23"][1]


def case_of(params_text):
    """What ggml ran, from its printed --test-file case: {"params", "p", "shape" (vkattn's; None when K and V
    are not one of its storage dtypes), "notes" (what differs between the sides), "flops"}. Softcap, ALiBi
    and sinks are in "p"; the generated cases have none."""
    p = parse_generic(params_text)
    dtype = DTYPE_OF_GGML.get(p["type_K"]) if p["type_K"] == p["type_V"] else None
    shape = None if dtype is None else dict(
        batch=p["nr23"][1], heads=p["nh"] * p["nr23"][0], kv_heads=p["nh"], seq_q=p["nb"], seq_k=p["kv"],
        dim_qk=p["hsk"], dim_v=p["hsv"], causal="none", dtype=dtype)
    notes = []
    if dtype is not None and p["type_Q"] != dtype:
        notes.append(f"Q and O: {p['type_Q']} in ggml's test, {dtype} in vkattn (one storage dtype); K/V {dtype} on both")
    if p["mask"]:
        notes.append("ggml's case has a mask source (random values); vkattn bench runs without one")
    if p["prec"] != "f32":
        notes.append(f"ggml prec={p['prec']}: f16 accumulation allowed; vkattn accumulates in f32")
    return {"params": params_text, "p": p, "shape": shape, "notes": notes, "flops": ggml_flops(p)}


# ---------------------------------------------------------------------------------------------------
# One case as a --test-file line, run


def test_file_line(shape, name, op=FLASH_ATTN_EXT_OP):
    """The `test-backend-ops --test-file` line of a dense vkattn shape (bench/cases/ggml-issue12-shapes.txt's
    form): output f32 [Dv, H, seq_q, B]; op_params scale 1/sqrt(dim) (as float bits), no max_bias or softcap,
    prec f32 (10); sources Q f32 [D, seq_q, H, B], K [D, seq_k, KVH, B] and V [Dv, seq_k, KVH, B] in the
    shape's dtype, contiguous (nb all 0); no mask. RuntimeError for what ggml's case cannot say."""
    if shape["causal"] not in (None, "none"):
        raise RuntimeError(f"ggml: causal {shape['causal']} needs a mask, which the generated case does not have")
    kv_type = GGML_TYPE.get(shape["dtype"])
    if kv_type is None:
        raise RuntimeError(f"ggml: dtype {shape['dtype']} has no ggml storage type here ({', '.join(GGML_TYPE)})")
    if shape["heads"] % shape["kv_heads"]:
        raise RuntimeError(f"ggml: {shape['heads']} query heads are not a multiple of {shape['kv_heads']} KV heads")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise RuntimeError(f"ggml: case name {name!r} is not one word")
    b, h, kvh, sq, sk = shape["batch"], shape["heads"], shape["kv_heads"], shape["seq_q"], shape["seq_k"]
    d, dv = shape["dim_qk"], shape["dim_v"]
    scale = struct.unpack("<i", struct.pack("<f", d ** -0.5))[0]
    words = [op, 0, dv, h, sq, b, 4, scale, 0, 0, 10, 3,
             0, d, sq, h, b, 0, 0, 0, 0,
             kv_type, d, sk, kvh, b, 0, 0, 0, 0,
             kv_type, dv, sk, kvh, b, 0, 0, 0, 0, name]
    return " ".join(str(w) for w in words)


def ggml_command(binary, backend, test_file):
    return [binary, "perf", "-o", OP, "-b", backend, "--test-file", test_file]


def run_ggml(command, backend, env=None):
    """One test-backend-ops process: its output parsed, with only this backend's FLASH_ATTN_EXT results
    (ggml's exit status is not trusted alone: it may crash after printing them)."""
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              env=env)
    except OSError as e:
        raise RuntimeError(f"cannot run {command[0]}: {e.strerror}") from None
    parsed = parse_ggml_output(done.stdout)
    parsed["results"] = [r for r in parsed["results"] if r["op"] == OP and r["backend"] in (None, backend)]
    if not parsed["results"]:
        if re.search(r"^ggml_vulkan: No devices found", done.stdout, re.M):
            raise RuntimeError(f"`{' '.join(command)}`: ggml found no Vulkan device; ggml-vulkan leaves CPU devices "
                               "such as lavapipe out unless GGML_VK_VISIBLE_DEVICES names them (e.g. "
                               "GGML_VK_VISIBLE_DEVICES=0)")
        last = next((line for line in reversed(done.stdout.splitlines()) if line.strip()), "(no output)")
        raise RuntimeError(f"`{' '.join(command)}` (exit {done.returncode}) printed no {OP} perf result for backend "
                           f"{backend} (a backend of this build?); its last line: {_ANSI.sub('', last).strip()[:200]}")
    return parsed


def run_shape(binary, shape, name, backend=DEFAULT_BACKEND, env=None):
    """test-backend-ops perf on one dense vkattn shape, through a temporary --test-file of its one line:
    (the line, ggml's result record, case_of of what ggml ran). RuntimeError when ggml ran another shape."""
    line = test_file_line(shape, name)
    with tempfile.TemporaryDirectory(prefix="vkattn-ggml-") as tmp:
        path = os.path.join(tmp, "case.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(line + "\n")
        parsed = run_ggml(ggml_command(binary, backend, path), backend, env)
    ran = [r for r in parsed["results"] if r.get("supported")]
    if not ran:
        raise RuntimeError(f"ggml ({binary}, {backend}) does not support case {name}: {line}")
    if len(ran) != 1:
        raise RuntimeError(f"ggml ({binary}) printed {len(ran)} {OP} results for the one case {name}")
    case = case_of(ran[0]["params"])
    if case["shape"] != dict(shape, causal="none"):
        raise RuntimeError(f"ggml ran {case['shape']}, not case {name}'s {shape}")
    return line, ran[0], case


class Ggml:
    """The adapter: `ggml=PATH` (test-backend-ops) as a program of bench/compare.py."""

    def __init__(self, binary, backend=DEFAULT_BACKEND):
        self.binary, self.backend = binary, backend

    def check(self):
        if not os.access(self.binary, os.X_OK):
            raise bl.CaseError(f"{self.binary} is not an executable file (ggml's test-backend-ops; "
                               "docs/performance.md says how to build it)")

    def refuse(self, name, shape):
        """Why ggml's generated case cannot be this one (causal, a dtype, heads, a backward), or None."""
        if shape.get("backward"):
            return f"{KIND} has no backward pass of FLASH_ATTN_EXT to time"
        try:
            test_file_line(shape, name)
        except RuntimeError as e:
            return str(e)
        return None

    def describe(self, shape, name="CASE"):
        return f"{' '.join(ggml_command(self.binary, self.backend, 'FILE'))}, FILE: {test_file_line(shape, name)}"

    def load(self):
        pass  # nothing to import: test-backend-ops runs in its own process

    def version(self):
        return f"ggml test-backend-ops, {OP} on {self.backend} (Q and O f32)"

    def run(self, name, shape, case_args, driver):
        """(command, result record) of one case; the driver's VK_DRIVER_FILES applies to ggml too."""
        line, rec, case = run_shape(self.binary, shape, name, self.backend, bl.driver_env(driver))
        row = dict(shape, ms_median=rec["us_per_run"] / 1e3, ms_min=None, iters=rec["runs"], status="ok",
                   tflops=case["flops"] / (rec["us_per_run"] * 1e6), kernel=f"ggml {OP}", splits=None,
                   ggml_case=line, ggml_params=rec["params"], notes=case["notes"])
        return ggml_command(self.binary, self.backend, "CASE"), row
