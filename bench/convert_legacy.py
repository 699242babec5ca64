#!/usr/bin/env python3
"""One-off (issue 39): the figures docs/performance.md and README.md cite, and issue 37's and 38's
before/after runs, from their old files in bench/results/ into bench/run.py's results format
(bench/benchlib.py), one file per device and date. Run once; kept in git history, not in the tree.

    /usr/bin/python3 bench/convert_legacy.py
"""
import csv
import json
import os
import re

import benchlib as bl

R = bl.RESULTS_DIR
LVP_DEVICE = "llvmpipe (LLVM 15.0.6, 256 bits)"
LVP_DRIVER = "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)"
LVP_HOST = "AMD EPYC, 2 threads"

SHAPE_KEYS = ("batch", "heads", "kv_heads", "seq_q", "seq_k", "dim_qk", "dim_v", "causal", "dtype")


def case_index():
    """{(case args as a shape): (case file, name, args)} of every case file whose cases are dense shapes."""
    import compare  # dense_shape
    out = {}
    for f in ("issue12", "decode-cpu", "decode-gpu", "prefill-cpu", "prefill-gpu", "serving"):
        for cf, name, args in bl.load_cases([f]):
            try:
                shape = compare.dense_shape(args)
            except RuntimeError:
                continue
            out.setdefault(tuple(shape[k] for k in SHAPE_KEYS), (cf, name, args))
    return out


INDEX = None


def case_of(shape, fallback_name=None, fallback_args=None):
    global INDEX
    if INDEX is None:
        INDEX = case_index()
    key = tuple(shape[k] for k in SHAPE_KEYS)
    if key in INDEX:
        return INDEX[key]
    return None, fallback_name, fallback_args


def args_of(shape):
    a = ["--batch", str(shape["batch"]), "--heads", str(shape["heads"]), "--kv-heads", str(shape["kv_heads"]),
         "--seq-q", str(shape["seq_q"]), "--seq-k", str(shape["seq_k"]), "--dim", str(shape["dim_qk"]),
         "--dtype", shape["dtype"]]
    if shape["causal"] != "none":
        a += ["--causal", shape["causal"]]
    return a


def case(shape, result, rnd=None, command=None, name=None, args=None):
    cf, n, a = case_of(shape, name, args)
    rec = {"name": n, "case_file": cf, "args": a or args_of(shape)}
    if rnd is not None:
        rec["round"] = rnd
    rec["command"] = command
    rec["result"] = result
    return rec


def vk_result(shape, rec):
    """A compare_torch-style vkattn record (ms, ms_min, tflops, ...) as a bench --json result record."""
    out = dict(shape)
    out["ms_median"] = rec["ms"]
    out["ms_min"] = rec.get("ms_min")
    for k in ("tflops", "gbps", "status", "path", "kernel", "splits", "chunks", "max_err_over_max_v", "iters"):
        if k in rec:
            out[k] = rec[k]
    return out


def peer_result(shape, ms, ms_min, tflops, **extra):
    return dict(shape, ms_median=ms, ms_min=ms_min, tflops=tflops, status="ok", **extra)


