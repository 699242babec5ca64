#!/usr/bin/env python3
"""Times ggml's Vulkan flash attention (test-backend-ops perf) and vkattn bench on the same shapes, alternating.

Its parser and test_file_line/run_shape are also the adapter of bench/compare.py's ggml=PATH program,
which runs the cases of bench/cases files instead of ggml's perf list.

ggml is not part of vkattn: build its test-backend-ops yourself (docs/performance.md says how), then

    /usr/bin/python3 bench/compare_ggml.py --ggml /path/to/ggml-build/bin/test-backend-ops \\
        --vkattn build/release/tools/vkattn --json results.json

runs, for each of --rounds rounds (default 3), first `test-backend-ops perf -o FLASH_ATTN_EXT -b Vulkan0
-p REGEX` (one process: every FLASH_ATTN_EXT case of ggml's perf list whose parameter string matches
REGEX), then `vkattn bench --json` on the shape of each case ggml ran, and prints per case ggml GFLOP/s
and vkattn GFLOP/s (the slowest round and the median over the rounds) and the ratio of the medians,
vkattn / ggml (> 1: vkattn faster). Alternating spreads any drift of a shared machine over both sides.
ggml-vulkan leaves CPU devices (lavapipe) out unless GGML_VK_VISIBLE_DEVICES names them: on a machine
whose only Vulkan device is lavapipe, run the script with GGML_VK_VISIBLE_DEVICES=0.

Shapes. test-backend-ops has no command-line shapes: its perf mode runs a fixed list (tests/
test-backend-ops.cpp, make_test_cases_perf), which -p filters by a regex on each case's parameter
string. The shapes vkattn runs are read from what ggml printed (hsk, hsv, nh, nr23, kv, nb, type_K/V):
batch = nr23[1], query heads = nh*nr23[0], KV heads = nh, seq_q = nb, seq_k = kv, dims hsk/hsv, the
K/V type as vkattn's storage dtype. The default REGEX keeps the f16 cases closest to issue 12's: its
decode shape (32 query heads over 8 KV heads, d128, seq_q 1) at 8k and 16k keys (the list has no 32k
case) and the list's only f16 prefill, Qwen3-VL's 16 heads d72 5776 x 5776 (there is no 1024 x 1024
one; on lavapipe ggml took 2-5 minutes per call of it and 10-17 minutes per round). --params picks others, e.g.
'kv=(8192|16384),nb=1,' and the like for a quicker decode-only run.

Exact shapes (--test-file FILE). test-backend-ops --test-file reads cases from a file instead of its
list: one line per op, "OP TYPE ne0 ne1 ne2 ne3 N_PARAMS params... N_SRC (TYPE ne0..ne3 nb0..nb3)... NAME"
(numbers as ggml's enums; nb all 0 for contiguous sources; op_params as int32, floats by their bits).
bench/cases/ggml-issue12-shapes.txt holds issue 12's four shapes that way: FLASH_ATTN_EXT (op 74 in the
ggml this was written against; check ggml.h's enum for yours) with an f32 output (type 0), scale
1/sqrt(dim), no max_bias or softcap, prec f32 (10), sources Q f32, K and V f16 (type 1), no mask:
prefill H8 1024x1024 d64 and d128, and decode H32 over KV8, d128, 8k and 32k keys. Such cases print
as name=...,type=...,ne=[...],op_params=[i:v,...],sources=T[ne],T[ne],...; the shape is read from the
sources (Q [D, seq_q, H, B], K [D, seq_k, KVH, B], V [Dv, seq_k, KVH, B], a 4th source is the mask,
a 5th the sinks) and op_params (scale, max_bias, softcap, prec). ggml prints no FLOP rate for them,
so the GFLOP/s come from us/run and the FLOP count below. Mind the time: test-backend-ops sizes a
generic case's graph by memory, not FLOPs (32 GiB / the op's bytes, up to ~8000 runs), so a prefill
case of a few MB runs thousands of times — hours on lavapipe (measured: the 1024x1024 d64 case had not
finished after 5 minutes on a quiet machine, nor its round after 67 minutes under load). The decode
cases (33 and 131 MB) take one and a few minutes: `--test-file bench/cases/ggml-issue12-shapes.txt
--params decode` runs those.

What differs between the two sides is printed under the table (and kept in the JSON): ggml's test
keeps Q and O in f32 (vkattn stores Q, K, V and O in one dtype), adds an f16 mask when mask=1
(random values in [-1, 1]; vkattn bench runs without a mask), reads K/V as views of a cache twice as
long (kv_view=1), and accumulates in f32 (prec=f32, as vkattn always does). Cases vkattn cannot
compute (softcap, ALiBi, sinks, quantized or mixed K/V types) are listed but not run by vkattn.

FLOPs: 2·(Dqk+Dv) per (query, key) pair on both sides, vkattn's convention (tools/drivers/bench_metrics.hpp),
which is also ggml's op_flops for FLASH_ATTN_EXT; the script checks each GFLOP/s it derives from
ggml's us/run against the rate ggml prints. Timing: ggml times, on the host clock, graphs holding the op
n_runs times (about 100 GFLOP per graph) until a second has passed, after one warm-up graph, and prints
the mean us/run; vkattn bench prints the median and fastest of its timed runs (GPU timestamps). The
figure of a round is ggml's mean and vkattn's median.

Modes that run neither program:
    --from-json FILE   re-print the table of a recorded results file
    --dry-run          print the plan (rounds, commands, output); runs nothing
"""
import datetime
import os
import platform
import re
import statistics
import struct
import subprocess
import sys

