#!/usr/bin/env python3
"""Offline tests of bench/compare.py's torch-cpu program (bench/peer_torch_cpu.py): no torch, no GPU (numpy is).

    /usr/bin/python3 bench/test_peer_torch_cpu.py [--vkattn build/release/tools/vkattn] [unittest args]

A fake `torch` backed by numpy and the fake vkattn of bench/bench_test_helpers.py stand for the two
programs: compare.py's rounds alternate, the torch side's counts and threads, its refusals and a missing
torch as one line, --dry-run without torch; the timing follows vkattn bench's budget rule. The backward
mode (compare.py --backward, or --backward in a case line): vkattn asked for `bench --backward` and held
to its "backward": true, torch's backward calls timed alone (each after an untimed forward), FLOPs 2.5x,
torch-gpu and ggml refusing it. With
--vkattn, a tiny case also runs through the real binary (fake torch). Where a real torch is installed,
the textbook attention is checked against a numpy reference (GQA, both causal alignments).
"""
import json
import os
import sys
import tempfile
import textwrap
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_test_helpers as bh  # noqa: E402
import benchlib as bl  # noqa: E402
import peer_torch_cpu as pc  # noqa: E402

VKATTN = bh.take_vkattn_arg(sys.argv) if __name__ == "__main__" else None

# A stand-in for torch on numpy: just what peer_torch_cpu.py calls. Appends "torch" to $FAKE_LOG at
# each softmax (once per attention call), "backward" at each Tensor.backward.
FAKE_TORCH = '''
import contextlib, os
import numpy as np
__version__ = "1.13.0+fake"
float32 = np.float32
_threads = [1]
class Tensor:
    grad = None
    def __init__(self, a):
        self.a = np.asarray(a)
    def requires_grad_(self, flag=True):
        return self
    def backward(self, gradient):
        assert gradient.shape == self.shape
        if os.environ.get("FAKE_LOG"):
            with open(os.environ["FAKE_LOG"], "a") as f:
                f.write("backward\\n")
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
enable_grad = contextlib.nullcontext
class __config__:
    @staticmethod
    def show():
        return "PyTorch built with:\\n  - Build settings: BLAS_INFO=generic, BUILD_TYPE=Release,"
'''


MISSING_TORCH = "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"


class Fakes:
    """A temporary directory with the fake vkattn (bin/vkattn), the fake torch (py/torch), a case file and a log."""

    def __init__(self, tmp, torch_body=FAKE_TORCH, cases="gqa-causal --batch 1 --heads 4 --kv-heads 2 --seq-q 8 "
                 "--seq-k 16 --dim 8 --dim-v 8 --dtype f32 --causal bottom-right\n"):
        self.vkattn = os.path.join(tmp, "bin", "vkattn")
        bh.write(self.vkattn, f"#!{sys.executable}\n" + bh.FAKE_VKATTN, 0o755)
        self.py = os.path.join(tmp, "py")
        bh.write(os.path.join(self.py, "torch", "__init__.py"), textwrap.dedent(torch_body))
        self.log = os.path.join(tmp, "log")
        self.cases = os.path.join(tmp, "cases.txt")
        bh.write(self.cases, cases)
        self.out = os.path.join(tmp, "r.json")

    def env(self, **extra):
        return dict(os.environ, PYTHONPATH=self.py, FAKE_LOG=self.log, **extra)

    def events(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log, encoding="utf-8") as f:
            return f.read().split()

    def compare(self, *args, vkattn=None, **env):
        return bh.run_compare("--a", vkattn or self.vkattn, *args, "--json", self.out, self.cases, env=self.env(**env))

    def doc(self):
        with open(self.out, encoding="utf-8") as f:
            return json.load(f)


