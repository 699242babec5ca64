#!/usr/bin/env python3
"""Offline tests of bench/compare_torch_cpu.py: no torch and no GPU needed (numpy is).

    /usr/bin/python3 bench/test_compare_torch_cpu.py [--vkattn build/release/tools/vkattn] [unittest args]

A fake `vkattn` (a Python script printing `vkattn bench --json` documents made from its arguments, or
the recorded bench/testdata/vkattn-decode-lavapipe.json for --sweep decode) and a fake `torch` backed
by numpy stand for the two programs; the rounds are checked to alternate, both sides to be merged per
shape, the table, --from-json, --dry-run, and the one-line errors. With --vkattn, a tiny shape also
runs through the real binary (fake torch). Where a real torch is installed, the textbook attention is
checked against a numpy reference (GQA, both causal alignments).
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_test_helpers as bh  # noqa: E402
import compare_torch as ct  # noqa: E402
import compare_torch_cpu as cc  # noqa: E402

SCRIPT = os.path.join(HERE, "compare_torch_cpu.py")
DECODE = os.path.join(HERE, "testdata", "vkattn-decode-lavapipe.json")
VKATTN = None  # --vkattn: the built binary, for the live check (taken off argv before unittest sees it)
if __name__ == "__main__" and "--vkattn" in sys.argv[:-1]:
    _i = sys.argv.index("--vkattn")
    VKATTN = sys.argv[_i + 1]
    del sys.argv[_i:_i + 2]

# A stand-in for torch on numpy: just what compare_torch_cpu.py calls. Appends "torch" to $FAKE_LOG at
# each softmax (once per attention call).
FAKE_TORCH = '''
import contextlib, os
import numpy as np
__version__ = "1.13.0+fake"
float32 = np.float32
_threads = [1]
class Tensor:
    def __init__(self, a):
        self.a = np.asarray(a)
    shape = property(lambda self: self.a.shape)
    def __mul__(self, x):
        return Tensor(self.a * x)
    def __add__(self, x):
        return Tensor(self.a + x)
    def __gt__(self, x):
        return Tensor(self.a > x.a)
    def transpose(self, i, j):
        return Tensor(np.swapaxes(self.a, i, j))
    def repeat_interleave(self, n, dim):
        return Tensor(np.repeat(self.a, n, axis=dim))
    def masked_fill_(self, mask, value):
        self.a = np.where(mask.a, value, self.a)
        return self
    def unsqueeze(self, d):
        return Tensor(np.expand_dims(self.a, d))
class Generator:
    def manual_seed(self, seed):
        self.rng = np.random.default_rng(seed)
def randn(size, dtype=None, generator=None):
    return Tensor(generator.rng.standard_normal(size).astype(np.float32))
def ones(*size):
    return Tensor(np.ones(size, np.float32))
def arange(n):
    return Tensor(np.arange(n))
def matmul(a, b):
    return Tensor(np.matmul(a.a, b.a))
def softmax(x, dim):
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write("torch\\n")
    e = np.exp(x.a - x.a.max(axis=dim, keepdims=True))
    return Tensor(e / e.sum(axis=dim, keepdims=True))
def repeat_interleave(*a, **k):
    raise NotImplementedError
def set_num_threads(n):
    _threads[0] = n
def get_num_threads():
    return _threads[0]
inference_mode = contextlib.nullcontext
class __config__:
    @staticmethod
    def show():
        return "PyTorch built with:\\n  - Build settings: BLAS_INFO=generic, BUILD_TYPE=Release,"
'''


FAKE_VKATTN, write, collapse = bh.FAKE_VKATTN, bh.write, bh.collapse  # shared with bench/test_compare_ggml.py


class Fakes:
    """A temporary directory with the fake vkattn (bin/vkattn), the fake torch (py/torch) and a log."""

    def __init__(self, tmp, torch_body=FAKE_TORCH):
        self.tmp = tmp
        self.vkattn = os.path.join(tmp, "bin", "vkattn")
        write(self.vkattn, f"#!{sys.executable}\n" + FAKE_VKATTN, 0o755)
        self.py = os.path.join(tmp, "py")
        write(os.path.join(self.py, "torch", "__init__.py"), textwrap.dedent(torch_body))
        self.log = os.path.join(tmp, "log")

    def env(self, **extra):
        env = dict(os.environ, PYTHONPATH=self.py, FAKE_LOG=self.log, FAKE_DECODE=DECODE)
        env.update(extra)
        return env

    def events(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log, encoding="utf-8") as f:
            return f.read().split()


def run_script(*args, env=None):
    if env is None:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=300)


def one_line_error(test, done, code, text):
    bh.one_line_error(test, done, code, text, "compare_torch_cpu.py", ("running ", "round ", "  torch "))


class Shapes(unittest.TestCase):
    def test_defaults_are_issue_12s(self):
        shapes = cc.default_shapes()
        self.assertEqual([cc.shape_label(s) for s in shapes],
                         ["B1 H8 Sq1024 Sk1024 d64 f32", "B1 H8 Sq1024 Sk1024 d64 f16", "B1 H8 Sq1024 Sk1024 d128 f32",
                          "B1 H8 Sq1024 Sk1024 d128 f16", "B1 H32/8 Sq1 Sk8192 d128 f16", "B1 H32/8 Sq1 Sk32768 d128 f16"])
        for s in shapes:
            self.assertEqual(list(s), list(ct.SHAPE_KEYS))

    def test_flops_by_vkattns_convention(self):
        prefill64, _, prefill128, _, decode8k, decode32k = cc.default_shapes()
        self.assertEqual(ct.attention_flops(prefill64), 4 * 8 * 1024 * 1024 * 64)        # 2.15 GFLOP
        self.assertEqual(ct.attention_flops(prefill128), 4 * 8 * 1024 * 1024 * 128)
        self.assertEqual(ct.attention_flops(decode8k), 2 * 32 * 8192 * (128 + 128))      # per query head
        self.assertEqual(ct.attention_flops(decode32k), 4 * ct.attention_flops(decode8k))
        self.assertAlmostEqual(cc.gflops(prefill64, 1000.0), 4 * 8 * 1024 * 1024 * 64 * 1e-9)
        causal = cc.parse_shape("heads=1,seq_q=4,dim=2,causal=top-left")
        self.assertEqual(ct.attention_flops(causal), 2 * (1 + 2 + 3 + 4) * 4)
        self.assertIsNone(cc.gflops(causal, 0))

    def test_parse_shape(self):
        s = cc.parse_shape("heads=32, kv_heads=8,seq_q=1,seq_k=8192,dim=128,dtype=f16")
        self.assertEqual(s, dict(batch=1, heads=32, kv_heads=8, seq_q=1, seq_k=8192, dim_qk=128, dim_v=128,
                                 causal="none", dtype="f16"))
        self.assertEqual(cc.parse_shape(""), dict(batch=1, heads=8, kv_heads=8, seq_q=1024, seq_k=1024, dim_qk=64,
                                                  dim_v=64, causal="none", dtype="f32"))
        s = cc.parse_shape("b=2,h=4,seq_q=16,seq_k=64,dim_qk=32,dim_v=16,causal=bottom-right")
        self.assertEqual((s["batch"], s["heads"], s["kv_heads"], s["dim_qk"], s["dim_v"], s["causal"]),
                         (2, 4, 4, 32, 16, "bottom-right"))
        for bad, why in (("heads", "not key=value"), ("width=3", "not key=value"), ("heads=x", "not an integer"),
                         ("heads=0", "not positive"), ("heads=2,heads=4", "given twice"),
                         ("causal=yes", "not one of none"), ("dtype=f64", "not one of f32"),
                         ("heads=6,kv_heads=4", "not a multiple of kv_heads 4")):
            with self.assertRaisesRegex(Exception, why, msg=bad):
                cc.parse_shape(bad)


class Arguments(unittest.TestCase):
    def test_bad_values_are_one_line_and_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            for args, text in ((["--shape", "heads=0"], "heads 0 is not positive"),
                               (["--rounds", "0"], "0 is not positive"),
                               (["--preset", "scaling"], "invalid choice"),
                               (["--vkattn", os.path.join(tmp, "nothing")], "no such executable"),
                               (["--dtype", "f16"], "--dtype applies to --preset's sweeps"),
                               (["--out", os.path.join(tmp, "no", "r.json")], "its directory does not exist"),
                               (["--out", tmp], "a directory"),
                               (["--from-json", os.path.join(tmp, "nothing.json")], "no such file"),
                               (["--from-json", DECODE, "--rounds", "1", "--shape", "heads=1"], "--shape would be ignored")):
                done = run_script("--vkattn", fakes.vkattn, *args) if "--vkattn" not in args and "--from-json" not in args \
                    else run_script(*args)
                one_line_error(self, done, 2, text)

    def test_vkattn_commands(self):
        args = cc.parse_args(["--vkattn", "/x/vkattn", "--dry-run", "--shape", "heads=32,kv_heads=8,seq_q=1,seq_k=64,dim=128",
                              "--preset", "decode", "--preset", "decode", "--max-seq", "2048", "--dtype", "f32",
                              "--device", "llvmpipe"])
        runs = cc.vkattn_runs(args)
        self.assertEqual([r[0] for r in runs], ["preset decode", "B1 H32/8 Sq1 Sk64 d128 f32"])
        self.assertEqual(runs[0][1], ["/x/vkattn", "bench", "--sweep", "decode", "--json", "--max-seq", "2048", "--dtype",
                                      "f32", "--device", "llvmpipe", "--warmup", "10", "--iters", "50", "--budget", "5"])
        self.assertEqual(runs[0][2], "decode")
        self.assertEqual(runs[1][1], ["/x/vkattn", "bench", "--json", "--batch", "1", "--heads", "32", "--kv-heads", "8",
                                      "--seq-q", "1", "--seq-k", "64", "--dim", "128", "--dim-v", "128", "--dtype", "f32",
                                      "--causal", "none", "--device", "llvmpipe", "--warmup", "10", "--iters", "50",
                                      "--budget", "5"])
        self.assertIsNone(runs[1][2])
        exact = cc.parse_args(["--vkattn", "/x/vkattn", "--dry-run", "--iters", "4"])
        self.assertEqual(cc.vkattn_runs(exact)[0][1][-4:], ["--warmup", "10", "--iters", "4"])
        self.assertEqual(len(cc.vkattn_runs(exact)), 6)  # the default shapes
        self.assertEqual(cc.parse_args(["--dry-run", "--threads", "3"]).threads, 3)
        self.assertEqual(cc.parse_args(["--dry-run"]).threads, cc.cpu_threads())

    def test_dry_run_runs_nothing_and_needs_no_torch(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, torch_body="raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
            out = os.path.join(tmp, "r.json")
            done = run_script("--vkattn", fakes.vkattn, "--dry-run", "--rounds", "2", "--out", out, env=fakes.env())
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(fakes.events(), [])
            self.assertFalse(os.path.exists(out))
            self.assertIn("2 round(s), each: vkattn on every shape, then torch on every shape", done.stdout)
            self.assertIn("--heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 128", done.stdout)
            self.assertIn("torch on the CPU", done.stdout)
            self.assertIn(f"output: {out}", done.stdout)
            done = run_script("--vkattn", os.path.join(tmp, "none"), "--dry-run", "--preset", "prefill", env=fakes.env())
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("(binary not found)", done.stdout)
            self.assertIn("bench --sweep prefill --json", done.stdout)


class FakeSide:
    """TorchCpu's interface: a fixed time per dtype-free shape, and an entry in the shared event log."""

    def __init__(self, events, refuse=None):
        self.events, self.refuse, self.calls = events, refuse, []

    def run(self, shape):
        self.events.append("torch")
        self.calls.append(cc.shape_label(shape))
        if self.refuse and self.refuse(shape):
            return {"unsupported": "RuntimeError: out of memory"}
        return {"ms": 4.0, "ms_min": 3.0, "iters": 5, "warmup": 2}


