#!/usr/bin/env python3
"""Offline tests of bench/compare.py's torch-gpu program (bench/peer_torch_gpu.py): no GPU, no torch 2.x.

    /usr/bin/python3 bench/test_peer_torch_gpu.py [--vkattn build/release/tools/vkattn] [unittest args]

A fake CUDA torch on PYTHONPATH (each scaled_dot_product_attention call advances a fake GPU clock by a
fixed time per backend) and the fake vkattn of bench/bench_test_helpers.py stand for the two programs:
compare.py's runs, the backend selection of torch 2.5 and 2.1, torch's refusals as one line, the
budgeted counts, several backends in one run, --dry-run without torch, and a missing, old or CPU-only
torch. The FLOP count (benchlib.attention_flops) is checked by hand and on the rows vkattn recorded
(bench/testdata/vkattn-*-lavapipe.json); with --vkattn, against a live `vkattn bench --json` too.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_test_helpers as bh  # noqa: E402
import benchlib as bl  # noqa: E402
import peer_torch_gpu as pg  # noqa: E402
from optional_deps import MissingDependency, import_torch, version_tuple  # noqa: E402

VKATTN = bh.take_vkattn_arg(sys.argv) if __name__ == "__main__" else None
RECORDED = [os.path.join(bh.TESTDATA, f"vkattn-{p}-lavapipe.json") for p in ("prefill", "decode")]


def fake_package(root, name, body):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    with open(os.path.join(root, name, "__init__.py"), "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(body))


def fake_torch(root, version, cuda_available=False, cuda_built="12.1"):
    fake_package(root, "torch", f"""
        __version__ = {version!r}
        class _Cuda:
            @staticmethod
            def is_available():
                return {cuda_available!r}
        cuda = _Cuda()
        class version:
            cuda = {cuda_built!r}
        """)


# A stand-in for torch with CUDA, for the plumbing of a fresh run (backend selection, refusals, CUDA-event
# timing, merging, output files) on a machine without a GPU. Each SDPA call advances a fake GPU clock by
# a fixed time per backend, so the medians are known; flash and cuDNN refuse float32 as torch does, with
# a warning and "No available kernel". new_api: torch >= 2.5 (sdpa_kernel, SDPBackend.CUDNN_ATTENTION,
# enable_gqa, causal_lower_right); otherwise torch 2.1 (torch.backends.cuda.sdp_kernel with three flags).
FAKE_MS = {"FLASH_ATTENTION": 1.0, "EFFICIENT_ATTENTION": 2.0, "CUDNN_ATTENTION": 3.0, "MATH": 4.0}


def fake_cuda_torch(root, new_api):
    files = {
        "torch/__init__.py": f"""
            import contextlib
            __version__ = {"2.5.0+fake" if new_api else "2.1.2+fake"!r}
            float32, float16, bfloat16, uint8 = "float32", "float16", "bfloat16", "uint8"
            class version:
                cuda = "12.4"
            class Tensor:
                def __init__(self, size, dtype):
                    self.shape, self.dtype = tuple(size), dtype
                def zero_(self):
                    return self
            def randn(size, dtype=None, device=None, generator=None):
                return Tensor(size, dtype)
            def empty(n, dtype=None, device=None):
                return Tensor((n,), dtype)
            class Generator:
                def __init__(self, device=None):
                    pass
                def manual_seed(self, seed):
                    return self
            @contextlib.contextmanager
            def inference_mode():
                yield
            from . import cuda, backends, nn
            """,
        "torch/cuda.py": """
            clock = [0.0]
            class OutOfMemoryError(RuntimeError):
                pass
            def is_available():
                return True
            def get_device_name():
                return "NVIDIA H100 80GB HBM3 (fake)"
            def synchronize():
                pass
            def empty_cache():
                pass
            class Event:
                def __init__(self, enable_timing=False):
                    self.t = None
                def record(self):
                    self.t = clock[0]
                def elapsed_time(self, end):
                    return end.t - self.t
            """,
        "torch/backends/__init__.py": "from . import cuda, cudnn\n",
        "torch/backends/cudnn.py": "def version():\n    return 90100\n",
        "torch/backends/cuda.py": """
            import contextlib
            from torch import _state
            class matmul:
                allow_tf32 = False
            @contextlib.contextmanager
            def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True):
                on = [n for n, f in (("FLASH_ATTENTION", enable_flash), ("MATH", enable_math),
                                     ("EFFICIENT_ATTENTION", enable_mem_efficient)) if f]
                assert len(on) == 1, on
                _state.backend = on[0]
                yield
                _state.backend = None
            """,
        "torch/_state.py": "backend = None\n",
        "torch/nn/__init__.py": "from . import functional\n",
        "torch/nn/functional.py": f"""
            import warnings
            from torch import _state, cuda
            COST = {FAKE_MS!r}
            def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                             **extra):
                backend = _state.backend
                if backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION") and q.dtype == "float32":
                    warnings.warn(backend + " requires fp16 or bf16 (Triggered internally at fake.cpp:1.)")
                    raise RuntimeError("No available kernel.  Aborting execution.")
                if q.shape[1] != k.shape[1] and not extra.get("enable_gqa"):
                    raise RuntimeError("heads differ")
                if attn_mask is not None:
                    assert attn_mask[0] == "lower_right" and not is_causal, (attn_mask, is_causal)
                cuda.clock[0] += COST[backend]
                return q
            scaled_dot_product_attention.__doc__ = "scaled_dot_product_attention(query, key, value, attn_mask=None, " \\
                "dropout_p=0.0, is_causal=False, scale=None{', enable_gqa=False' if new_api else ''}) -> Tensor"
            """,
    }
    if new_api:
        files["torch/nn/__init__.py"] = "from . import functional, attention\n"
        files["torch/nn/attention/__init__.py"] = """
            import contextlib, enum
            from torch import _state
            class SDPBackend(enum.Enum):
                MATH = 0
                FLASH_ATTENTION = 1
                EFFICIENT_ATTENTION = 2
                CUDNN_ATTENTION = 3
            @contextlib.contextmanager
            def sdpa_kernel(backend):
                _state.backend = backend.name
                yield
                _state.backend = None
            """
        files["torch/nn/attention/bias.py"] = "def causal_lower_right(sq, sk):\n    return ('lower_right', sq, sk)\n"
    for path, body in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(body))


DENSE = "--batch 1 --heads 8 --kv-heads 2 --seq-q 64 --seq-k 128 --dim 64 --dim-v 64"
CASES = f"gqa-f16 {DENSE} --dtype f16 --causal bottom-right\ngqa-f32 {DENSE} --dtype f32 --causal none\n"


class CompareRuns(unittest.TestCase):
    """compare.py --a (the fake vkattn) --b torch-gpu:... on the fake CUDA torch."""

    def run_compare(self, tmp, *args, new_api=True, cases=CASES, counts=("--warmup", "1", "--iters", "3")):
        fake_cuda_torch(os.path.join(tmp, "fake"), new_api)
        vkattn = os.path.join(tmp, "bin", "vkattn")
        bh.write(vkattn, f"#!{sys.executable}\n" + bh.FAKE_VKATTN, 0o755)
        path = os.path.join(tmp, "cases.txt")
        bh.write(path, cases)
        out = os.path.join(tmp, "r.json")
        done = bh.run_compare("--a", vkattn, *args, "--rounds", "2", *counts, "--json", out, path,
                              env=dict(os.environ, PYTHONPATH=os.path.join(tmp, "fake")))
        doc = None
        if done.returncode == 0:
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
        return done, doc

    def test_one_backend(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, doc = self.run_compare(tmp, "--b", "torch-gpu:efficient")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("| gqa-f32 |", done.stdout)
        run = doc["runs"][1]
        self.assertEqual((run["label"], run["program"], run["vk_driver_files"], run["comparison"]),
                         ("torch-gpu:efficient", "torch-gpu", None, "A vs torch-gpu:efficient"))
        self.assertIn("torch 2.5.0+fake, CUDA 12.4, NVIDIA H100 80GB HBM3 (fake), SDPA backend efficient", run["version"])
        rows = [c["result"] for c in run["cases"]]
        # each round times anew: four records, each from its own 3 timed calls
        self.assertEqual([r["ms_median"] for r in rows], [FAKE_MS["EFFICIENT_ATTENTION"]] * 4)
        self.assertEqual({r["iters"] for r in rows}, {3})
        self.assertEqual([c["round"] for c in run["cases"]], [1, 1, 2, 2])
        self.assertEqual(rows[0]["kernel"], "sdpa efficient")
        self.assertEqual(rows[0]["torch_call"], "attn_mask=causal_lower_right(seq_q, seq_k)")  # Sq 64, Sk 128
        self.assertAlmostEqual(rows[1]["tflops"], bl.tflops(rows[1], FAKE_MS["EFFICIENT_ATTENTION"]))
        self.assertEqual(run["cases"][0]["command"], ["torch-gpu:efficient", *DENSE.split(), "--dtype", "f16",
                                                      "--causal", "bottom-right"])

    def test_every_backend_at_once(self):
        backends = ["efficient", "math"]
        with tempfile.TemporaryDirectory() as tmp:
            done, doc = self.run_compare(tmp, *[a for b in backends for a in ("--b", f"torch-gpu:{b}")])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual([r["label"] for r in doc["runs"]], ["A", "torch-gpu:efficient", "torch-gpu:math"])
        self.assertEqual({r["comparison"] for r in doc["runs"]}, {"A vs torch-gpu:efficient, torch-gpu:math"})
        self.assertEqual(doc["runs"][2]["cases"][0]["result"]["ms_median"], FAKE_MS["MATH"])
        self.assertEqual(done.stdout.count("| case | A | B |"), 2)  # a table per B
        self.assertIn("B = torch-gpu:math)", done.stdout)
        self.assertEqual([s["b_label"] for s in doc["compare"]["summary"]], ["torch-gpu:efficient"] * 2 + ["torch-gpu:math"] * 2)
        ratio = doc["compare"]["summary"][3]["ratio_median"]  # math on gqa-f32 against the fake vkattn's 2 ms (no tflops)
        self.assertIsNone(ratio)

    def test_budgeted_counts(self):
        with tempfile.TemporaryDirectory() as tmp:  # 4 ms per math call, 2 s: the 50 runs fit
            done, doc = self.run_compare(tmp, "--b", "torch-gpu:math", counts=())
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual({c["result"]["iters"] for c in doc["runs"][1]["cases"]}, {50})
        with tempfile.TemporaryDirectory() as tmp:  # --iters 5 as a cap: 8 ms hold two 4 ms calls, on both sides
            done, doc = self.run_compare(tmp, "--b", "torch-gpu:math", counts=("--iters", "5", "--budget", "0.008"))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual({c["result"]["iters"] for c in doc["runs"][1]["cases"]}, {2})
        self.assertEqual(doc["runs"][0]["cases"][0]["command"][-4:], ["--iters", "5", "--budget", "0.008"])

    def test_refusal_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, _ = self.run_compare(tmp, "--b", "torch-gpu")  # flash, the default, refuses f32
        bh.one_line_error(self, done, "torch-gpu:flash refused gqa-f32: FLASH_ATTENTION requires fp16 or bf16; "
                                      "RuntimeError: No available kernel. Aborting execution.")

    def test_torch_2_1(self):
        with tempfile.TemporaryDirectory() as tmp:  # no enable_gqa before 2.5: GQA is refused, saying why
            done, _ = self.run_compare(tmp, "--b", "torch-gpu:math", new_api=False)
        bh.one_line_error(self, done, "needs enable_gqa (torch >= 2.5)")
        mha = "mha-f32 --batch 1 --heads 4 --kv-heads 4 --seq-q 64 --seq-k 64 --dim 64 --dim-v 64 --dtype f32 --causal top-left\n"
        with tempfile.TemporaryDirectory() as tmp:
            done, doc = self.run_compare(tmp, "--b", "torch-gpu:math", new_api=False, cases=mha)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(doc["runs"][1]["cases"][0]["result"]["ms_median"], FAKE_MS["MATH"])
        with tempfile.TemporaryDirectory() as tmp:
            done, _ = self.run_compare(tmp, "--b", "torch-gpu:cudnn", new_api=False, cases=mha)
        bh.one_line_error(self, done, "torch 2.1.2+fake: torch.backends.cuda.sdp_kernel has no enable_cudnn")
        chunk = mha.replace("--seq-k 64", "--seq-k 256").replace("top-left", "bottom-right").replace("f32", "f16")
        with tempfile.TemporaryDirectory() as tmp:
            done, _ = self.run_compare(tmp, "--b", "torch-gpu:math", new_api=False, cases=chunk)
        bh.one_line_error(self, done, "needs torch.nn.attention.bias.causal_lower_right")

    def test_bad_backend_and_other_cases_are_refused_before_running(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, _ = self.run_compare(tmp, "--b", "torch-gpu:triton")
            bh.one_line_error(self, done, "torch-gpu:triton: the backend is one of flash, efficient, cudnn, math")
            done, _ = self.run_compare(tmp, "--b", "torch-gpu", cases="paged --heads 2 --paged 16\n")
            bh.one_line_error(self, done, "torch-gpu takes plain dense cases; not --paged 16")

    def test_dry_run_needs_no_torch(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_package(tmp, "torch", "raise RuntimeError('torch imported')\n")
            done = bh.run_compare("--dry-run", "--a", os.path.join(tmp, "none"), "--b", "torch-gpu:cudnn", "smoke",
                                  env=dict(os.environ, PYTHONPATH=tmp))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("(binary not found)", done.stdout)
        self.assertIn("smoke-prefill-h2-s64-d64-f32: torch.nn.functional.scaled_dot_product_attention on CUDA, "
                      "backend cudnn alone, f32", done.stdout)


class Dependencies(unittest.TestCase):
    """A missing, old or CPU-only torch: one line from compare.py, before anything runs."""

    def compare(self, tmp):
        vkattn = os.path.join(tmp, "bin", "vkattn")
        bh.write(vkattn, f"#!{sys.executable}\n" + bh.FAKE_VKATTN, 0o755)
        log = os.path.join(tmp, "log")
        done = bh.run_compare("--a", vkattn, "--b", "torch-gpu", "smoke", env=dict(os.environ, PYTHONPATH=tmp, FAKE_LOG=log))
        self.assertFalse(os.path.exists(log), "vkattn ran before torch was found missing")
        return done

    def test_torch_missing(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_package(tmp, "torch", "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
            bh.one_line_error(self, self.compare(tmp), "PyTorch is not installed")

    def test_torch_too_old(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_torch(tmp, "1.13.1")
            bh.one_line_error(self, self.compare(tmp), "torch 1.13.1 is too old: compare.py's torch-gpu program needs "
                                                       "torch >= 2.0")

    def test_torch_without_cuda(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_torch(tmp, "2.4.0+cpu", cuda_built=None)
            bh.one_line_error(self, self.compare(tmp), "torch 2.4.0+cpu cannot use CUDA here (it is a CPU-only build")
        with tempfile.TemporaryDirectory() as tmp:
            fake_torch(tmp, "2.4.0", cuda_built="12.1")
            bh.one_line_error(self, self.compare(tmp), "no CUDA device or driver is visible")

    def test_installed_torch(self):
        """Whatever torch this machine has (Debian bookworm's python3-torch is 1.13, without SDPA)."""
        with tempfile.TemporaryDirectory() as tmp:
            vkattn = os.path.join(tmp, "vkattn")
            bh.write(vkattn, f"#!{sys.executable}\n" + bh.FAKE_VKATTN, 0o755)
            done = bh.run_compare("--a", vkattn, "--b", "torch-gpu", "smoke")
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        if "PyTorch is not installed" in message:
            self.skipTest("no torch installed")
        old = re.search(r"torch (\S+) is too old", message)
        if old:
            self.assertLess(version_tuple(old.group(1)), (2, 0, 0))
            bh.one_line_error(self, done, "needs torch >= 2.0")
        elif "cannot use CUDA here" in message:
            bh.one_line_error(self, done, "torch.cuda.is_available() is False")
        else:
            self.skipTest("torch with CUDA: this is a GPU machine, run compare.py itself")

    def test_import_torch_helper(self):
        self.assertEqual(version_tuple("2.5.1+cu124"), (2, 5, 1))
        self.assertEqual(version_tuple("1.13.0a0"), (1, 13, 0))
        self.assertEqual(version_tuple("2.1"), (2, 1, 0))
        saved = sys.modules.get("torch")
        try:
            sys.modules["torch"] = None  # makes `import torch` raise ImportError
            with self.assertRaisesRegex(MissingDependency, "PyTorch is not installed"):
                import_torch()
        finally:
            if saved is None:
                sys.modules.pop("torch", None)
            else:
                sys.modules["torch"] = saved


class Flops(unittest.TestCase):
    def test_equals_vkattn_on_recorded_rows(self):
        # vkattn's tflops = its FLOPs / ms_median: benchlib's formula must give the same FLOPs.
        kinds = set()
        for path in RECORDED:
            with open(path, encoding="utf-8") as f:
                rows = json.load(f)["results"]
            for row in rows:
                vk_flops = row["tflops"] * 1e12 * row["ms_median"] * 1e-3
                self.assertAlmostEqual(bl.attention_flops(row) / vk_flops, 1.0, delta=1e-9, msg=str(row))
                kinds.add("causal Sq==Sk" if row["causal"] != "none" and row["seq_q"] == row["seq_k"] else
                          "causal Sq!=Sk" if row["causal"] != "none" else "none")
                if row["dim_qk"] != row["dim_v"]:
                    kinds.add("dqk!=dv")
                if row["heads"] != row["kv_heads"]:
                    kinds.add("gqa")
        self.assertEqual(kinds, {"causal Sq==Sk", "causal Sq!=Sk", "none", "dqk!=dv", "gqa"})

    def test_hand_computed(self):
        base = dict(batch=2, heads=3, kv_heads=3, seq_q=128, seq_k=128, dim_qk=64, dim_v=64, causal="none", dtype="f16")
        self.assertEqual(bl.attention_flops(base), 4 * 2 * 3 * 128 * 128 * 64)
        # Causal with Sq == Sk: 128*129/2 visible pairs per head, in either alignment.
        self.assertEqual(bl.attention_flops(dict(base, causal="top-left")), 2 * 2 * 3 * (128 * 129 // 2) * 128)
        self.assertEqual(bl.attention_flops(dict(base, causal="bottom-right")), 2 * 2 * 3 * (128 * 129 // 2) * 128)
        self.assertEqual(bl.attention_flops(dict(base, dim_qk=40, dim_v=24)), 4 * 2 * 3 * 128 * 128 * 32)
        # Decode aligned bottom-right: the one query sees every key; top-left: key 0 only.
        self.assertEqual(bl.attention_flops(dict(base, seq_q=1, seq_k=4096, causal="bottom-right")), 4 * 2 * 3 * 4096 * 64)
        self.assertEqual(bl.attention_flops(dict(base, seq_q=1, seq_k=4096, causal="top-left")), 4 * 2 * 3 * 1 * 64)
        # Sq 128, Sk 512 top-left sees 128*129/2 pairs, 12.6% of the square.
        self.assertEqual(bl.attention_flops(dict(base, seq_q=128, seq_k=512, causal="top-left")),
                         2 * 2 * 3 * (128 * 129 // 2) * 128)
        # Sq > Sk bottom-right: the first Sq - Sk rows see nothing.
        self.assertEqual(bl.visible_pairs(10, 4, "bottom-right"), 1 + 2 + 3 + 4)
        for sq in (1, 2, 7, 64, 65):
            for sk in (1, 3, 64, 100):
                for causal, off in (("top-left", 0), ("bottom-right", sk - sq)):
                    brute = sum(min(sk, max(0, i + 1 + off)) for i in range(sq))
                    self.assertEqual(bl.visible_pairs(sq, sk, causal), brute, (sq, sk, causal))
        self.assertAlmostEqual(bl.tflops(base, 1.0), 4 * 2 * 3 * 128 * 128 * 64 / 1e-3 / 1e12)
        self.assertIsNone(bl.tflops(base, 0))

    @unittest.skipUnless(VKATTN, "no --vkattn given")
    def test_equals_live_vkattn(self):
        for extra in (["--causal", "top-left", "--dim", "24", "--dim-v", "16"],
                      ["--seq-k", "48", "--causal", "bottom-right", "--kv-heads", "1"]):
            done = subprocess.run([VKATTN, "bench", "--json", "--batch", "1", "--heads", "2", "--seq-q", "32",
                                   "--warmup", "0", "--iters", "1", *extra], capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            row = json.loads(done.stdout)["results"][0]
            self.assertEqual(row["status"], "ok")
            self.assertAlmostEqual(bl.attention_flops(row) / (row["tflops"] * 1e9 * row["ms_median"]), 1.0, delta=1e-9)


class TorchCall(unittest.TestCase):
    SHAPE = dict(batch=1, heads=8, kv_heads=8, seq_q=512, seq_k=512, dim_qk=64, dim_v=64, causal="none", dtype="f16")

    def test_plans(self):
        plan = pg.plan_torch_call
        s = self.SHAPE
        self.assertEqual(plan(s, False, False), {"is_causal": False, "lower_right": False, "enable_gqa": False, "note": None})
        self.assertTrue(plan(dict(s, causal="top-left"), False, False)["is_causal"])
        self.assertTrue(plan(dict(s, causal="bottom-right"), False, False)["is_causal"])  # Sq == Sk: the same mask
        decode = plan(dict(s, seq_q=1, seq_k=4096, causal="bottom-right"), False, False)
        self.assertFalse(decode["is_causal"])
        self.assertIn("sees every key", decode["note"])
        chunk = dict(s, seq_q=128, seq_k=4096, causal="bottom-right")
        self.assertIn("causal_lower_right", plan(chunk, False, False))  # a reason: unsupported
        self.assertTrue(plan(chunk, False, True)["lower_right"])
        self.assertTrue(plan(dict(s, seq_q=128, causal="top-left"), False, False)["is_causal"])  # torch's own alignment
        gqa = dict(s, kv_heads=2)
        self.assertIn("enable_gqa", plan(gqa, False, True))
        self.assertTrue(plan(gqa, True, True)["enable_gqa"])

    def test_refusal_reason(self):
        class W:
            def __init__(self, m):
                self.message = m
        caught = [W("Flash attention requires q,k,v to have the same last dimension  (Triggered internally at "
                    "../aten/src/ATen/native/transformers/cuda/sdp_utils.cpp:163.)"), W("Flash attention requires q,k,v "
                    "to have the same last dimension (Triggered internally at x.cpp:1.)")]
        reason = bl.refusal_reason(RuntimeError("No available kernel.\n Aborting execution."), caught)
        self.assertEqual(reason, "Flash attention requires q,k,v to have the same last dimension; "
                                 "RuntimeError: No available kernel. Aborting execution.")
        self.assertLessEqual(len(bl.refusal_reason(RuntimeError("x" * 5000))), 600)

    def test_run_counts_follow_vkattn(self):
        self.assertEqual(bl.run_counts(0.01, 10, 50, 2.0), (9, 50))   # fast: the full counts
        self.assertEqual(bl.run_counts(1000.0, 10, 50, 2.0), (0, 2))  # slow: what fits the budget
        self.assertEqual(bl.run_counts(5000.0, 10, 50, 2.0), (0, 1))  # at least one timed run


if __name__ == "__main__":
    unittest.main()