class CompareRuns(unittest.TestCase):
    def test_rounds_alternate(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = fakes.compare("--b", "torch-cpu", "--rounds", "2", "--warmup", "1", "--iters", "2")
            self.assertEqual(done.returncode, 0, done.stderr)
            # round 1: vkattn (bench, --version), torch (1 warm-up, 2 timed); round 2 swapped
            self.assertEqual(bh.collapse(fakes.events()), [("vkattn", 2), ("torch", 6), ("vkattn", 2)])
            doc = fakes.doc()
        run = doc["runs"][1]
        self.assertEqual((run["label"], run["program"], run["comparison"]), ("torch-cpu", "torch-cpu", "A vs torch-cpu"))
        self.assertRegex(run["version"], r"^torch 1\.13\.0\+fake, \d+ threads, float32, BLAS generic")
        row = run["cases"][0]["result"]
        self.assertEqual((row["iters"], row["kernel"], row["causal"], row["dtype"]), (2, "textbook f32", "bottom-right", "f32"))
        self.assertAlmostEqual(row["tflops"], bl.tflops(row, row["ms_median"]))
        self.assertIn("| gqa-causal |", done.stdout)

    def test_threads_and_budgeted_counts(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = fakes.compare("--b", "torch-cpu:3", "--rounds", "1")
            self.assertEqual(done.returncode, 0, done.stderr)
            run = fakes.doc()["runs"][1]
            events = fakes.events()
        self.assertEqual(run["label"], "torch-cpu:3")
        self.assertIn(", 3 threads,", run["version"])
        # a tiny shape: well within 5 s, so the caps: a probe, 2 more warm-ups, 10 timed runs
        self.assertEqual((run["cases"][0]["result"]["iters"], events.count("torch")), (10, 13))

    def test_refusals_before_running(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            for program, text in (("torch-cpu:0", "torch-cpu:0: the threads are a positive integer"),
                                  ("torch-cpu:x", "the threads are a positive integer")):
                bh.one_line_error(self, fakes.compare("--b", program), text)
            done = bh.run_compare("--a", fakes.vkattn, "--b", "torch-cpu", "serving", env=fakes.env())
            bh.one_line_error(self, done, "torch-cpu takes plain dense cases")
            done = bh.run_compare("--a", fakes.vkattn, "--b", "torch-cpu", "--rounds", "0", "smoke", env=fakes.env())
            bh.one_line_error(self, done, "--rounds must be at least 1")
            self.assertEqual(fakes.events(), [])

    def test_torch_refusing_a_case_is_one_line(self):
        refusing = FAKE_TORCH.replace("def softmax(x, dim):", "def softmax(x, dim):\n    raise RuntimeError('out of\\n memory')")
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, torch_body=refusing)
            done = fakes.compare("--b", "torch-cpu", "--iters", "1")
            bh.one_line_error(self, done, "torch-cpu refused gqa-causal: RuntimeError: out of memory")
            self.assertFalse(os.path.exists(fakes.out))

    def test_torch_missing_is_one_line_and_runs_no_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, torch_body=MISSING_TORCH)
            bh.one_line_error(self, fakes.compare("--b", "torch-cpu"), "PyTorch is not installed")
            self.assertEqual(fakes.events(), [])
            self.assertFalse(os.path.exists(fakes.out))

    def test_vkattn_failing_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = fakes.compare("--b", "torch-cpu", FAKE_VKATTN_FAIL="1")
            bh.one_line_error(self, done, "exit 3: vkattn: error: no Vulkan device")
            self.assertFalse(os.path.exists(fakes.out))

    def test_dry_run_runs_nothing_and_needs_no_torch(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, torch_body=MISSING_TORCH)
            done = fakes.compare("--b", "torch-cpu:2", "--dry-run", "--rounds", "2", "--warmup", "1")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(fakes.events(), [])
            self.assertFalse(os.path.exists(fakes.out))
        self.assertIn("2 round(s), each: every case on every driver with A, torch-cpu:2", done.stdout)
        self.assertIn(f"gqa-causal: {fakes.vkattn} bench --json --batch 1 --heads 4 --kv-heads 2", done.stdout)
        self.assertIn("--causal bottom-right --warmup 1\n", done.stdout)
        self.assertIn("gqa-causal: textbook attention in float32", done.stdout)
        self.assertIn("; 2 threads\n", done.stdout)
        self.assertIn(f"output: {fakes.out}", done.stdout)

    @unittest.skipUnless(VKATTN, "--vkattn not given")
    def test_live_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, cases="tiny --heads 4 --kv-heads 2 --seq-q 16 --seq-k 32 --dim 16 --causal bottom-right "
                                     "--dtype f16\n")
            done = fakes.compare("--b", "torch-cpu", "--rounds", "2", "--warmup", "0", "--iters", "2", vkattn=VKATTN)
            self.assertEqual(done.returncode, 0, done.stderr)
            vk, torch = fakes.doc()["runs"]
        self.assertEqual(vk["program"], "vkattn")
        self.assertTrue(vk["version"])
        for c in vk["cases"]:
            row = c["result"]
            self.assertEqual((row["status"], row["iters"]), ("ok", 2))
            # vkattn's own TFLOP/s follows the FLOP count the peers use
            self.assertAlmostEqual(row["tflops"], bl.tflops(row, row["ms_median"]), delta=1e-6 * row["tflops"])
        self.assertEqual([c["result"]["iters"] for c in torch["cases"]], [2, 2])