import compare_torch as ct
import compare_torch_cpu as cc

PROG = "compare_ggml.py"
TOOL = "compare_ggml"
DEFAULT_ROUNDS = 3
DEFAULT_BACKEND = "Vulkan0"
OP = "FLASH_ATTN_EXT"
# The f16 cases of ggml's perf list nearest to issue 12's shapes: its decode shape (H32 over KV8, d128,
# seq_q 1) at 8192 keys (issue 12's) and 16384 (the nearest to its 32768), and the list's one f16 prefill
# (Qwen3-VL: H16, d72, 5776 x 5776, no mask; there is no 1024 x 1024 one).
DEFAULT_PARAMS = (r"^(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(8192|16384),nb=1|hsk=72,hsv=72,nh=16,nr23=\[1,1\],kv=5776,"
                  r"nb=5776),.*type_K=f16,type_V=f16")
# vkattn's side: compare_torch's caps (10 warm-ups, 50 timed runs) within seconds per case and round.
DEFAULT_BUDGET = 10.0
RATIO_CONVENTION = "vkattn GFLOP/s / ggml GFLOP/s (= ggml us/run / vkattn us); > 1: vkattn faster"
GGML_TIMING = ("test-backend-ops perf: host clock around ggml_backend_graph_compute of a graph holding the op n_runs "
               "times (n_runs = 100 GFLOP / the op's FLOPs + 1 on a GPU backend), repeated until >= 1 s, after one "
               "warm-up graph; the mean per op (us/run)")
VKATTN_TIMING = "vkattn bench --json: GPU timestamps, the median (and fastest) of the timed runs after the warm-ups"
# ggml's storage types that vkattn has as a storage dtype
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


# ---------------------------------------------------------------------------------------------------
# ggml's side: its console output


def split_params(text):
    """'a=1,b=[2,3],c=x' -> {'a': '1', 'b': '[2,3]', 'c': 'x'} (commas inside brackets kept)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
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
            raise ct.Failure(f"ggml's parameter string {text!r}: {part!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def _value(text):
    """'8' -> 8, '0.000000' -> 0.0, '[4,1]' -> [4, 1], 'f16' -> 'f16'."""
    if text.startswith("[") and text.endswith("]"):
        return [_value(t.strip()) for t in text[1:-1].split(",") if t.strip()]
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def parse_params(text):
    """ggml's FLASH_ATTN_EXT parameter string as a dict of numbers, lists and names."""
    return {k: _value(v) for k, v in split_params(text).items()}