def lavapipe_2026_11_29():
    runs = []
    # issue 12's targets at its close: two rounds of the prefill shapes, decode 32k with --copy, the GEMM.
    text = open(os.path.join(R, "lavapipe-2026-11-29-targets.txt"), encoding="utf-8").read()
    names = {"prefill d64 f32": "prefill-h8-s1024-d64-f32", "prefill d64 f16": "prefill-h8-s1024-d64-f16",
             "prefill d128 f16": "prefill-h8-s1024-d128-f16", "decode 32k": "decode-h32-kv8-d128-k32768-f16"}
    cases = {n: a for _, n, a in bl.load_cases(["issue12"])}
    vk, gemm = [], []
    for m in re.finditer(r"^round (\d) (prefill d\d+ f\d+): ([\d.]+) ms, ([\d.]+) GFLOP/s$", text, re.M):
        name = names[m.group(2)]
        vk.append({"name": name, "case_file": "bench/cases/issue12.txt", "args": cases[name], "round": int(m.group(1)),
                   "command": None, "result": {"ms_median": float(m.group(3)), "tflops": float(m.group(4)) / 1e3,
                                               "status": "ok", "kernel": "subgroup"}})
    for m in re.finditer(r"^round (\d) decode 32k: ([\d.]+) ms, K/V ([\d.]+) GB/s, copy shader ([\d.]+) GB/s, "
                         r"vkCmdCopyBuffer ([\d.]+) GB/s$", text, re.M):
        ms = float(m.group(2))
        flops = 2.0 * 32 * 32768 * 256
        vk.append({"name": names["decode 32k"], "case_file": "bench/cases/issue12.txt", "args": cases[names["decode 32k"]],
                   "round": int(m.group(1)), "command": None,
                   "result": {"ms_median": ms, "tflops": flops / (ms * 1e-3) * 1e-12, "kv_gbps": float(m.group(3)),
                              "copy_shader_gbps": float(m.group(4)), "copy_transfer_gbps": float(m.group(5)),
                              "status": "ok", "kernel": "subgroup-decode"}})
    for m in re.finditer(r"^round (\d) GEMM: .* median_ms ([\d.]+) min_ms ([\d.]+) GFLOP/s ([\d.]+)", text, re.M):
        gemm.append({"name": "gemm-scores-m1024-n1024-k64-f32", "case_file": None,
                     "args": ["--op", "scores", "--m", "1024", "--n", "1024", "--k", "64", "--dtype", "f32"],
                     "round": int(m.group(1)), "command": None,
                     "result": {"ms_median": float(m.group(2)), "ms_min": float(m.group(3)),
                                "tflops": float(m.group(4)) / 1e3, "status": "ok", "kernel": "gemm_subgroup"}})
    src = "bench/results/lavapipe-2026-11-29-targets.{sh,txt} (git history): issue 12's targets at its close"
    runs.append({"label": "vkattn", "program": "vkattn", "binary": "build/release/tools/vkattn",
                 "version": "vkattn 0.1.0 (main 1eca871)", "vk_driver_files": None, "started": "2026-11-29T11:36:00Z",
                 "command": "bash bench/results/lavapipe-2026-11-29-targets.sh build/release (two rounds; "
                            "decode with --copy)", "note": "converted from " + src + "; load ~1.4", "cases": vk})
    runs.append({"label": "gemm", "program": "vkattn_gemm_bench", "binary": "build/release/tools/probes/vkattn_gemm_bench",
                 "version": "vkattn 0.1.0 (main 1eca871)", "vk_driver_files": None, "started": "2026-11-29T11:36:00Z",
                 "command": "vkattn_gemm_bench --op scores --m 1024 --n 1024 --k 64 --dtype f32 --warmup 3 --iters 20",
                 "note": "converted from " + src + ": the three-stage path's GEMM alone", "cases": gemm})

    # beside ggml-vulkan, each of issue 12's four shapes in its own run of compare_ggml.py
    doc = json.load(open(os.path.join(R, "lavapipe-2026-11-29-ggml-issue12-shapes.json"), encoding="utf-8"))
    g_cases, v_cases = [], []
    for c in doc["cases"]:
        for e in c["entries"]:
            shape = {k: e["shape"][k] for k in SHAPE_KEYS}
            for i, rr in enumerate(e["ggml"]["rounds"], 1):
                ms = rr["us_per_run"] / 1e3
                g_cases.append(case(shape, peer_result(shape, ms, None, rr["gflops"] / 1e3, runs=rr["runs"]), i,
                                    c["ggml"]["command"]))
            for i, rr in enumerate(e["vkattn"]["rounds"], 1):
                v_cases.append(case(shape, vk_result(shape, rr), i, c["vkattn_commands"][0] if c.get("vkattn_commands") else None))
    note = ("converted from bench/results/lavapipe-2026-11-29-ggml-issue12-shapes.{json,txt} (git history): "
            "bench/compare_ggml.py once per shape, 2 alternating rounds, 08:50-09:03 UTC; ggml keeps Q and O in f32, "
            "and its K/V are views of a cache twice as long")
    runs.append({"label": "ggml-vulkan", "program": "ggml test-backend-ops", "comparison": "ggml",
                 "binary": doc["cases"][0]["ggml"]["binary"], "version": "ggml " + doc["cases"][0]["ggml"]["commit"],
                 "vk_driver_files": None, "started": doc["cases"][0]["started"] + "Z",
                 "command": "bench/compare_ggml.py --rounds 2 --params REGEX (once per shape)", "note": note,
                 "cases": g_cases})
    runs.append({"label": "vkattn", "program": "vkattn", "comparison": "ggml", "binary": "build/release/tools/vkattn",
                 "version": "vkattn 0.1.0 (main cbfe2f6)", "vk_driver_files": None,
                 "started": doc["cases"][0]["started"] + "Z",
                 "command": "bench/compare_ggml.py --rounds 2 --params REGEX (once per shape)", "note": note,
                 "cases": v_cases})

    # beside PyTorch on the CPU
    doc = json.load(open(os.path.join(R, "lavapipe-2026-11-29-torch-cpu.json"), encoding="utf-8"))
    import compare_torch as ct
    t_cases, v_cases = [], []
    for n, e in enumerate(doc["entries"]):
        shape = {k: e[k] for k in SHAPE_KEYS}
        for i, rr in enumerate(e["torch"]["rounds"], 1):
            t_cases.append(case(shape, peer_result(shape, rr["ms"], rr["ms_min"], ct.tflops(shape, rr["ms"]),
                                                   iters=rr["iters"], kernel="textbook f32"), i, "torch-cpu"))
        for i, rr in enumerate(e["vkattn"]["rounds"], 1):
            v_cases.append(case(shape, vk_result(shape, rr), i, doc["commands"][n]))
    note = ("converted from bench/results/lavapipe-2026-11-29-torch-cpu.{json,txt} (git history): "
            "bench/compare_torch_cpu.py, 3 alternating rounds, 11:44-11:46 UTC, load 1.7-1.9; torch " +
            doc["torch"]["version"] + " with OpenBLAS 0.3.21, 2 threads, float32")
    runs.append({"label": "torch-cpu", "program": "torch-cpu", "comparison": "torch-cpu", "binary": None,
                 "version": f"torch {doc['torch']['version']}, {doc['torch']['threads']} threads, float32",
                 "vk_driver_files": None, "started": doc["started"] + "Z",
                 "command": "bench/compare_torch_cpu.py --vkattn build/release/tools/vkattn", "note": note,
                 "cases": t_cases})
    runs.append({"label": "vkattn", "program": "vkattn", "comparison": "torch-cpu", "binary": "build/release/tools/vkattn",
                 "version": "vkattn 0.1.0 (main e615280)", "vk_driver_files": None, "started": doc["started"] + "Z",
                 "command": "bench/compare_torch_cpu.py --vkattn build/release/tools/vkattn", "note": note,
                 "cases": v_cases})
    return {"format": bl.FORMAT, "device": LVP_DEVICE, "driver": LVP_DRIVER, "host_cpu": LVP_HOST,
            "date": "2026-11-29", "runs": runs}


