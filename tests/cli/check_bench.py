#!/usr/bin/env python3
"""Checks `vkattn bench --sweep` end to end on tiny versions of its presets (--max-seq): the JSON
schema bench/run.py and bench/compare.py record, the shapes of each preset, CSV that parses and agrees with the
JSON, the scaling fits of both paths, --check, skipped shapes with their reason, usage errors (one
stderr line, non-zero exit, nothing on stdout), and the progress line: on a terminal only. Also the
paged KV cache (--paged), per-sequence key lengths (--lengths) and packed variable-length batches
(--varlen): checked, their layout named, their FLOPs and K/V bytes counted per sequence.

    /usr/bin/python3 tests/cli/check_bench.py --vkattn build/release/tools/vkattn

One line per check: PASS/FAIL and what was seen. Exits 1 when any check fails. Every bench run uses
--warmup 0 --iters 1: the figures are not the point, the output is.
"""
import argparse
import csv
import io
import json
import math
import os
import pty
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST = ["--warmup", "0", "--iters", "1"]
TOP_KEYS = ["device", "driver", "host_cpu", "version", "sweep", "reduced", "results", "fits"]
ROW_KEYS = ["batch", "heads", "kv_heads", "seq_q", "seq_k", "dim_qk", "dim_v", "dtype", "causal", "path", "kernel",
            "splits", "chunks", "weights", "device_bytes", "workspace_bytes", "peak_device_bytes", "ms_median",
            "ms_min", "tflops", "gbps", "max_err_over_max_v", "max_weight_err", "status", "reason", "first_run_ms",
            "first_run_pipelines", "first_dispatches", "layout", "page_size", "kv_lengths", "q_lengths", "kv_bytes", "kv_gbps"]
MEASURED = ["device_bytes", "peak_device_bytes", "ms_median", "ms_min", "tflops", "gbps"]
F16_TOLERANCE = 2e-3  # docs/testing.md, "Precision and the tolerances the tests use"


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, name, ok, detail=""):
        detail = " ".join(str(detail).split())  # one line per check
        if ok and len(detail) > 120:
            detail = detail[:117] + "..."
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        self.failed += 0 if ok else 1
        return ok


def bench(vkattn, *args):
    return subprocess.run([vkattn, "bench", *args], capture_output=True, text=True, timeout=600)


def run_ok(checks, name, vkattn, *args):
    """Runs a bench that must succeed with nothing on stderr (stderr is a pipe, not a terminal)."""
    proc = bench(vkattn, *args)
    checks.check(f"{name}: exit 0", proc.returncode == 0, proc.stderr.strip()[-300:])
    checks.check(f"{name}: nothing on stderr when it is not a terminal", proc.stderr == "", repr(proc.stderr[-200:]))
    return proc.stdout if proc.returncode == 0 else None


def check_schema(checks, name, doc, sweep):
    checks.check(f"{name}: top-level keys", all(k in doc for k in TOP_KEYS), str(list(doc)))
    checks.check(f"{name}: sweep is {sweep!r}", doc.get("sweep") == sweep, repr(doc.get("sweep")))
    checks.check(f"{name}: reduced is a bool", isinstance(doc.get("reduced"), bool))
    # A CPU device's processor ("<model>, <n> threads"); null on other devices.
    host = doc.get("host_cpu")
    cpu_device = "llvmpipe" in doc.get("device", "")
    checks.check(f"{name}: host_cpu names the processor of a CPU device, else null",
                 (isinstance(host, str) and host.endswith(" threads") and not host.startswith(","))
                 if cpu_device else host is None, repr(host))
    rows = doc.get("results", [])
    missing = [(i, k) for i, r in enumerate(rows) for k in ROW_KEYS if k not in r]
    checks.check(f"{name}: every result has the schema's keys", rows and not missing, str(missing[:5]))
    bad = [r for r in rows if r.get("status") not in ("ok", "skipped")]
    checks.check(f"{name}: status is ok or skipped", not bad, str(bad[:1]))
    for r in rows:
        if r["status"] == "ok":
            ok = r["reason"] is None and all(isinstance(r[k], (int, float)) for k in MEASURED)
            checks.check(f"{name}: ok row seq {r['seq_k']} {r['path']}: measured, no reason", ok, str(r)[:300])
            # Measured peak: at least the buffers (Q, K, V, O, P), at most their sum with the workspace
            # and the driver's rounding.
            buffers = r["device_bytes"] - r["workspace_bytes"]
            ok = buffers <= r["peak_device_bytes"] <= 1.05 * r["device_bytes"] + 65536
            checks.check(f"{name}: seq {r['seq_k']} {r['path']}: peak_device_bytes {r['peak_device_bytes']} "
                         f"within [{buffers}, {r['device_bytes']} + rounding]", ok)
    return rows