class Rounds(unittest.TestCase):
    SHAPES = ["heads=2,seq_q=64,dim=64", "heads=2,seq_q=64,dim=64,dtype=f16", "heads=8,kv_heads=2,seq_q=1,seq_k=512,dim=128"]

    def rounds(self, rounds=3, refuse=None):
        args = cc.parse_args(["--vkattn", "/x", "--dry-run", "--rounds", str(rounds)]
                             + [a for s in self.SHAPES for a in ("--shape", s)])
        events, per_round_ms = [], [2.0, 1.0, 3.0]

        def run(cmd, preset, source):
            events.append("vkattn")
            opt = lambda name: cmd[cmd.index(name) + 1]  # noqa: E731
            this_round = events.count("torch") // 2  # two torch runs per round (f32 and f16 share one)
            row = {"batch": int(opt("--batch")), "heads": int(opt("--heads")), "kv_heads": int(opt("--kv-heads")),
                   "seq_q": int(opt("--seq-q")), "seq_k": int(opt("--seq-k")), "dim_qk": int(opt("--dim")),
                   "dim_v": int(opt("--dim-v")), "dtype": opt("--dtype"), "causal": opt("--causal"), "path": "fused",
                   "kernel": "rowwise", "splits": 1, "ms_median": per_round_ms[this_round], "ms_min": 0.5, "iters": 7}
            return ct.load_vkattn({"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "driver": "Mesa", "version": "0.1.0",
                                   "results": [row]}, preset, source)

        side = FakeSide(events, refuse)
        self.loads = []
        result = cc.run_rounds(args, cc.vkattn_runs(args), side, rounds, log=lambda text: None, run=run, loads=self.loads)
        return result, events, side

    def test_alternates_and_shares_torch_across_dtypes(self):
        (meta, shapes, vk_rounds, torch_rounds), events, side = self.rounds()
        self.assertEqual(collapse(events), [("vkattn", 3), ("torch", 2)] * 3)
        self.assertEqual(side.calls, ["B1 H2 Sq64 Sk64 d64 f32", "B1 H8/2 Sq1 Sk512 d128 f32"] * 3)
        self.assertEqual(meta["device"], "llvmpipe (LLVM 15.0.6, 256 bits)")
        self.assertEqual(len(vk_rounds), 3)
        self.assertEqual([[r["ms_median"] for r in rows] for rows in vk_rounds], [[2.0] * 3, [1.0] * 3, [3.0] * 3])
        self.assertIs(torch_rounds[0][0], torch_rounds[0][1])  # the f16 row shares the f32 row's measurement
        self.assertEqual([(x["round"], x["side"]) for x in self.loads], [(1, "vkattn"), (1, "torch"), (2, "vkattn"),
                                                                         (2, "torch"), (3, "vkattn"), (3, "torch")])

    def test_merged_per_shape(self):
        (meta, shapes, vk_rounds, torch_rounds), _, _ = self.rounds()
        doc = cc.merge(meta, shapes, vk_rounds, torch_rounds, {"date": "2026-11-24", "torch": {"version": "1.13"}})
        self.assertEqual(doc["tool"], "compare_torch_cpu")
        self.assertEqual(doc["rounds"], 3)
        self.assertEqual(doc["flops"], ct.FLOP_CONVENTION)
        e = doc["entries"][0]
        self.assertEqual(cc.shape_label(e), "B1 H2 Sq64 Sk64 d64 f32")
        v, t = e["vkattn"], e["torch"]
        self.assertEqual((v["ms_median"], v["ms_min"]), (2.0, 0.5))  # median of 2, 1, 3; fastest run
        self.assertEqual([r["ms"] for r in v["rounds"]], [2.0, 1.0, 3.0])
        self.assertEqual([r["iters"] for r in v["rounds"]], [7, 7, 7])
        self.assertEqual((t["ms_median"], t["ms_min"]), (4.0, 3.0))
        self.assertEqual(len(t["rounds"]), 3)
        self.assertAlmostEqual(v["gflops_median"], ct.attention_flops(e) / 2e-3 * 1e-9)
        self.assertAlmostEqual(e["ratio_median"], 2.0)   # torch 4 ms / vkattn 2 ms
        self.assertAlmostEqual(e["ratio_best"], 6.0)     # 3 ms / 0.5 ms
        self.assertEqual(v["kernel"], "rowwise")
        table = cc.format_table(doc)
        self.assertIn("3 rounds alternating", table)
        self.assertIn("torch computes in float32", table)
        self.assertRegex(table, r"\n  1   2   2    64     64   64   64         none   f32 \| +\S+ +\S+ \| +\S+ +\S+ \| +2 +6\n")
        self.assertIn("geometric mean of the median ratios: 2 over 3 shape(s)", table)

    def test_refusals_and_skips(self):
        (meta, shapes, vk_rounds, torch_rounds), _, _ = self.rounds(rounds=2, refuse=lambda s: s["seq_q"] == 1)
        vk_rounds[1][0] = dict(vk_rounds[1][0], status="skipped", reason="needs 9 GiB")
        doc = cc.merge(meta, shapes, vk_rounds, torch_rounds, {"date": "d"})
        first, _, last = doc["entries"]
        self.assertEqual(first["vkattn"]["status"], "skipped")
        self.assertEqual((first["ratio_median"], first["ratio_best"]), (None, None))
        self.assertEqual(last["torch"], {"status": "unsupported", "reason": "RuntimeError: out of memory",
                                         "rounds": [{"unsupported": "RuntimeError: out of memory"}] * 2})
        table = cc.format_table(doc)
        self.assertIn("vkattn skipped: needs 9 GiB (1 shape)", table)
        self.assertIn("torch refused: RuntimeError: out of memory (1 shape)", table)
        self.assertIn("over 1 shape(s)", table)

    def test_time_calls_follows_vkattns_budget_rule(self):
        ticks = iter(range(0, 10 ** 6, 100))  # every clock reading 100 s later: each call "takes" 100 s
        clock = lambda: next(ticks) / 1000.0  # noqa: E731 (0.1 s per reading, 100 ms per call)
        calls = []
        ms, warmed = cc.time_calls(lambda: calls.append(1), 10, 50, 1.0, False, clock)
        # probe 100 ms: warm-ups min(0.2 * 1000 / 100, 9) = 2 after the probe, runs min(1000 / 100, 50) = 10
        self.assertEqual((len(ms), warmed, len(calls)), (10, 3, 13))
        self.assertEqual(ct.run_counts(100.0, 10, 50, 1.0), (2, 10))
        calls.clear()
        ms, warmed = cc.time_calls(lambda: calls.append(1), 1, 4, 1.0, True, clock)
        self.assertEqual((len(ms), warmed, len(calls)), (4, 1, 5))
        self.assertTrue(all(abs(m - 100.0) < 1e-6 for m in ms))