BUILDS_NAMES = {  # bench/compare_builds.py's shape names -> case names (bench/cases/issue12.txt, serving.txt)
    "prefill d64 f32": "prefill-h8-s1024-d64-f32", "prefill d64 f16": "prefill-h8-s1024-d64-f16",
    "prefill d128 f16": "prefill-h8-s1024-d128-f16", "decode 32/8 d128 8k f16": "decode-h32-kv8-d128-k8192-f16",
    "decode 32/8 d128 32k f16": "decode-h32-kv8-d128-k32768-f16",
    "paged decode 32/8 d128 32k+7x512 f16 hnd16": "paged-decode-h32-kv8-d128-32k+7x512-f16-hnd16",
    "packed decode 32/8 d128 32k+7x512 f16": "packed-decode-h32-kv8-d128-32k+7x512-f16",
}


def lavapipe_2026_12_02():
    cases = {n: (cf, a) for cf, n, a in bl.load_cases(["issue12", "serving"])}
    runs = []
    steps = [("issue38-step1", "lavapipe-2026-12-02-issue38-before-after.json", "4519a12", "15f7786+"),
             ("issue38-step2", "lavapipe-2026-12-02-issue38-step2-before-after.json", "c550f50", "b20c571"),
             ("issue38-step3", "lavapipe-2026-12-02-issue38-step3-before-after.json", "56683c4", "7e1e5ba")]
    for comparison, f, before, after in steps:
        doc = json.load(open(os.path.join(R, f), encoding="utf-8"))
        for side, commit in (("before", before), ("after", after)):
            recs = []
            for r in doc["runs"]:
                if r["side"] != side:
                    continue
                name = BUILDS_NAMES[r["shape"]]
                cf, a = cases[name]
                for i, row in enumerate(r["rows"], 1):
                    recs.append({"name": name, "case_file": cf, "args": a, "round": i,
                                 "command": ["vkattn", "bench", "--json", *a], "result": row})
            runs.append({"label": side, "program": "vkattn", "comparison": comparison,
                         "binary": doc[side], "version": f"vkattn 0.1.0 ({commit})", "vk_driver_files": None,
                         "started": None,
                         "command": f"bench/compare_builds.py --before <{before}>/tools/vkattn --after <{after}>/tools/vkattn "
                                    "--rounds 3 --json ...",
                         "note": f"converted from bench/results/{f} (git history): the builds alternating in three rounds",
                         "cases": recs})
    return {"format": bl.FORMAT, "device": LVP_DEVICE, "driver": LVP_DRIVER, "host_cpu": LVP_HOST,
            "date": "2026-12-02", "runs": runs}