class Backward(unittest.TestCase):
    def test_backward_rounds_alternate_and_time_the_backward_alone(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = fakes.compare("--backward", "--b", "torch-cpu", "--rounds", "2", "--warmup", "1", "--iters", "2")
            self.assertEqual(done.returncode, 0, done.stderr)
            # each torch call: its forward (softmax), then the backward; 1 warm-up + 2 timed per round
            self.assertEqual(bh.collapse(fakes.events()),
                             [("vkattn", 2)] + [("torch", 1), ("backward", 1)] * 6 + [("vkattn", 2)])
            doc = fakes.doc()
        vk, torch = doc["runs"]
        self.assertEqual(vk["cases"][0]["command"][:3], ["vkattn", "bench", "--json"])
        self.assertIn("--backward", vk["cases"][0]["command"])
        self.assertTrue(vk["cases"][0]["result"]["backward"])
        row = torch["cases"][0]["result"]
        self.assertEqual((row["backward"], row["kernel"], row["iters"]), (True, "textbook f32 autograd", 2))
        forward = dict(row, backward=False)
        self.assertAlmostEqual(row["tflops"], 2.5 * bl.tflops(forward, row["ms_median"]))
        self.assertAlmostEqual(bl.attention_flops(row), 2.5 * bl.attention_flops(forward))
        self.assertIn("| gqa-causal |", done.stdout)

    def test_backward_in_a_case_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, cases="bwd --batch 1 --heads 2 --kv-heads 1 --seq-q 4 --seq-k 6 --dim 8 --dim-v 4 "
                                     "--dtype f16 --backward\n")
            done = fakes.compare("--b", "torch-cpu", "--rounds", "1", "--warmup", "0", "--iters", "3")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(fakes.events()[2:], ["torch", "backward"] * 3)
            vk, torch = fakes.doc()["runs"]
        self.assertEqual(vk["cases"][0]["command"].count("--backward"), 1)
        self.assertTrue(torch["cases"][0]["result"]["backward"])

    def test_a_vkattn_not_timing_the_backward_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = fakes.compare("--backward", "--b", "torch-cpu", FAKE_VKATTN_FORWARD_ONLY="1")
            bh.one_line_error(self, done, 'its result does not say "backward": true')
            self.assertFalse(os.path.exists(fakes.out))

    def test_torch_gpu_and_ggml_refuse_backward_cases(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            bh.one_line_error(self, fakes.compare("--backward", "--b", "torch-gpu"),
                              "case gqa-causal: torch-gpu does not time the backward pass")
            bh.one_line_error(self, fakes.compare("--backward", "--b", f"ggml={fakes.vkattn}"),
                              "case gqa-causal: ggml has no backward pass")
            self.assertEqual(fakes.events(), [])

    def test_dry_run_backward(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, torch_body=MISSING_TORCH)
            done = fakes.compare("--backward", "--b", "torch-cpu:2", "--dry-run")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(fakes.events(), [])
        self.assertIn("--causal bottom-right --backward\n", done.stdout)
        self.assertIn("gqa-causal: torch.autograd of the textbook attention in float32", done.stdout)


def bench_has_backward(vkattn):
    """Whether this vkattn's bench takes --backward (its --help says so)."""
    import subprocess  # noqa: PLC0415
    try:
        done = subprocess.run([vkattn, "bench", "--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return "--backward" in done.stdout + done.stderr


class LiveBackward(unittest.TestCase):
    @unittest.skipUnless(VKATTN and bench_has_backward(VKATTN), "--vkattn not given, or its bench has no --backward")
    def test_live_vkattn_backward(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp, cases="tiny --heads 4 --kv-heads 2 --seq-q 16 --seq-k 32 --dim 16 --causal bottom-right "
                                     "--dtype f16\n")
            done = fakes.compare("--backward", "--b", "torch-cpu", "--rounds", "2", "--warmup", "0", "--iters", "2",
                                 vkattn=VKATTN)
            self.assertEqual(done.returncode, 0, done.stderr)
            vk, torch = fakes.doc()["runs"]
        for c in vk["cases"]:
            row = c["result"]
            self.assertEqual((row["status"], row["iters"], row["backward"]), ("ok", 2, True))
            # vkattn's backward TFLOP/s follows the count the peers use: 2.5x the forward's FLOPs
            self.assertAlmostEqual(row["tflops"], bl.tflops(row, row["ms_median"]), delta=1e-6 * row["tflops"])
        self.assertEqual([c["result"]["backward"] for c in torch["cases"]], [True, True])


class Timing(unittest.TestCase):
    def test_time_calls_follows_vkattns_budget_rule(self):
        ticks = iter(range(0, 10 ** 6, 100))
        clock = lambda: next(ticks) / 1000.0  # noqa: E731 (0.1 s per reading: each call "takes" 100 ms)
        calls = []
        ms, warmed = pc.time_calls(lambda: calls.append(1), 10, 50, 1.0, False, clock)
        # probe 100 ms: warm-ups min(0.2 * 1000 / 100, 9) = 2 after the probe, runs min(1000 / 100, 50) = 10
        self.assertEqual((len(ms), warmed, len(calls)), (10, 3, 13))
        self.assertEqual(bl.run_counts(100.0, 10, 50, 1.0), (2, 10))
        calls.clear()
        ms, warmed = pc.time_calls(lambda: calls.append(1), 1, 4, 1.0, True, clock)
        self.assertEqual((len(ms), warmed, len(calls)), (4, 1, 5))
        self.assertTrue(all(abs(m - 100.0) < 1e-6 for m in ms))

    def test_time_calls_leaves_setup_off_the_clock(self):
        now = [0.0]
        clock = lambda: now[0]  # noqa: E731
        calls = []

        def setup():
            calls.append("setup")
            now[0] += 5.0  # the forward: 5 s, untimed

        def call():
            calls.append("call")
            now[0] += 0.1  # the backward: 100 ms

        ms, warmed = pc.time_calls(call, 10, 50, 1.0, False, clock, setup=setup)
        self.assertEqual((len(ms), warmed), (10, 3))  # the budget sees 100 ms calls, not 5.1 s ones
        self.assertEqual(calls, ["setup", "call"] * 13)
        self.assertTrue(all(abs(m - 100.0) < 1e-6 for m in ms))


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
                out = pc.textbook_attention(torch, q, k, v, 1.0 / d ** 0.5, pc.causal_mask(torch, sq, sk, causal))
            want = reference_attention(q.numpy(), k.numpy(), v.numpy(), causal)
            self.assertEqual(tuple(out.shape), want.shape)
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=f"{heads}/{kv_heads} {causal}")

    def test_torch_side_times_a_shape(self):
        timer = pc.TextbookTimer(self.torch, 1, 1, 3, 1.0, True)
        shape = dict(batch=1, heads=4, kv_heads=2, seq_q=16, seq_k=32, dim_qk=16, dim_v=16, causal="top-left", dtype="f32")
        record = timer.run(shape)
        self.assertEqual((record["iters"], record["warmup"]), (3, 1))
        self.assertGreater(record["ms"], 0)
        self.assertLessEqual(record["ms_min"], record["ms"])
        self.assertEqual(timer.threads, 1)
        self.assertTrue(timer.blas().startswith("BLAS "))

    def test_torch_side_times_a_backward(self):
        timer = pc.TextbookTimer(self.torch, 1, 1, 3, 1.0, True)
        shape = dict(batch=1, heads=4, kv_heads=2, seq_q=16, seq_k=32, dim_qk=16, dim_v=8, causal="bottom-right",
                     dtype="f32", backward=True)
        record = timer.run(shape)
        self.assertEqual((record["iters"], record["warmup"]), (3, 1))
        self.assertGreater(record["ms"], 0)

    def test_textbook_backward_matches_numpy(self):
        """The gradients the timed backward computes: float32 autograd of textbook_attention against
        float64 numpy (the same formulas as tests/cli/sdpa_backward.py, GQA summed)."""
        torch = self.torch
        gen = torch.Generator()
        gen.manual_seed(5)
        for heads, kv_heads, sq, sk, d, dv, causal in ((4, 2, 5, 9, 16, 8, "bottom-right"), (3, 3, 7, 4, 8, 8, "top-left")):
            q = torch.randn((2, heads, sq, d), generator=gen).requires_grad_(True)
            k = torch.randn((2, kv_heads, sk, d), generator=gen).requires_grad_(True)
            v = torch.randn((2, kv_heads, sk, dv), generator=gen).requires_grad_(True)
            dout = torch.randn((2, heads, sq, dv), generator=gen)
            pc.textbook_attention(torch, q, k, v, 1.0 / d ** 0.5, pc.causal_mask(torch, sq, sk, causal)).backward(dout)
            want = reference_backward(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(), dout.numpy(), causal)
            for name, got in (("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
                np.testing.assert_allclose(got.numpy(), want[name], rtol=1e-4, atol=1e-5, err_msg=f"{name} {causal}")


def reference_backward(q, k, v, dout, causal):
    """float64 numpy gradients of sum(dO * reference_attention(...)): dV = Pᵀ dO, dS = P (dO Vᵀ - rowsum(dO O)),
    dQ = dS K / √d, dK = dSᵀ Q / √d, dK and dV summed over each KV head's query heads."""
    q, k, v, dout = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    group = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(kk, -1, -2) * scale
    sq, sk = s.shape[-2:]
    if causal != "none":
        off = sk - sq if causal == "bottom-right" else 0
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None] + off, -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    out = p @ vv
    ds = p * (dout @ np.swapaxes(vv, -1, -2) - (dout * out).sum(axis=-1, keepdims=True))
    fold = lambda x: x.reshape(x.shape[0], -1, group, *x.shape[2:]).sum(axis=2)  # noqa: E731
    return {"dq": ds @ kk * scale, "dk": fold(np.swapaxes(ds, -1, -2) @ q * scale), "dv": fold(np.swapaxes(p, -1, -2) @ dout)}


if __name__ == "__main__":
    unittest.main()