class CompareProgram(unittest.TestCase):
    """bench/compare.py's torch-cpu program (TorchCpu is its adapter) with the fake vkattn and fake torch."""

    def test_compare_runs_torch_cpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            cases = os.path.join(tmp, "cases.txt")
            dense = "--batch 1 --heads 4 --kv-heads 2 --seq-q 8 --seq-k 16 --dim 8 --dim-v 8"
            write(cases, f"gqa-causal {dense} --dtype f32 --causal bottom-right\n")
            out = os.path.join(tmp, "r.json")
            done = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), "--a", fakes.vkattn, "--b",
                                   "torch-cpu", "--rounds", "2", "--warmup", "1", "--iters", "2", "--json", out, cases],
                                  capture_output=True, text=True, env=fakes.env(), timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            # round 1: vkattn (--version, bench), torch (1 warm-up, 2 timed); round 2 swapped
            self.assertEqual(collapse(fakes.events()), [("vkattn", 2), ("torch", 6), ("vkattn", 2)])
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
            run = doc["runs"][1]
            self.assertEqual((run["label"], run["program"], run["comparison"]), ("torch-cpu", "torch-cpu", "A vs torch-cpu"))
            self.assertIn("torch 1.13.0+fake", run["version"])
            row = run["cases"][0]["result"]
            self.assertEqual((row["iters"], row["kernel"], row["causal"]), (2, "textbook f32", "bottom-right"))
            self.assertIn("| gqa-causal |", done.stdout)

    def test_refuses_other_cases_before_running(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), "--a", fakes.vkattn, "--b",
                                   "torch-cpu", "serving"], capture_output=True, text=True, env=fakes.env(), timeout=120)
            self.assertEqual(done.returncode, 1)
            self.assertIn("torch-cpu takes plain dense cases", done.stderr)
            self.assertEqual(fakes.events(), [])