def check_prefill(checks, vkattn):
    out = run_ok(checks, "prefill", vkattn, "--sweep", "prefill", "--max-seq", "256", "--check", "--json", *FAST)
    if out is None:
        return
    doc = json.loads(out)
    rows = check_schema(checks, "prefill", doc, "prefill")
    checks.check("prefill: reduced (capped by --max-seq)", doc["reduced"] is True, doc.get("grid", ""))
    tokens = {r["batch"] * r["seq_q"] for r in rows}
    hidden = {r["heads"] * r["dim_qk"] for r in rows}
    checks.check("prefill: batch*seq is the same total of tokens on every row", len(tokens) == 1, str(tokens))
    checks.check("prefill: heads*dim is the same hidden size on every row", len(hidden) == 1, str(hidden))
    if "reduced for a CPU device" not in doc.get("grid", ""):
        checks.check("prefill: full grid is 16384 tokens, hidden 2048", tokens == {16384} and hidden == {2048},
                     f"{tokens} {hidden}")
    checks.check("prefill: dims 64, 128, 256", {r["dim_qk"] for r in rows} == {64, 128, 256})
    checks.check("prefill: causal and not", {r["causal"] for r in rows} == {"none", "bottom-right"})
    checks.check("prefill: seq_q == seq_k <= --max-seq", all(r["seq_q"] == r["seq_k"] <= 256 for r in rows))
    checks.check("prefill: f16 by default", {r["dtype"] for r in rows} == {"f16"})
    checks.check("prefill: no fits outside the scaling sweep", doc["fits"] == [])
    errs = [r["max_err_over_max_v"] for r in rows]
    checks.check("prefill: --check within the f16 tolerance on every row",
                 all(e is not None and e <= F16_TOLERANCE for e in errs), str(errs))