def lavapipe_2026_12_01():
    rows = list(csv.DictReader(open(os.path.join(R, "lavapipe-2026-12-01-issue37-before-after.csv"), encoding="utf-8")))
    ints = {"batch", "heads", "kv_heads", "seq_q", "seq_k", "dim_qk", "dim_v", "splits", "chunks", "device_bytes",
            "workspace_bytes", "peak_device_bytes", "rotations", "rotated_input_bytes", "iters", "first_run_pipelines",
            "kv_bytes", "page_size"}
    floats = {"ms_median", "ms_min", "tflops", "gbps", "first_run_ms", "kv_gbps", "max_err_over_max_v"}
    runs = {}
    rounds = {}
    for row in rows:
        build = row.pop("build")
        for k in ("device", "driver", "host_cpu", "version", "sweep", "reduced"):
            row.pop(k)
        res = {}
        for k, v in row.items():
            if v == "":
                res[k] = None
            elif k in ints:
                res[k] = int(v)
            elif k in floats:
                res[k] = float(v)
            elif k in ("alibi", "sinks", "weights"):
                res[k] = v == "true"
            elif k == "first_dispatches":
                res[k] = json.loads(v)
            else:
                res[k] = v
        for k in ("time_exponent", "memory_exponent"):
            res.pop(k, None)
        shape = {k: res[k] for k in SHAPE_KEYS}
        if shape["seq_q"] == 1:
            name, args = "decode-h32-kv8-d128-k32768-f16", None
            cf, name, args = case_of(shape)
            command = ["vkattn", "bench", "--json", *args, "--iters", "10"]
        else:
            cf, name = None, "prefill-causal-h8-s1024-d64-f32"
            args = ["--heads", "8", "--seq-q", "1024", "--dim", "64", "--dtype", "f32", "--causal", "bottom-right"]
            command = ["vkattn", "bench", "--json", *args, "--iters", "5"]
        key = (build, name)
        rounds[key] = rounds.get(key, 0) + 1
        side = "before" if build == "85aec58" else "after"
        runs.setdefault(side, {"label": side, "program": "vkattn", "comparison": "issue37", "binary": None,
                               "version": f"vkattn 0.1.0 ({build})", "vk_driver_files": None,
                               "started": None,
                               "command": "vkattn bench --csv, the two builds alternating in three rounds",
                               "note": "converted from bench/results/lavapipe-2026-12-01-issue37-before-after.csv "
                                       "(git history)", "cases": []})
        runs[side]["cases"].append({"name": name, "case_file": cf, "args": args, "round": rounds[key],
                                    "command": command, "result": res})
    return {"format": bl.FORMAT, "device": LVP_DEVICE, "driver": LVP_DRIVER, "host_cpu": LVP_HOST,
            "date": "2026-12-01", "runs": [runs["before"], runs["after"]]}