class FreshRun(unittest.TestCase):
    """The script end to end with the fake vkattn and the numpy-backed fake torch."""

    def test_run_out_and_from_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            out = os.path.join(tmp, "r.json")
            done = run_script("--vkattn", fakes.vkattn, "--rounds", "2", "--iters", "2", "--warmup", "1", "--threads", "3",
                              "--shape", "heads=4,kv_heads=2,seq_q=8,seq_k=16,dim=8,causal=bottom-right",
                              "--shape", "heads=4,kv_heads=2,seq_q=8,seq_k=16,dim=8,causal=bottom-right,dtype=f16",
                              "--preset", "decode", "--out", out, env=fakes.env())
            self.assertEqual(done.returncode, 0, done.stderr)
            # per round: the decode sweep and the two shapes on vkattn; torch on 5 decode rows and one shape
            # (f32 and f16 share it), 3 calls each (1 warm-up, 2 timed)
            self.assertEqual(collapse(fakes.events()), [("vkattn", 3), ("torch", 18)] * 2)
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
            self.assertEqual(doc["tool"], "compare_torch_cpu")
            self.assertEqual(doc["torch"]["version"], "1.13.0+fake")
            self.assertEqual(doc["torch"]["threads"], 3)
            self.assertEqual(doc["torch"]["blas_info"], "generic")
            self.assertEqual(doc["timing"]["warmup"], 1)
            self.assertEqual(doc["timing"]["budget_s"], None)
            self.assertEqual(len(doc["commands"]), 3)
            self.assertEqual([x["side"] for x in doc["load_average"]], ["vkattn", "torch"] * 2 + ["end"])
            self.assertEqual(len(doc["entries"]), 7)
            self.assertEqual(doc["vkattn"]["driver"], "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)")
            for e in doc["entries"]:
                self.assertEqual(e["torch"]["status"], "ok")
                self.assertEqual([r["iters"] for r in e["torch"]["rounds"]], [2, 2])
                self.assertGreater(e["ratio_median"], 0)
            self.assertEqual(doc["entries"][0]["seq_k"], 256)  # the recorded sweep's first row
            self.assertIn("B   H KVH", done.stdout)
            self.assertIn(f"results: {out}", done.stdout)
            again = run_script("--from-json", out)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertEqual(again.stdout.strip(), done.stdout.replace(f"results: {out}", "").strip())

    def test_from_json_refuses_other_files(self):
        done = run_script("--from-json", DECODE)
        one_line_error(self, done, 1, "not a compare_torch_cpu.py results file")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.json")
            write(path, "{")
            one_line_error(self, run_script("--from-json", path), 1, "cannot read it as JSON")

    def test_torch_missing_is_one_line_and_runs_no_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, torch_body="raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
            out = os.path.join(tmp, "r.json")
            done = run_script("--vkattn", fakes.vkattn, "--out", out, env=fakes.env())
            one_line_error(self, done, 1, "PyTorch is not installed")
            self.assertEqual(fakes.events(), [])
            self.assertFalse(os.path.exists(out))

    def test_vkattn_failing_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            out = os.path.join(tmp, "r.json")
            done = run_script("--vkattn", fakes.vkattn, "--out", out, env=fakes.env(FAKE_VKATTN_FAIL="1"))
            self.assertEqual(done.returncode, 1)
            self.assertIn("vkattn: error: no Vulkan device", done.stderr)  # vkattn's own message, passed through
            self.assertIn("compare_torch_cpu.py: error: `", done.stderr)
            self.assertIn("exited with 3", done.stderr.splitlines()[-1])
            self.assertNotIn("Traceback", done.stderr)
            self.assertFalse(os.path.exists(out))

    @unittest.skipUnless(VKATTN, "--vkattn not given")
    def test_live_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            out = os.path.join(tmp, "r.json")
            done = run_script("--vkattn", VKATTN, "--rounds", "2", "--warmup", "0", "--iters", "2", "--out", out,
                              "--shape", "heads=4,kv_heads=2,seq_q=16,seq_k=32,dim=16,causal=bottom-right,dtype=f16",
                              env=fakes.env())
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
            e = doc["entries"][0]
            self.assertEqual(cc.shape_label(e), "B1 H4/2 Sq16 Sk32 d16 bottom-right f16")
            self.assertEqual(e["vkattn"]["status"], "ok")
            self.assertEqual([r["iters"] for r in e["vkattn"]["rounds"]], [2, 2])
            live = e["vkattn"]["rounds"][0]
            # vkattn's own TFLOP/s follows the same FLOP count
            self.assertAlmostEqual(live["tflops"] * 1e3, cc.gflops(e, live["ms"]), delta=1e-6 * live["tflops"] * 1e3)
            self.assertTrue(doc["vkattn"]["version"])


