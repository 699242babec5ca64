"""What bench/run.py, bench/compare.py, its peers' adapters (bench/peer_*.py) and bench/report.py share:
case files, running one case, the results file format, vkattn's FLOP count and budget rule. Not a
script itself.

A case file (bench/cases/*.txt) holds one case a line: a stable name, then the `vkattn bench`
arguments of the shape. `#` starts a comment.

A results file (bench/results/<device>-<date>.json) is one device and one date:

    {"format": "vkattn-bench-results/1", "device": ..., "driver": ..., "host_cpu": ..., "date": "YYYY-MM-DD",
     "runs": [{"label": ..., "command": the command that ran, "binary": ..., "version": ...,
               "vk_driver_files": ... or null, "started": ISO time, "note": ... (optional),
               "cases": [{"name": ..., "case_file": ..., "args": [...], "round": N (optional),
                          "command": [...], "result": the result record of `vkattn bench --json`}]}]}

A run is one program (one vkattn build, or a peer: then "program" names it and "result" holds what
that peer's adapter, bench/peer_*.py, measured: at least ms_median and tflops). The runs of one comparison share a
"comparison" name (bench/compare.py: "A vs B"); their rounds are cases with the same name and their
own "round". bench/report.py shows a comparison of two vkattn runs as before/after, one of vkattn
and peers as ratios, and runs without a comparison as each device's latest figures.
"""
import datetime
import hashlib
import json
import os
import re
import shlex
import statistics
import subprocess

FORMAT = "vkattn-bench-results/1"
HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")
RESULTS_DIR = os.path.join(HERE, "results")
TIMING_OPTIONS = {"--json", "--csv", "--warmup", "--iters", "--budget", "--sweep", "--device"}


class CaseError(Exception):
    pass


def resolve_case_file(name):
    """A case file by path, or by its name in bench/cases ('issue12' or 'issue12.txt')."""
    if os.path.exists(name):
        return name
    for candidate in (os.path.join(CASES_DIR, name), os.path.join(CASES_DIR, name + ".txt")):
        if os.path.exists(candidate):
            return candidate
    raise CaseError(f"{name}: no such case file" + ("" if os.sep in name else f" (nor bench/cases/{name}[.txt])"))


def read_cases(path):
    """[(name, [args])] of one case file, in its order; errors name the file and line."""
    cases, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            text = text.split("#", 1)[0].strip()
            if not text:
                continue
            words = shlex.split(text)
            name, args = words[0], words[1:]
            where = f"{path}:{number}"
            if name.startswith("-") or not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
                raise CaseError(f"{where}: a case line starts with its name (letters, digits, _ . + -), got {name!r}")
            if name in seen:
                raise CaseError(f"{where}: case {name!r} named twice")
            bad = [a for a in args if a.split("=", 1)[0] in TIMING_OPTIONS]
            if bad:
                raise CaseError(f"{where}: {bad[0]} belongs to the driver's options, not to a case")
            seen.add(name)
            cases.append((name, args))
    if not cases:
        raise CaseError(f"{path}: no cases")
    return cases


def load_cases(files, only=None):
    """[(case_file, name, args)] of every file given, filtered by the names in `only` (if any)."""
    out = []
    for given in files:
        path = resolve_case_file(given)
        label = os.path.relpath(path, os.path.dirname(HERE)) if path.startswith(os.path.dirname(HERE)) else path
        out += [(label, name, args) for name, args in read_cases(path)]
    if only:
        known = {name for _, name, _ in out}
        missing = [n for n in only if n not in known]
        if missing:
            raise CaseError(f"no case named {missing[0]!r} in {', '.join(files)}")
        out = [c for c in out if c[1] in only]
    return out


def driver_env(driver):
    """The environment of a run on `driver`: 'system' (the loader's choice) or an ICD manifest."""
    env = dict(os.environ)
    if driver and driver != "system":
        env["VK_DRIVER_FILES"] = driver
    return env