def check_scaling(checks, vkattn):
    # --max-seq 1024: three sequence lengths per path (256, 512, 1024), the fewest a fit is made from.
    out = run_ok(checks, "scaling json", vkattn, "--sweep", "scaling", "--max-seq", "1024", "--json", *FAST)
    csv_out = run_ok(checks, "scaling csv", vkattn, "--sweep", "scaling", "--max-seq", "1024", "--csv", *FAST)
    # --max-seq 512: two lengths, which always lie on a line: no exponent is printed.
    table = run_ok(checks, "scaling table", vkattn, "--sweep", "scaling", "--max-seq", "512", *FAST)
    two = run_ok(checks, "scaling json, two lengths", vkattn, "--sweep", "scaling", "--max-seq", "512", "--json", *FAST)
    if out is None:
        return
    doc = json.loads(out)
    rows = check_schema(checks, "scaling", doc, "scaling")
    checks.check("scaling: both paths", {r["path"] for r in rows} == {"fused", "unfused"})
    checks.check("scaling: unfused rows write P", all(r["weights"] == (r["path"] == "unfused") for r in rows))
    fits = {(f["path"], f["metric"]): f for f in doc["fits"]}
    want = {(p, m) for p in ("fused", "unfused") for m in ("ms_median", "peak_device_bytes")}
    checks.check("scaling: a time and a memory fit for each path", set(fits) == want, str(sorted(fits)))
    if set(fits) == want:
        checks.check("scaling: fits are finite, over 3 points each",
                     all(math.isfinite(f["exponent"]) and f["points"] == 3 for f in fits.values()), str(doc["fits"]))
        fused, unfused = fits[("fused", "peak_device_bytes")], fits[("unfused", "peak_device_bytes")]
        checks.check("scaling: unfused memory grows faster than fused (P is seq^2)",
                     unfused["exponent"] > fused["exponent"] + 0.3, f"{unfused['exponent']} vs {fused['exponent']}")
    if two is not None:
        checks.check("scaling: no fit from two sequence lengths", json.loads(two)["fits"] == [], two[-300:])
    if csv_out is not None:
        parsed = list(csv.DictReader(io.StringIO(csv_out)))
        checks.check("scaling csv: parses, one row per JSON result", len(parsed) == len(rows),
                     f"{len(parsed)} rows vs {len(rows)}")
        checks.check("scaling csv: the schema's columns", parsed and all(k in parsed[0] for k in ROW_KEYS + ["host_cpu"]))
        same = all(int(c["seq_k"]) == r["seq_k"] and c["path"] == r["path"] and c["status"] == r["status"]
                   for c, r in zip(parsed, rows))
        checks.check("scaling csv: rows agree with the JSON (seq, path, status)", same)
        if set(fits) == want:
            ok = all(c["time_exponent"] and c["memory_exponent"] for c in parsed)
            checks.check("scaling csv: every row carries its path's fitted exponents", ok)
    if table is not None:
        checks.check("scaling table: no exponent from two lengths, said per path",
                     "fit fused: no exponent, fewer than 3" in table and "fit unfused: no exponent, fewer than 3" in table
                     and "seq^" not in table, table[-400:])


def check_decode_and_skips(checks, vkattn):
    # seq_k 1024 needs 4 MiB of K and V in f16, 2048 needs 8: --max-memory 6 skips the second.
    out = run_ok(checks, "decode", vkattn, "--sweep", "decode", "--max-seq", "2048", "--max-memory", "6", "--check",
                 "--json", *FAST)
    if out is None:
        return
    doc = json.loads(out)
    rows = check_schema(checks, "decode", doc, "decode")
    shape = {(r["batch"], r["heads"], r["kv_heads"], r["seq_q"], r["dim_qk"]) for r in rows}
    checks.check("decode: batch 1, 32 heads, 8 KV heads, seq_q 1, dim 128", shape == {(1, 32, 8, 1, 128)}, str(shape))
    checks.check("decode: seq_k 1024 and 2048", [r["seq_k"] for r in rows] == [1024, 2048])
    if len(rows) == 2:
        ran, skipped = rows
        checks.check("decode: seq_k 1024 ran and passed --check",
                     ran["status"] == "ok" and ran["max_err_over_max_v"] is not None and ran["max_err_over_max_v"] <= F16_TOLERANCE,
                     str(ran)[:300])
        ok = (skipped["status"] == "skipped" and isinstance(skipped["reason"], str) and "--max-memory" in skipped["reason"]
              and all(skipped[k] is None for k in MEASURED))
        checks.check("decode: seq_k 2048 skipped, with its reason and no figures", ok, str(skipped)[:300])


def check_single_run(checks, vkattn):
    out = run_ok(checks, "single run", vkattn, "--seq-q", "64", "--heads", "2", "--json", *FAST)
    if out is None:
        return
    doc = json.loads(out)
    check_schema(checks, "single run", doc, None)
    checks.check("single run: not reduced, no fits, f32", doc["reduced"] is False and doc["fits"] == []
                 and doc["results"][0]["dtype"] == "f32")