def reference_attention(q, k, v, causal):
    """float64 numpy: softmax(Q·Kᵀ/√d, masked) · V, query head h on KV head h // (H/G)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    sq, sk = s.shape[-2:]
    if causal != "none":
        off = sk - sq if causal == "bottom-right" else 0
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None] + off, -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


class RealTorch(unittest.TestCase):
    def setUp(self):
        try:
            import torch  # noqa: PLC0415
        except ImportError:
            self.skipTest("no torch installed")
        self.torch = torch

    def test_textbook_attention_matches_numpy(self):
        torch = self.torch
        gen = torch.Generator()
        gen.manual_seed(3)
        for heads, kv_heads, sq, sk, d, dv, causal in ((4, 2, 5, 9, 16, 8, "bottom-right"), (4, 4, 7, 7, 8, 8, "top-left"),
                                                       (6, 2, 3, 11, 8, 8, "top-left"), (8, 1, 1, 33, 32, 32, "none")):
            q = torch.randn((2, heads, sq, d), generator=gen)
            k = torch.randn((2, kv_heads, sk, d), generator=gen)
            v = torch.randn((2, kv_heads, sk, dv), generator=gen)
            with torch.inference_mode():
                out = cc.textbook_attention(torch, q, k, v, 1.0 / d ** 0.5, cc.causal_mask(torch, sq, sk, causal))
            want = reference_attention(q.numpy(), k.numpy(), v.numpy(), causal)
            self.assertEqual(tuple(out.shape), want.shape)
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=f"{heads}/{kv_heads} {causal}")

    def test_torch_side_times_a_shape(self):
        side = cc.TorchCpu(self.torch, 1, 1, 3, 1.0, True, 1)
        record = side.run(cc.parse_shape("heads=4,kv_heads=2,seq_q=16,seq_k=32,dim=16,causal=top-left"))
        self.assertEqual((record["iters"], record["warmup"]), (3, 1))
        self.assertGreater(record["ms"], 0)
        self.assertLessEqual(record["ms_min"], record["ms"])
        info = side.info()
        self.assertEqual(info["threads"], 1)
        self.assertEqual(info["dtype"], "f32")


if __name__ == "__main__":
    unittest.main()