def binary_version(binary):
    """`vkattn --version` and the binary's sha256 (its first 12 hex digits): which build ran."""
    try:
        text = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        text = "?"
    digest = hashlib.sha256()
    with open(binary, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{text} (sha256 {digest.hexdigest()[:12]})"


def run_case(binary, driver, args, extra=(), timeout=1800, env_extra=None):
    """One `vkattn bench --json` process: (command, its document, its one result record). `env_extra`:
    more environment variables for it (e.g. MESA_SHADER_CACHE_DIR)."""
    command = [binary, "bench", "--json", *args, *extra]
    env = driver_env(driver)
    env.update(env_extra or {})
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {proc.returncode}: " + " ".join(proc.stderr.split())[-300:])
    doc = json.loads(proc.stdout)
    if len(doc.get("results", [])) != 1:
        raise RuntimeError(f"{' '.join(command)}: expected one result, got {len(doc.get('results', []))}")
    row = doc["results"][0]
    if row.get("status") != "ok":
        raise RuntimeError(f"{' '.join(command)}: {row.get('status')}: {row.get('reason')}")
    return command, doc, row


def device_slug(device, driver=""):
    """File-name form of a device: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'; llvmpipe ->
    'lavapipe-mesa-22.3.6' (two Mesa versions are two devices)."""
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    if slug.startswith("llvmpipe"):
        mesa = re.search(r"Mesa ([0-9.]+)", driver or "")
        return "lavapipe" + (f"-mesa-{mesa.group(1)}" if mesa else "")
    return slug or "unknown-device"


def today():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def results_path(results_dir, device, driver, date):
    return os.path.join(results_dir, f"{device_slug(device, driver)}-{date}.json")


def add_run(path, meta, run):
    """Append `run` to the results file at `path` (made if absent; its device must match)."""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("format") != FORMAT:
            raise CaseError(f"{path}: not a {FORMAT} file")
        if (doc["device"], doc["driver"]) != (meta["device"], meta["driver"]):
            raise CaseError(f"{path}: holds {doc['device']} / {doc['driver']}, not {meta['device']} / {meta['driver']}")
    else:
        doc = {"format": FORMAT, **meta, "runs": []}
    doc["runs"].append(run)
    write_json(path, doc)
    return doc


def write_json(path, doc):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")


def read_results(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("format") != FORMAT:
        raise CaseError(f"{path}: not a {FORMAT} file")
    return doc


def gflops(row):
    return row["tflops"] * 1e3 if row.get("tflops") is not None else None


# ---------------------------------------------------------------------------------------------------
# What the peers' adapters (bench/peer_*.py) share with vkattn: its FLOP count and its budget rule


def visible_pairs(seq_q, seq_k, causal):
    """(query, key) pairs a causal mask leaves visible in one (batch, head): row i sees
    min(seq_k, max(0, i + 1 + off)) keys, off = 0 top-left or seq_k - seq_q bottom-right."""
    if causal in (None, "none"):
        return seq_q * seq_k
    off = seq_k - seq_q if causal == "bottom-right" else 0
    first = min(max(-off, 0), seq_q)                    # first row that sees a key
    full = min(max(seq_k - 1 - off, first), seq_q)      # first row that sees every key
    ramp = full - first
    return ramp * (first + 1 + off) + ramp * (ramp - 1) // 2 + (seq_q - full) * seq_k


BACKWARD_FLOP_FACTOR = 2.5  # a backward pass counts 2.5 forwards (FlashAttention's convention, vkattn bench --backward's)


def attention_flops(shape):
    """FLOPs of one attention call by vkattn's convention (tools/drivers/bench_metrics.hpp): 2·(Dqk+Dv) per
    visible (query, key) pair, so a peer's TFLOP/s and vkattn's compare as times do; a backward pass
    (shape["backward"] true) counts BACKWARD_FLOP_FACTOR times that."""
    pairs = visible_pairs(shape["seq_q"], shape["seq_k"], shape["causal"])
    flops = 2.0 * shape["batch"] * shape["heads"] * pairs * (shape["dim_qk"] + shape["dim_v"])
    return flops * BACKWARD_FLOP_FACTOR if shape.get("backward") else flops


def tflops(shape, ms):
    return attention_flops(shape) / (ms * 1e-3) * 1e-12 if ms and ms > 0 else None


def run_counts(probe_ms, warmup, iters, budget_s):
    """(warm-ups, timed runs) within a budget of seconds, as `vkattn bench --budget` chooses them, so that a
    peer timed without --warmup/--iters gets the counts vkattn would."""
    probe_ms = max(probe_ms, 1e-3)
    budget_ms = budget_s * 1e3
    return (min(max(int(0.2 * budget_ms / probe_ms), 0), max(warmup - 1, 0)),
            min(max(int(budget_ms / probe_ms), 1), iters))


def refusal_reason(error, caught=()):
    """One line from a peer's exception and the warnings it gave on the way (torch says why a backend
    declined in its warnings, and only "No available kernel" in the exception)."""
    parts = []
    for w in caught:
        text = re.sub(r"\s*\(Triggered internally at [^)]*\)\.?", "", str(getattr(w, "message", w)))
        text = " ".join(text.split())
        if text and text not in parts:
            parts.append(text)
    message = " ".join(str(error).split()) or type(error).__name__
    parts.append(f"{type(error).__name__}: {message}")
    reason = "; ".join(parts)
    return reason if len(reason) <= 600 else reason[:597] + "..."


def summarise(rows):
    """Median and best over rounds of one case's result records."""
    g = [gflops(r) for r in rows if gflops(r) is not None]
    ms = [r["ms_median"] for r in rows if r.get("ms_median") is not None]
    return {"rounds": len(rows),
            "gflops_median": statistics.median(g) if g else None, "gflops_best": max(g) if g else None,
            "ms_median": statistics.median(ms) if ms else None, "ms_best": min(ms) if ms else None,
            "kernel": rows[-1].get("kernel"), "splits": rows[-1].get("splits")}