def check_first_run(checks, vkattn):
    """Each shape's first run is timed apart with the pipelines it built; a later shape that needs the same
    pipelines builds none (two seq_q of one dim and dtype share the fused kernel's pipeline)."""
    out = run_ok(checks, "first run", vkattn, "--seq-q", "48,56", "--heads", "2", "--dim", "24", "--json", *FAST)
    if out is None:
        return
    rows = json.loads(out)["results"]
    first, second = rows[0], rows[1]
    checks.check("first run: the first shape built its pipelines, in a positive time",
                 first["first_run_pipelines"] >= 1 and first["first_run_ms"] > 0, str(first)[:300])
    checks.check("first run: the second shape built none (same pipelines)",
                 second["first_run_pipelines"] == 0 and second["first_run_ms"] > 0, str(second)[:300])
    # Per pipeline (DispatchProfile): each of the first shape's pipelines once, built in that run, with
    # its first dispatch and a warm one; none for the second shape, which built nothing.
    per_pipeline = first["first_dispatches"]
    checks.check("first run: one entry per pipeline it dispatched, each built then, times non-negative",
                 1 <= len(per_pipeline) <= first["first_run_pipelines"]
                 and len({p["pipeline"] for p in per_pipeline}) == len(per_pipeline)
                 and all(p["build_ms"] > 0 and p["first_ms"] >= 0 and p["warm_ms"] >= 0 for p in per_pipeline),
                 str(per_pipeline)[:300])
    checks.check("first run: the second shape has no per-pipeline entries", second["first_dispatches"] == [],
                 str(second["first_dispatches"])[:300])
    checks.check("first run: --warmup 0 --iters 1 still times exactly one run", first["iters"] == 1 and second["iters"] == 1,
                 f'{first["iters"]} {second["iters"]}')


def check_counts_and_budget(checks, vkattn):
    """--warmup/--iters alone are exact; with --budget they are caps (bench/compare.py --budget relies on both)."""
    # Large enough that one run takes far more than 1 ms on lavapipe once its pipeline is built (the
    # probe run follows the shape's first run, so it no longer includes building the pipeline).
    shape = ["--seq-q", "1024", "--heads", "2", "--json"]
    runs, device = {}, ""
    for name, extra in (("exact", ["--warmup", "0", "--iters", "3"]),
                        ("capped", ["--warmup", "0", "--iters", "3", "--budget", "0.001"])):
        out = run_ok(checks, f"counts {name}", vkattn, *shape, *extra)
        doc = json.loads(out) if out else {"results": [{}]}
        runs[name], device = doc["results"][0].get("iters"), doc.get("device", "")
    checks.check("counts: --iters 3 alone runs 3 times", runs["exact"] == 3, repr(runs["exact"]))
    checks.check("counts: --iters 3 --budget 0.001 runs at most 3 times", runs["capped"] in (1, 2, 3), repr(runs["capped"]))
    if "llvmpipe" in device:  # far more than 1 ms per run: the budget leaves the one timed run it always allows
        checks.check("counts: on lavapipe, --budget 0.001 caps it to 1 run", runs["capped"] == 1, repr(runs["capped"]))