def parse_ggml_output(text):
    """What `test-backend-ops perf` printed: {"device", "vulkan_devices", "results": [...]}.

    Each result: {"op", "params" (the string), "supported", and if supported "runs", "us_per_run",
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


# ggml's type names in a generic case's sources (ggml_type_name)
_SOURCE = re.compile(r"(?P<type>[a-z0-9_]+)\[(?P<ne>[0-9,\s]+)\](?:nb\[[0-9,\s]+\])?")


def _int32_bits_as_float(value):
    return struct.unpack("<f", struct.pack("<i", int(value)))[0]


def parse_generic(text):
    """A --test-file case's string (test_generic_op::vars) as the perf list's parameters.

    'name=N,type=f32,ne=[128,32,1,1],op_params=[0:1035273459,3:10],sources=f32[128,1,32,1],f16[...],f16[...]'
    -> {"name", "hsk", "hsv", "nh" (KV heads), "nr23" [query heads per KV head, batch], "kv", "nb", "type_K",
    "type_V", "mask", "sinks", "scale", "max_bias", "logit_softcap", "prec", "generic": True}.
    """
    head, sep, sources = text.partition(",sources=")
    if not sep:
        raise ct.Failure(f"ggml's {OP}({text}): a --test-file case without sources=")
    p = split_params(head)
    ops = {}
    for item in p.get("op_params", "[]").strip("[]").split(","):
        if item.strip():
            index, colon, value = item.partition(":")
            if not colon:
                raise ct.Failure(f"ggml's {OP}({text}): op_params entry {item!r} is not index:value")
            ops[int(index)] = int(value)
    srcs = []
    pos = 0
    while pos < len(sources):
        found = _SOURCE.match(sources, pos)
        if not found:
            raise ct.Failure(f"ggml's {OP}({text}): cannot read the sources at {sources[pos:pos + 30]!r}")
        srcs.append((found.group("type"), [int(n) for n in found.group("ne").split(",")]))
        pos = found.end() + (1 if found.end() < len(sources) and sources[found.end()] == "," else 0)
    if len(srcs) < 3 or any(len(ne) != 4 for _, ne in srcs):
        raise ct.Failure(f"ggml's {OP}({text}): needs Q, K and V sources of 4 dims each")
    (tq, q), (tk, k), (tv, v) = srcs[:3]
    if q[2] % max(k[2], 1) or k[1] != v[1] or k[2] != v[2] or k[0] != q[0]:
        raise ct.Failure(f"ggml's {OP}({text}): Q {q}, K {k}, V {v} are not one attention problem")
    prec = ops.get(3, 0)
    return {"name": p.get("name"), "hsk": q[0], "hsv": v[0], "nh": k[2], "nr23": [q[2] // k[2], q[3]], "kv": k[1],
            "nb": q[1], "type_K": tk, "type_V": tv, "type_Q": tq, "mask": int(len(srcs) > 3),
            "sinks": int(len(srcs) > 4), "scale": _int32_bits_as_float(ops.get(0, 0)),
            "max_bias": _int32_bits_as_float(ops.get(1, 0)), "logit_softcap": _int32_bits_as_float(ops.get(2, 0)),
            "prec": "f32" if prec == 10 else "def", "generic": True}


def ggml_flops(p):
    """test_flash_attn_ext::op_flops: 2 * nh*nr23[0] * nb * (hsk + hsv) * kv * nr23[1]."""
    return 2 * p["nh"] * p["nr23"][0] * p["nb"] * (p["hsk"] + p["hsv"]) * p["kv"] * p["nr23"][1]


NEEDED = ("hsk", "hsv", "nh", "nr23", "kv", "nb", "type_K", "type_V")


def case_of(params_text):
    """One ggml FLASH_ATTN_EXT case: {"params", "p", "shape" (vkattn's, or None), "skip" (why vkattn cannot
    run it, or None), "notes" (what differs between the sides), "flops" (ggml's count)}."""
    p = parse_generic(params_text) if ",sources=" in params_text else parse_params(params_text)
    missing = [k for k in NEEDED if k not in p]
    if missing:
        raise ct.Failure(f"ggml's {OP}({params_text}) lacks {', '.join(missing)}: not the test_flash_attn_ext "
                         "parameters this script knows")
    for k in ("hsk", "hsv", "nh", "kv", "nb"):
        if not isinstance(p[k], int) or p[k] < 1:
            raise ct.Failure(f"ggml's {OP}({params_text}): {k}={p[k]!r} is not a positive integer")
    if not (isinstance(p["nr23"], list) and len(p["nr23"]) == 2 and all(isinstance(n, int) and n >= 1 for n in p["nr23"])):
        raise ct.Failure(f"ggml's {OP}({params_text}): nr23={p['nr23']!r} is not [n2,n3]")
    notes, skip = [], None
    dtype = DTYPE_OF_GGML.get(p["type_K"]) if p["type_K"] == p["type_V"] else None
    if dtype is None:
        skip = f"K {p['type_K']} / V {p['type_V']}: vkattn stores K and V in one of f32, f16, bf16"
    if p.get("sinks", 0):
        skip = skip or "attention sinks: vkattn has none"
    if p.get("max_bias", 0.0):
        skip = skip or "ALiBi (max_bias): vkattn has none"
    if p.get("logit_softcap", 0.0):
        skip = skip or "logit softcap: vkattn has none"
    if p["hsk"] > 256 or p["hsv"] > 256:
        skip = skip or "head dim over 256: vkattn bench takes 1..256"
    shape = None
    if dtype is not None:
        shape = dict(batch=p["nr23"][1], heads=p["nh"] * p["nr23"][0], kv_heads=p["nh"], seq_q=p["nb"], seq_k=p["kv"],
                     dim_qk=p["hsk"], dim_v=p["hsv"], causal="none", dtype=dtype)
        notes.append(f"Q and O: {p.get('type_Q', 'f32')} in ggml's test, {dtype} in vkattn (one storage dtype); "
                     f"K/V {dtype} on both")
    if p.get("mask", 0) and p.get("generic"):
        notes.append("ggml's case has a mask source (random values); vkattn bench runs without one")
    elif p.get("mask", 0):
        # init_tensor_kq_mask: uniform in [-1, 1], then int(0.2*elements/8192) blocks of 64 rows x 128 keys set
        # to -inf or 0 (a coin toss each)
        blocks = int(0.2 * p["kv"] * p["nb"] * p["nr23"][1] / (128 * 64))
        notes.append(f"ggml adds an f16 mask (seq_q x seq_k, random in [-1, 1], {blocks} block(s) of 64 rows x 128 keys "
                     "set to -inf or 0); vkattn bench runs without one")
        if p["nb"] >= 32:
            notes.append("ggml-vulkan first scans the mask for all -inf / all-0 blocks (fa_mask_opt, seq_q >= 32) and "
                         "may skip key blocks")
    if p.get("prec") not in (None, "f32"):
        notes.append(f"ggml prec={p['prec']}: f16 accumulation allowed; vkattn accumulates in f32")
    if p.get("kv_view", 0):
        notes.append("ggml's K/V are views of a cache twice as long (head stride 2*seq_k rows); vkattn's are dense")
    if p.get("permute", [0, 1, 2, 3]) != [0, 1, 2, 3]:
        notes.append(f"ggml's tensors are permuted ({p['permute']}); vkattn's layout is BHSD")
    if p.get("v_is_view_of_k", 0):
        notes.append("ggml's V is a view of K (MLA); vkattn reads a separate V")
    return {"params": params_text, "p": p, "shape": shape, "skip": skip, "notes": notes, "flops": ggml_flops(p)}


def ggml_gflops(flops, us_per_run):
    return flops / (us_per_run * 1e3) if us_per_run and us_per_run > 0 else None


def printed_rate_agrees(rec, flops):
    """Whether ggml's printed FLOP rate matches flops / us_per_run (it prints 2 decimals: allow that, plus 1%).
    None when ggml printed no rate."""
    printed = rec.get("printed_flops_per_s")
    if printed is None:
        return None
    ours = flops / (rec["us_per_run"] * 1e-6)
    unit = next(u for u in (1e12, 1e9, 1e6, 1e3) if printed >= u or u == 1e3)
    return abs(printed - ours) <= 0.01 * ours + 0.005 * unit


def ggml_command(args):
    cmd = [args.ggml, "perf", "-o", OP, "-b", args.backend]
    if args.test_file:
        cmd += ["--test-file", args.test_file]
    if args.params is not None:
        cmd += ["-p", args.params]
    return cmd


def run_ggml(args, log, env=None):
    """One ggml process: (parsed output with only this backend's FLASH_ATTN_EXT results, raw text)."""
    cmd = ggml_command(args)
    log(f"running {' '.join(cmd)}")
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              env=env)
    except OSError as e:
        raise ct.Failure(f"cannot run {cmd[0]}: {e.strerror}") from None
    parsed = parse_ggml_output(done.stdout)
    parsed["results"] = [r for r in parsed["results"] if r["op"] == OP and r["backend"] in (None, args.backend)]
    if not parsed["results"]:
        if re.search(r"^ggml_vulkan: No devices found", done.stdout, re.M):
            raise ct.Failure(f"`{' '.join(cmd)}`: ggml found no Vulkan device; ggml-vulkan leaves CPU devices such as "
                             "lavapipe out unless GGML_VK_VISIBLE_DEVICES names them (e.g. GGML_VK_VISIBLE_DEVICES=0)")
        last = next((line for line in reversed(done.stdout.splitlines()) if line.strip()), "(no output)")
        raise ct.Failure(f"`{' '.join(cmd)}` (exit {done.returncode}) printed no {OP} perf result for backend "
                         f"{args.backend} (a backend of this build? a regex that matches a perf case?); its last line: "
                         f"{_ANSI.sub('', last).strip()[:200]}")
    if done.returncode != 0:
        log(f"{PROG}: warning: test-backend-ops exited with {done.returncode}; keeping the {len(parsed['results'])} "
            "result(s) it printed")
    parsed["exit_code"] = done.returncode
    return parsed, done.stdout


# ---------------------------------------------------------------------------------------------------
# One vkattn shape as a --test-file case (bench/compare.py's ggml program)

# FLASH_ATTN_EXT in ggml.h's enum ggml_op of the ggml this was written against (check yours), and the
# ggml_type of each vkattn storage dtype
FLASH_ATTN_EXT_OP = 74
GGML_TYPE = {"f32": 0, "f16": 1, "bf16": 30}


def test_file_line(shape, name, op=FLASH_ATTN_EXT_OP):
    """The `test-backend-ops --test-file` line of a dense vkattn shape (bench/cases/ggml-issue12-shapes.txt's
    form): output f32 [Dv, H, seq_q, B]; op_params scale 1/sqrt(dim) (as float bits), no max_bias or softcap,
    prec f32 (10); sources Q f32 [D, seq_q, H, B], K [D, seq_k, KVH, B] and V [Dv, seq_k, KVH, B] in the
    shape's dtype, contiguous (nb all 0); no mask. Refuses what ggml's case cannot say (causal, other dtypes)."""
    if shape["causal"] not in (None, "none"):
        raise ct.Failure(f"ggml: causal {shape['causal']} needs a mask, which the generated case does not have")
    kv_type = GGML_TYPE.get(shape["dtype"])
    if kv_type is None:
        raise ct.Failure(f"ggml: dtype {shape['dtype']} has no ggml storage type here ({', '.join(GGML_TYPE)})")
    if shape["heads"] % shape["kv_heads"]:
        raise ct.Failure(f"ggml: {shape['heads']} query heads are not a multiple of {shape['kv_heads']} KV heads")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise ct.Failure(f"ggml: case name {name!r} is not one word")
    b, h, kvh, sq, sk = shape["batch"], shape["heads"], shape["kv_heads"], shape["seq_q"], shape["seq_k"]
    d, dv = shape["dim_qk"], shape["dim_v"]
    scale = struct.unpack("<i", struct.pack("<f", d ** -0.5))[0]
    words = [op, 0, dv, h, sq, b, 4, scale, 0, 0, 10, 3,
             0, d, sq, h, b, 0, 0, 0, 0,
             kv_type, d, sk, kvh, b, 0, 0, 0, 0,
             kv_type, dv, sk, kvh, b, 0, 0, 0, 0, name]
    return " ".join(str(w) for w in words)


def run_shape(binary, shape, name, backend=DEFAULT_BACKEND, env=None, log=lambda text: None):
    """test-backend-ops perf on one dense vkattn shape, through a temporary --test-file of its one line:
    (the line, ggml's result record, case_of of what ggml ran). Fails when ggml ran another shape."""
    import tempfile  # noqa: PLC0415
    from types import SimpleNamespace  # noqa: PLC0415
    line = test_file_line(shape, name)
    with tempfile.TemporaryDirectory(prefix="vkattn-ggml-") as tmp:
        path = os.path.join(tmp, "case.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(line + "\n")
        parsed, _ = run_ggml(SimpleNamespace(ggml=binary, backend=backend, test_file=path, params=None), log, env)
    ran = [r for r in parsed["results"] if r.get("supported")]
    if not ran:
        raise ct.Failure(f"ggml ({binary}, {backend}) does not support case {name}: {line}")
    if len(ran) != 1:
        raise ct.Failure(f"ggml ({binary}) printed {len(ran)} {OP} results for the one case {name}")
    case = case_of(ran[0]["params"])
    if case["shape"] != dict(shape, causal="none"):
        raise ct.Failure(f"ggml ran {case['shape']}, not case {name}'s {shape}")
    return line, ran[0], case, parsed.get("device")


# ---------------------------------------------------------------------------------------------------
# Rounds


def run_rounds(args, log, run_ggml_round=None, run_vk=ct.run_vkattn, loads=None):
    """rounds x (ggml on every case, then vkattn on every case it can run).

    Returns (cases, ggml rounds [parsed], vkattn meta, vkattn rows per round [{case index: row}], raw ggml texts).
    """
    run_ggml_round = run_ggml_round or (lambda: run_ggml(args, log))
    loads = [] if loads is None else loads
    cases, ggml_rounds, vk_rounds, raws, meta, vk_runs = None, [], [], [], None, None
    for r in range(args.rounds):
        loads.append({"round": r + 1, "side": "ggml", "load_1min": cc.load_average()})
        log(f"round {r + 1}/{args.rounds}: ggml")
        parsed, raw = run_ggml_round()
        these = [rec["params"] for rec in parsed["results"]]
        if cases is None:
            cases = [case_of(text) for text in these]
            runnable = [i for i, c in enumerate(cases) if c["shape"] is not None and c["skip"] is None
                        and parsed["results"][i]["supported"]]
            args.shapes, args.preset = [cases[i]["shape"] for i in runnable], []
            vk_runs = list(zip(runnable, cc.vkattn_runs(args)))
        elif these != [c["params"] for c in cases]:
            raise ct.Failure(f"round {r + 1}: test-backend-ops ran other cases than in round 1")
        ggml_rounds.append(parsed)
        raws.append(raw)
        loads.append({"round": r + 1, "side": "vkattn", "load_1min": cc.load_average()})
        log(f"round {r + 1}/{args.rounds}: vkattn")
        rows = {}
        if vk_runs:
            side = cc.run_vkattn_round([run for _, run in vk_runs], run_vk)
            this = {k: side.get(k) for k in ("device", "driver", "host_cpu", "version")}
            if meta is not None and this != meta:
                raise ct.Failure(f"round {r + 1}: vkattn ran on {this['device']}, in round 1 on {meta['device']}")
            meta = this
            for (i, _), row in zip(vk_runs, side["rows"]):
                if ct.shape_of(row) != cases[i]["shape"]:
                    raise ct.Failure(f"vkattn bench answered {cc.shape_label(ct.shape_of(row))} for "
                                     f"{cc.shape_label(cases[i]['shape'])}")
                rows[i] = row
        vk_rounds.append(rows)
    return cases, ggml_rounds, meta, vk_rounds, raws


def spread(values):
    """{min, median} of per-round GFLOP/s (min: the slowest round)."""
    return {"gflops_min": min(values), "gflops_median": statistics.median(values)}


def ggml_entry(case, records):
    if not all(rec["supported"] for rec in records):
        return {"status": "unsupported", "reason": "test-backend-ops: not supported by the backend"}
    rounds = []
    for rec in records:
        rounds.append({"us_per_run": rec["us_per_run"], "runs": rec["runs"],
                       "gflops": ggml_gflops(case["flops"], rec["us_per_run"]),
                       "printed_gflops": None if rec["printed_flops_per_s"] is None else rec["printed_flops_per_s"] / 1e9,
                       "printed_rate_agrees": printed_rate_agrees(rec, case["flops"])})
    entry = {"status": "ok"}
    entry.update(spread([x["gflops"] for x in rounds]))
    entry["rounds"] = rounds
    return entry


def vkattn_entry(case, rows):
    if case["skip"]:
        return {"status": "not run", "reason": case["skip"]}
    if not rows:
        return {"status": "not run", "reason": "ggml did not run it"}
    skipped = [r for r in rows if r["status"] != "ok"]
    if skipped:
        return {"status": "skipped", "reason": skipped[0].get("reason") or "no reason given",
                "rounds": [ct.vkattn_record(r) for r in rows]}
    rounds = []
    for row in rows:
        rec = ct.vkattn_record(row)
        rec["iters"] = row.get("iters")
        rec["gflops"] = cc.gflops(case["shape"], rec["ms"])
        rec["gflops_fastest"] = cc.gflops(case["shape"], rec.get("ms_min"))
        rounds.append(rec)
    entry = {"status": "ok"}
    entry.update(spread([x["gflops"] for x in rounds]))
    for k in ("path", "kernel", "splits"):
        if k in rounds[-1]:
            entry[k] = rounds[-1][k]
    entry["rounds"] = rounds
    return entry


def merge(cases, ggml_rounds, meta, vk_rounds, info):
    doc = {"tool": TOOL}
    doc.update(info)
    doc["vkattn"] = dict(meta or {})
    doc.setdefault("flops", ct.FLOP_CONVENTION + "; ggml's op_flops of FLASH_ATTN_EXT is the same count")
    doc.setdefault("ratio", RATIO_CONVENTION)
    doc["rounds"] = len(ggml_rounds)
    entries = []
    for i, case in enumerate(cases):
        entry = {"case": f"{OP}({case['params']})", "params": case["p"], "shape": case["shape"], "flops": case["flops"],
                 "notes": case["notes"]}
        entry["ggml"] = ggml_entry(case, [g["results"][i] for g in ggml_rounds])
        vk_rows = [rows[i] for rows in vk_rounds if i in rows]
        entry["vkattn"] = vkattn_entry(case, vk_rows) if entry["ggml"]["status"] == "ok" else \
            {"status": "not run", "reason": "ggml's backend does not support it"}
        g, v = entry["ggml"], entry["vkattn"]
        entry["ratio_median"] = (v["gflops_median"] / g["gflops_median"]
                                 if g.get("status") == "ok" and v.get("status") == "ok" else None)
        if g.get("status") == "ok" and any(x["printed_rate_agrees"] is False for x in g["rounds"]):
            entry["notes"] = entry["notes"] + ["ggml's printed FLOP rate differs from its us/run and this script's FLOP "
                                               "count: the two sides may count FLOPs differently"]
        entries.append(entry)
    doc["entries"] = entries
    return doc


# ---------------------------------------------------------------------------------------------------
# The table


def _num(x):
    return "-" if x is None else f"{x:.3g}"


def shape_columns(e):
    s = e["shape"]
    p = e["params"]
    if s is None:
        return (f"{p['nr23'][1]:>3} {p['nh'] * p['nr23'][0]:>3} {p['nh']:>3} {p['nb']:>5} {p['kv']:>6} {p['hsk']:>4} "
                f"{p['hsv']:>4} {p['type_K'] + '/' + p['type_V']:>7}")
    return (f"{s['batch']:>3} {s['heads']:>3} {s['kv_heads']:>3} {s['seq_q']:>5} {s['seq_k']:>6} {s['dim_qk']:>4} "
            f"{s['dim_v']:>4} {s['dtype']:>7}")


def format_table(doc):
    g, vk = doc.get("ggml", {}), doc.get("vkattn", {})
    lines = [f"ggml {g.get('commit') or '(commit not given)'} test-backend-ops -b {g.get('backend')} on "
             f"{g.get('device') or 'unknown'} | vkattn {vk.get('version')} on {vk.get('device')} ({vk.get('driver')}) | "
             f"{doc.get('cpu', 'CPU unknown')} | {doc.get('date')}"]
    if doc.get("synthetic"):
        lines.append("SYNTHETIC figures (a test fixture), not a measurement")
    lines.append(f"{doc.get('rounds')} rounds alternating (ggml on every case, then vkattn on every shape); GFLOP/s by "
                 "the same FLOP count on both sides; min: the slowest round, med: the median over the rounds "
                 "(a round: ggml's mean us/run, vkattn's median run)")
    lines.append(f"ratio = {RATIO_CONVENTION}")
    lines.append(f"{'#':>2} {'B':>3} {'H':>3} {'KVH':>3} {'seq_q':>5} {'seq_k':>6} {'dqk':>4} {'dv':>4} {'K/V':>7} {'mask':>4}"
                 f" | {'ggml min':>8} {'med':>7} | {'vkattn min':>10} {'med':>7} | {'ratio med':>9} | vkattn kernel")
    notes = {}
    for n, e in enumerate(doc["entries"], 1):
        gg, v = e["ggml"], e["vkattn"]
        line = f"{n:>2} {shape_columns(e)} {'yes' if e['params'].get('mask') else 'no':>4}"
        if gg.get("status") == "ok":
            line += f" | {_num(gg['gflops_min']):>8} {_num(gg['gflops_median']):>7}"
        else:
            line += f" | {'unsupp.':>8} {'-':>7}"
        if v.get("status") == "ok":
            line += f" | {_num(v['gflops_min']):>10} {_num(v['gflops_median']):>7}"
        else:
            line += f" | {v.get('status', '-'):>10} {'-':>7}"
            if v.get("reason"):
                notes.setdefault(f"vkattn {v['status']}: {v['reason']}", []).append(n)
        line += f" | {_num(e.get('ratio_median')):>9}"
        if v.get("status") == "ok":
            line += f" | {v.get('path', '?')}/{v.get('kernel', '?')}" + (f" x{v['splits']}" if (v.get("splits") or 1) > 1 else "")
        lines.append(line)
        for text in e.get("notes", []):
            notes.setdefault(text, []).append(n)
    found = [e["ratio_median"] for e in doc["entries"] if e.get("ratio_median")]
    if found:
        lines.append(f"geometric mean of the median ratios: {statistics.geometric_mean(found):.3g} over "
                     f"{len(found)} case(s)")
    lines.append("ggml's cases:")
    for n, e in enumerate(doc["entries"], 1):
        lines.append(f"  {n}: {e['case']}")
    if notes:
        lines.append("differences between the sides (case numbers):")
        for text, which in notes.items():
            lines.append(f"  [{','.join(str(n) for n in which)}] {text}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Command line


def parse_args(argv):
    p = ct.Parser(prog=PROG, description=__doc__.splitlines()[0],
                  epilog="See docs/performance.md for building test-backend-ops and for a recorded run.")
    p.add_argument("--ggml", metavar="PATH", help="ggml's test-backend-ops binary, built with -DGGML_VULKAN=ON "
                                                  "-DGGML_BUILD_TESTS=ON (required unless --from-json)")
    p.add_argument("--vkattn", default=None, help=f"the vkattn binary (default: {ct.DEFAULT_VKATTN})")
    p.add_argument("--rounds", type=ct.positive_int, default=DEFAULT_ROUNDS,
                   help=f"rounds of (ggml, then vkattn) (default {DEFAULT_ROUNDS})")
    p.add_argument("--json", metavar="OUT", help="write the results (both sides per case, ggml's raw output) as JSON here")
    p.add_argument("--params", default=None, metavar="REGEX",
                   help="test-backend-ops -p: a regex on the parameter string of ggml's perf cases (default: the f16 "
                        f"cases nearest to issue 12's shapes, {DEFAULT_PARAMS}; with --test-file, none)")
    p.add_argument("--test-file", metavar="FILE",
                   help="test-backend-ops --test-file: run the cases of FILE instead of ggml's perf list (e.g. "
                        "bench/cases/ggml-issue12-shapes.txt, issue 12's exact shapes)")
    p.add_argument("--backend", default=DEFAULT_BACKEND, help=f"test-backend-ops -b (default {DEFAULT_BACKEND})")
    p.add_argument("--ggml-commit", metavar="TEXT", help="the ggml commit the binary was built from, for the record "
                                                         "(test-backend-ops built outside a git checkout prints none)")
    p.add_argument("--device", help="passed to vkattn bench --device (default: vkattn's choice)")
    p.add_argument("--warmup", type=ct.non_negative_int, help=f"vkattn's warm-up runs per case and round (default "
                                                              f"{ct.DEFAULT_WARMUP}, capped by --budget; when given, exact)")
    p.add_argument("--iters", type=ct.positive_int, help=f"vkattn's timed runs per case and round (default {ct.DEFAULT_ITERS}, "
                                                         "capped by --budget; when given, exact)")
    p.add_argument("--budget", type=ct.positive_float, default=DEFAULT_BUDGET,
                   help=f"without --warmup/--iters: seconds vkattn's timed runs of one case may take per round (default "
                        f"{DEFAULT_BUDGET:g}); ggml's counts are its own")
    p.add_argument("--from-json", metavar="FILE", help="re-print the table of a results file; runs nothing")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit; runs nothing")
    args = p.parse_args(argv)

    if args.from_json:
        others = [f"--{n.replace('_', '-')}" for n in ("ggml", "vkattn", "json", "ggml_commit", "device", "warmup", "iters",
                                                       "test_file")
                  if getattr(args, n) is not None]
        others += ["--dry-run"] * args.dry_run
        if others:
            p.error(f"--from-json re-prints a recorded file; {', '.join(others)} would be ignored")
        if not os.path.isfile(args.from_json):
            p.error(f"--from-json {args.from_json}: no such file")
        return args
    if not args.ggml:
        p.error("--ggml PATH (ggml's test-backend-ops) is required")
    if args.test_file is not None and not os.path.isfile(args.test_file):
        p.error(f"--test-file {args.test_file}: no such file")
    if args.params is None and args.test_file is None:
        args.params = DEFAULT_PARAMS
    try:
        re.compile(args.params or "")
    except re.error as e:
        p.error(f"--params {args.params!r}: not a regex ({e})")
    if args.vkattn is None:
        args.vkattn = ct.default_vkattn()
    if args.json:
        parent = os.path.dirname(os.path.abspath(args.json))
        if os.path.isdir(args.json) or not os.path.isdir(parent):
            p.error(f"--json {args.json}: {'a directory' if os.path.isdir(args.json) else 'its directory does not exist'}")
    if not args.dry_run:
        if not ct.is_executable(args.ggml):
            p.error(f"--ggml {args.ggml}: no such executable (ggml's test-backend-ops; docs/performance.md says "
                    "how to build it)")
        if not ct.is_executable(args.vkattn):
            p.error(f"--vkattn {args.vkattn}: no such executable (build it: cmake --preset release && "
                    "cmake --build --preset release)")
    # what compare_torch_cpu.vkattn_runs reads besides the shapes (filled in from ggml's output)
    args.shapes, args.preset, args.dtype, args.max_seq = [], [], None, None
    return args


def dry_run(args):
    print("plan (dry run: nothing is run)")
    print(f"  {args.rounds} round(s), each: ggml on every case, then vkattn on the shape of every case ggml ran")
    missing = "" if ct.is_executable(args.ggml) else "   (binary not found)"
    print(f"  ggml: {' '.join(ggml_command(args))}{missing}")
    missing = "" if ct.is_executable(args.vkattn) else "   (binary not found)"
    options = (["--device", args.device] if args.device else []) + cc.counts_options(args)
    print(f"  vkattn: {args.vkattn} bench --json --batch B --heads H --kv-heads G --seq-q Sq --seq-k Sk --dim D --dim-v Dv "
          f"--dtype T --causal none {' '.join(options)}{missing}")
    print("  shapes: read from ggml's output (batch = nr23[1], heads = nh*nr23[0], kv_heads = nh, seq_q = nb, "
          "seq_k = kv, dims hsk/hsv, dtype = type_K)")
    print(f"  timing: ggml {GGML_TIMING}; vkattn {VKATTN_TIMING}")
    print(f"  ratio: {RATIO_CONVENTION}")
    print(f"  output: {args.json or '(no --json: the table only)'}")
    return 0


def from_json(args):
    print(format_table(ct.read_tool_results(args.from_json, TOOL, PROG)))
    return 0


def log_stderr(text):
    print(text, file=sys.stderr, flush=True)


def run(args, log=log_stderr):
    info = {"date": datetime.date.today().isoformat(), "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "cpu": cc.cpu_model(), "cores": cc.cpu_threads(), "python": platform.python_version()}
    loads = []
    cases, ggml_rounds, meta, vk_rounds, raws = run_rounds(args, log, loads=loads)
    loads.append({"round": None, "side": "end", "load_1min": cc.load_average()})
    first = ggml_rounds[0]
    info["ggml"] = {"binary": os.path.abspath(args.ggml), "commit": args.ggml_commit, "backend": args.backend,
                    "params_regex": args.params, "test_file": args.test_file, "command": " ".join(ggml_command(args)), "device": first["device"],
                    "vulkan_devices": first["vulkan_devices"], "timing": GGML_TIMING,
                    "exit_codes": [g["exit_code"] for g in ggml_rounds], "raw_output": raws}
    info["vkattn_commands"] = [" ".join(cmd) for _, cmd, _ in cc.vkattn_runs(args)]
    info["vkattn_timing"] = VKATTN_TIMING
    info["load_average"] = loads
    info["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    doc = merge(cases, ggml_rounds, meta, vk_rounds, info)
    if meta and first["device"] and meta.get("device") and \
            first["device"].split(" (")[0].lower() != meta["device"].split(" (")[0].lower():
        log(f"{PROG}: warning: ggml ran on {first['device']}, vkattn on {meta['device']}")
    if args.json:
        ct.write_tool_results(args.json, doc)
    print(format_table(doc))
    if args.json:
        print(f"results: {args.json}")
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return ct.tool_main(PROG, args, dry_run, from_json, run)


if __name__ == "__main__":
    sys.exit(main())