def h100_2026_11_27(doc):
    import compare_torch as ct
    v_cases, peers = [], {}
    for e in doc["presets"]["decode"]:
        shape = {k: e[k] for k in SHAPE_KEYS}
        v_cases.append(case(shape, vk_result(shape, e["vkattn"]), None, doc["commands"]["decode"]))
        for backend, rec in e["torch"].items():
            if rec.get("ms") is None:
                continue
            peers.setdefault(backend, []).append(
                case(shape, peer_result(shape, rec["ms"], rec.get("ms_min"), ct.tflops(shape, rec["ms"]),
                                        kernel=backend), None, f"torch.nn.functional.scaled_dot_product_attention ({backend})"))
    note = ("converted from bench/results/nvidia-h100-80gb-hbm3-2026-11-27.json (compare_torch.py's format, git "
            "history): bench/compare_torch.py --presets decode --budget 0.3 on the H100; torch's efficient backend "
            "refused the GQA shapes. Timing: " + doc["timing"]["method"])
    runs = [{"label": "vkattn", "program": "vkattn", "comparison": "torch-sdpa", "binary": ".gpu/vkattn",
             "version": "vkattn " + doc["vkattn"]["version"], "vk_driver_files": None, "started": None,
             "command": doc["commands"]["decode"], "note": note, "cases": v_cases}]
    for backend, cs in peers.items():
        runs.append({"label": f"torch-{backend}", "program": "torch sdpa", "comparison": "torch-sdpa", "binary": None,
                     "version": f"torch {doc['torch_version']}, CUDA {doc['cuda']}, cuDNN {doc['cudnn']}",
                     "vk_driver_files": None, "started": None,
                     "command": "bench/compare_torch.py --presets decode --budget 0.3", "note": note, "cases": cs})
    return {"format": bl.FORMAT, "device": doc["vkattn"]["device"], "driver": doc["vkattn"]["driver"], "host_cpu": None,
            "date": "2026-11-27", "runs": runs}


def main():
    h100_path = os.path.join(R, "nvidia-h100-80gb-hbm3-2026-11-27.json")
    h100 = json.load(open(h100_path, encoding="utf-8"))
    outputs = {"lavapipe-2026-11-29.json": lavapipe_2026_11_29(),
               "lavapipe-2026-12-01.json": lavapipe_2026_12_01(),
               "lavapipe-2026-12-02.json": lavapipe_2026_12_02()}
    if "format" not in h100:
        outputs["nvidia-h100-80gb-hbm3-2026-11-27.json"] = h100_2026_11_27(h100)
    for name, doc in outputs.items():
        bl.write_json(os.path.join(R, name), doc)
        print(name, len(doc["runs"]), "runs", sum(len(r["cases"]) for r in doc["runs"]), "cases")


if __name__ == "__main__":
    main()