def check_progress_on_a_terminal(checks, vkattn):
    """stderr on a pseudo-terminal: the progress line appears, and is cleared at the end."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([vkattn, "bench", "--sweep", "decode", "--max-seq", "2048", "--json", *FAST],
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO once the child has closed its end
            break
        if not chunk:
            break
        seen += chunk
    proc.communicate(timeout=600)
    os.close(master)
    text = seen.decode(errors="replace")
    checks.check("progress: shown on a terminal", "[1/2] decode seq_k 1024" in text and "[2/2]" in text, repr(text))
    checks.check("progress: cleared at the end", text.endswith("\r\x1b[K"), repr(text[-20:]))


def check_copy(checks, vkattn):
    """--copy: copies of as many bytes as the call's K/V (vkCmdCopyBuffer, a copy shader) timed in the same
    run, in JSON, CSV and the table; null without --copy (the call's own K/V bytes and GB/s are always there)."""
    shape = ["--heads", "4", "--kv-heads", "1", "--seq-q", "1", "--seq-k", "1000", "--dim", "64", "--dtype", "f32", *FAST]
    keys = ["kv_bytes", "kv_gbps", "copy_transfer_gbps", "copy_shader_gbps"]
    out = run_ok(checks, "copy json", vkattn, *shape, "--copy", "--json")
    if out:
        r = json.loads(out)["results"][0]
        checks.check("copy: kv_bytes is K's and V's bytes", r.get("kv_bytes") == 2 * 1000 * 64 * 4, repr(r.get("kv_bytes")))
        want = r["kv_bytes"] / (r["ms_median"] * 1e6) if r.get("ms_median") else None
        checks.check("copy: kv_gbps is kv_bytes over the median time",
                     want is not None and math.isclose(r.get("kv_gbps") or 0, want, rel_tol=1e-9), f"{r.get('kv_gbps')} vs {want}")
        ok = all(isinstance(r.get(k), float) and math.isfinite(r[k]) and r[k] > 0 for k in keys[2:])
        checks.check("copy: both copies measured, positive GB/s", ok, str({k: r.get(k) for k in keys}))
    out = run_ok(checks, "no copy json", vkattn, *shape, "--json")
    if out:
        r = json.loads(out)["results"][0]
        checks.check("copy: copies null without --copy", all(k in r and r[k] is None for k in keys[2:]),
                     str({k: r.get(k) for k in keys}))
        checks.check("copy: kv_bytes and kv_gbps without --copy too",
                     r.get("kv_bytes") == 2 * 1000 * 64 * 4 and isinstance(r.get("kv_gbps"), float) and r["kv_gbps"] > 0,
                     str({k: r.get(k) for k in keys}))
    out = run_ok(checks, "copy csv", vkattn, *shape, "--copy", "--csv")
    if out:
        rows = list(csv.DictReader(io.StringIO(out)))
        checks.check("copy: CSV columns filled", len(rows) == 1 and all(rows[0].get(k) for k in keys), str(rows[:1])[:300])
    out = run_ok(checks, "copy table", vkattn, *shape, "--copy")
    if out:
        line = [l for l in out.splitlines() if l.startswith("copy (seq_q 1 seq_k 1000)")]
        checks.check("copy: the table's copy line", len(line) == 1 and "vkCmdCopyBuffer" in line[0] and "copy shader" in line[0],
                     repr(out[-400:]))


def decode_flops(heads, lengths, dim_qk, dim_v):
    """One query per sequence, causal bottom-right: it sees every key of its sequence."""
    return 2.0 * heads * sum(lengths) * (dim_qk + dim_v)


def check_paged(checks, vkattn):
    """--paged PAGE_SIZE and --lengths: checked against the references, the layout named in JSON, CSV and the
    table, FLOPs and K/V bytes counted per sequence."""
    heads, kv_heads, dim = 8, 2, 64
    shape = ["--heads", str(heads), "--kv-heads", str(kv_heads), "--seq-q", "1", "--dim", str(dim), "--dtype", "f16",
             "--causal", "bottom-right", *FAST]
    cases = [("paged decode", ["--seq-k", "100", "--paged", "16"], "paged 16", [100]),
             ("paged lengths", ["--lengths", "40,7,0", "--paged", "16"], "paged 16", [40, 7, 0]),
             ("paged lengths, page 1", ["--lengths", "40,7,0", "--paged", "1"], "paged 1", [40, 7, 0]),
             ("paged hnd lengths", ["--lengths", "40,7,0", "--paged", "16", "--page-order", "hnd"], "paged 16 hnd",
              [40, 7, 0]),
             ("dense lengths", ["--lengths", "40,7,0"], "dense", [40, 7, 0]),
             ("dense bshd lengths", ["--lengths", "40,7,0", "--kv-layout", "bshd"], "dense bshd", [40, 7, 0])]
    for name, extra, layout, lengths in cases:
        out = run_ok(checks, name, vkattn, *shape, *extra, "--check", "--json")
        if out is None:
            continue
        doc = json.loads(out)
        check_schema(checks, name, doc, None)
        r = doc["results"][0]
        checks.check(f"{name}: layout {layout!r}", r["layout"] == layout, repr(r["layout"]))
        checks.check(f"{name}: page_size", r["page_size"] == (int(layout.split()[1]) if layout.startswith("paged") else None),
                     repr(r["page_size"]))
        checks.check(f"{name}: batch {len(lengths)}, seq_k {max(lengths)}",
                     r["batch"] == len(lengths) and r["seq_k"] == max(lengths), f"{r['batch']} {r['seq_k']}")
        checks.check(f"{name}: kv_lengths", r["kv_lengths"] == (lengths if "--lengths" in extra else None),
                     repr(r["kv_lengths"]))
        err = r["max_err_over_max_v"]
        checks.check(f"{name}: --check within the f16 tolerance", err is not None and err <= F16_TOLERANCE, repr(err))
        kv_bytes = sum(lengths) * kv_heads * 2 * dim * 2
        checks.check(f"{name}: kv_bytes counts each sequence's keys", r["kv_bytes"] == kv_bytes,
                     f"{r['kv_bytes']} vs {kv_bytes}")
        ms = r["ms_median"]
        checks.check(f"{name}: kv_gbps is kv_bytes over the median time",
                     math.isclose(r["kv_gbps"], kv_bytes / (ms * 1e6), rel_tol=1e-9), f"{r['kv_gbps']} vs {ms}")
        want = decode_flops(heads, lengths, dim, dim) / (ms * 1e-3) * 1e-12
        checks.check(f"{name}: TFLOP/s count each sequence's visible pairs", math.isclose(r["tflops"], want, rel_tol=1e-9),
                     f"{r['tflops']} vs {want}")
    table = run_ok(checks, "paged table", vkattn, *shape, "--lengths", "40,7,0", "--paged", "16", "--check")
    if table is not None:
        rows = [l for l in table.splitlines() if " paged 16 " in l and "fused" in l]
        checks.check("paged table: the row names the layout", len(rows) == 1, table[-600:])
        checks.check("paged table: kv_GB/s column and the lengths",
                     "kv_GB/s" in table and "kv lengths (seq_k is their maximum): 40,7,0" in table, table[-600:])
    out = run_ok(checks, "paged csv", vkattn, *shape, "--seq-k", "100", "--paged", "16", "--csv")
    if out is not None:
        rows = list(csv.DictReader(io.StringIO(out)))
        checks.check("paged csv: layout column", len(rows) == 1 and rows[0].get("layout") == "paged 16", str(rows)[:300])


def visible_pairs(seq_q, seq_k, causal):
    """Causal bottom-right or none, one sequence: query i sees keys [0, min(seq_k, i + 1 + seq_k - seq_q))."""
    if causal == "none":
        return seq_q * seq_k
    return sum(min(seq_k, max(0, i + 1 + seq_k - seq_q)) for i in range(seq_q))


def check_varlen(checks, vkattn):
    """--varlen: one packed call of sequences with drawn (or --lengths) query and key counts, checked against
    reference::varlen_attention, the layout and the lengths in JSON, CSV and the table, FLOPs from each
    sequence's own visible pairs, K/V bytes from each sequence's keys (q8_0: 34 bytes per 32 values)."""
    heads, kv_heads, dim = 8, 2, 64
    base = ["--varlen", "--heads", str(heads), "--kv-heads", str(kv_heads), "--dim", str(dim), "--dtype", "f16",
            "--causal", "bottom-right", *FAST]
    cases = [("varlen decode", ["--batch", "5", "--seq-q", "1", "--seq-k", "100"], "varlen", 2),
             ("varlen q8_0", ["--batch", "4", "--seq-q", "1", "--seq-k", "90", "--kv-dtype", "q8_0"], "varlen q8_0",
              34 / 32),
             ("varlen prefill", ["--batch", "3", "--seq-q", "40", "--seq-k", "60"], "varlen", 2),
             ("varlen lengths", ["--lengths", "40,0,7", "--seq-q", "1"], "varlen", 2),
             ("varlen unfused", ["--batch", "3", "--seq-q", "20", "--seq-k", "50", "--path", "unfused"], "varlen", 2)]
    for name, extra, layout, bytes_per_value in cases:
        out = run_ok(checks, name, vkattn, *base, *extra, "--check", "--json")
        if out is None:
            continue
        doc = json.loads(out)
        check_schema(checks, name, doc, None)
        r = doc["results"][0]
        checks.check(f"{name}: layout {layout!r}, status ok", r["layout"] == layout and r["status"] == "ok",
                     f"{r['layout']!r} {r['status']!r}")
        path = "unfused" if "unfused" in extra else "fused"
        checks.check(f"{name}: path {path}", r["path"] == path, repr(r["path"]))
        kv, q = r["kv_lengths"], r["q_lengths"]
        batch = len(extra[extra.index("--lengths") + 1].split(",")) if "--lengths" in extra else int(extra[1])
        bound_q = int(extra[extra.index("--seq-q") + 1])
        bound_k = int(extra[extra.index("--seq-k") + 1]) if "--seq-k" in extra else None
        ok = (isinstance(kv, list) and isinstance(q, list) and len(kv) == len(q) == batch == r["batch"]
              and r["seq_k"] == max(kv) and r["seq_q"] == max(q) and all(1 <= n <= bound_q for n in q)
              and (bound_q > 1 or all(n == 1 for n in q))
              and (all(1 <= n <= bound_k for n in kv) if bound_k else kv == [40, 0, 7]))
        checks.check(f"{name}: lengths within the bounds, seq_q/seq_k their maxima", ok,
                     f"batch {r['batch']} seq_q {r['seq_q']} seq_k {r['seq_k']} kv {kv} q {q}")
        if not ok:
            continue
        err = r["max_err_over_max_v"]
        checks.check(f"{name}: --check passed within the f16 tolerance", err is not None and err <= F16_TOLERANCE,
                     repr(err))
        kv_bytes = sum(kv) * kv_heads * 2 * dim * bytes_per_value
        checks.check(f"{name}: kv_bytes counts each sequence's keys", r["kv_bytes"] == kv_bytes,
                     f"{r['kv_bytes']} vs {kv_bytes}")
        ms = r["ms_median"]
        pairs = sum(visible_pairs(nq, nk, "bottom-right") for nq, nk in zip(q, kv))
        want = 2.0 * heads * pairs * 2 * dim / (ms * 1e-3) * 1e-12
        checks.check(f"{name}: TFLOP/s count each sequence's visible pairs", math.isclose(r["tflops"], want, rel_tol=1e-9),
                     f"{r['tflops']} vs {want}")
    shape = [*base, "--batch", "5", "--seq-q", "1", "--seq-k", "100"]
    first = run_ok(checks, "varlen seed", vkattn, *shape, "--json")
    again = run_ok(checks, "varlen seed again", vkattn, *shape, "--json")
    other = run_ok(checks, "varlen seed 2", vkattn, *shape, "--seed", "2", "--json")
    if first and again and other:
        kv = [json.loads(t)["results"][0]["kv_lengths"] for t in (first, again, other)]
        checks.check("varlen: the lengths follow --seed", kv[0] == kv[1] and kv[0] != kv[2], str(kv))
    table = run_ok(checks, "varlen table", vkattn, *base, "--lengths", "40,0,7", "--seq-q", "1", "--check")
    if table is not None:
        rows = [l for l in table.splitlines() if " varlen " in l and "fused" in l]
        checks.check("varlen table: the row names the layout", len(rows) == 1, table[-600:])
        checks.check("varlen table: the lengths line",
                     "kv lengths (seq_k is their maximum): 40,0,7; q lengths (seq_q is their maximum): 1,1,1" in table,
                     table[-600:])
    out = run_ok(checks, "varlen csv", vkattn, *shape, "--kv-dtype", "q8_0", "--csv")
    if out is not None:
        rows = list(csv.DictReader(io.StringIO(out)))
        ok = (len(rows) == 1 and rows[0].get("layout") == "varlen q8_0" and rows[0].get("kv_lengths", "").startswith("[")
              and rows[0].get("q_lengths") == "[1,1,1,1,1]")
        checks.check("varlen csv: layout and lengths columns", ok, str(rows)[:300])


def check_usage_errors(checks, vkattn):
    cases = [
        (["--sweep", "prefill", "--seq-q", "512"], "drop --seq-q"),
        (["--sweep", "decode", "--heads", "4"], "drop --heads"),
        (["--sweep", "scaling", "--path", "fused"], "drop --path"),
        (["--sweep", "prefill", "--causal", "top-left"], "drop --causal"),
        (["--sweep", "decode", "--json", "--csv"], "--json and --csv"),
        (["--max-seq", "256"], "--max-seq"),
        (["--sweep", "decode", "--max-seq", "100"], "leaves no shape"),
        (["--sweep", "training"], "--sweep"),
        (["--batch", "2", "--lengths", "40,7,0"], "--lengths"),
        (["--batch", "2", "--lengths", "40,7,0", "--paged", "16"], "--lengths"),
        (["--paged", "0"], "--paged"),
        (["--sweep", "decode", "--paged", "16"], "drop --paged"),
        (["--paged", "16", "--shared-prefix", "16", "--path", "unfused"], "drop --path unfused"),
        (["--varlen", "--paged", "16"], "--varlen"),
        (["--page-order", "hnd"], "--page-order hnd orders the pages of a paged cache"),
        (["--paged", "16", "--page-order", "hdn"], "--page-order"),
        (["--sweep", "decode", "--varlen"], "drop --varlen"),
        (["--varlen", "--lengths", "0,0"], "--varlen"),
    ]
    for args, expect in cases:
        proc = bench(vkattn, *args)
        lines = proc.stderr.splitlines()
        ok = (proc.returncode != 0 and proc.stdout == "" and len(lines) == 1 and lines[0].startswith("vkattn: error: ")
              and expect in lines[0])
        checks.check(f"usage error {' '.join(args)}", ok, f"exit {proc.returncode}: {proc.stderr.strip()}")


def check_splits(checks, vkattn):
    """--splits N: the splits column shows the count asked for (capped at the key tiles), the answer stays
    within tolerance, dense and paged; 0, 65536 and non-numbers are refused in one line."""
    shape = ["--heads", "8", "--kv-heads", "2", "--seq-q", "1", "--dim", "64", "--dtype", "f16",
             "--causal", "bottom-right", *FAST]
    for name, extra in [("splits dense", ["--seq-k", "3000"]), ("splits paged", ["--lengths", "3000,40", "--paged", "16"])]:
        for n in (1, 5, 65535):
            out = run_ok(checks, f"{name} {n}", vkattn, *shape, *extra, "--splits", str(n), "--check", "--json")
            if out is None:
                continue
            r = json.loads(out)["results"][0]
            err = r["max_err_over_max_v"]
            checks.check(f"{name} {n}: --check within the f16 tolerance", err is not None and err <= F16_TOLERANCE, repr(err))
            if n == 1:
                checks.check(f"{name} 1: one split", r["splits"] == 1, repr(r["splits"]))
            if n == 5:
                checks.check(f"{name} 5: five splits", r["splits"] == 5, repr(r["splits"]))
            if n == 65535:
                checks.check(f"{name} 65535: capped at the key tiles (fewer than 3000)", 5 < r["splits"] < 3000,
                             repr(r["splits"]))
    for bad in ("0", "65536", "x"):
        proc = bench(vkattn, *shape, "--seq-k", "100", "--splits", bad)
        lines = proc.stderr.strip().splitlines()
        checks.check(f"--splits {bad}: refused in one line", proc.returncode != 0 and len(lines) == 1 and "--splits" in lines[0],
                     proc.stderr.strip()[-300:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default=os.path.join(REPO, "build", "release", "tools", "vkattn"))
    args = parser.parse_args()
    checks = Checks()
    check_usage_errors(checks, args.vkattn)
    check_single_run(checks, args.vkattn)
    check_copy(checks, args.vkattn)
    check_paged(checks, args.vkattn)
    check_varlen(checks, args.vkattn)
    check_splits(checks, args.vkattn)
    check_counts_and_budget(checks, args.vkattn)
    check_first_run(checks, args.vkattn)
    check_prefill(checks, args.vkattn)
    check_scaling(checks, args.vkattn)
    check_decode_and_skips(checks, args.vkattn)
    check_progress_on_a_terminal(checks, args.vkattn)
    print(f"{checks.failed} check(s) failed" if checks.failed else "all checks passed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
