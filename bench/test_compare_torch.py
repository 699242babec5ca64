#!/usr/bin/env python3
"""Offline tests of bench/compare_torch.py: no GPU and no torch 2.x needed (matplotlib is).

    /usr/bin/python3 bench/test_compare_torch.py [--vkattn build/release/tools/vkattn] [unittest args]

The vkattn side comes from bench/testdata/vkattn-*-lavapipe.json (recorded with the real binary on
lavapipe), the torch side from bench/testdata/torch-synthetic.json (made up, marked synthetic). With
--vkattn, the FLOP convention and the JSON schema are also checked against a live `vkattn bench --json`.
Fake `torch` and `matplotlib` packages on PYTHONPATH stand for a missing, old or CPU-only torch.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare_torch as ct  # noqa: E402
from optional_deps import MissingDependency, import_torch, version_tuple  # noqa: E402

SCRIPT = os.path.join(HERE, "compare_torch.py")
DATA = os.path.join(HERE, "testdata")
PREFILL = os.path.join(DATA, "vkattn-prefill-lavapipe.json")
DECODE = os.path.join(DATA, "vkattn-decode-lavapipe.json")
TORCH = os.path.join(DATA, "torch-synthetic.json")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
VKATTN = None  # --vkattn: the built binary, for the live checks (taken off argv before unittest sees it)
if __name__ == "__main__" and "--vkattn" in sys.argv[:-1]:
    _i = sys.argv.index("--vkattn")
    VKATTN = sys.argv[_i + 1]
    del sys.argv[_i:_i + 2]


def load_sides():
    sides = {}
    for preset, path in (("prefill", PREFILL), ("decode", DECODE)):
        with open(path, encoding="utf-8") as f:
            sides[preset] = ct.load_vkattn(f.read(), preset, path)
    return sides


def synthetic_torch():
    """torch_results as TorchSide.run gives them, from the synthetic fixture: {shape_key: (records, note)}."""
    with open(TORCH, encoding="utf-8") as f:
        doc = json.load(f)
    results = {}
    for s in doc["shapes"]:
        records = {}
        for b, rec in s["torch"].items():
            records[b] = dict(rec) if "unsupported" in rec else {"ms": rec["ms"], "ms_min": rec["ms"],
                                                                 "tflops": ct.tflops(s, rec["ms"]), "iters": 1}
        results[ct.shape_key(s)] = (records, s.get("torch_call"))
    meta = {k: doc[k] for k in ("device", "torch_version", "cuda", "backends")}
    meta.update(date="2026-11-22", synthetic=True)
    return results, meta


def merged():
    torch_results, meta = synthetic_torch()
    return ct.merge(load_sides(), torch_results, meta)


def run_script(*args, env_path=None):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if env_path:
        env["PYTHONPATH"] = env_path
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=120)


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


class CompareProgram(unittest.TestCase):
    """bench/compare.py's torch-gpu[:BACKEND] program on the fake CUDA torch (TorchSide is its adapter)."""

    def run_compare(self, tmp, *args):
        import bench_test_helpers as bh  # noqa: PLC0415
        fake_cuda_torch(os.path.join(tmp, "fake"), True)
        vkattn = os.path.join(tmp, "bin", "vkattn")
        bh.write(vkattn, f"#!{sys.executable}\n" + bh.FAKE_VKATTN, 0o755)
        cases = os.path.join(tmp, "cases.txt")
        dense = "--batch 1 --heads 8 --kv-heads 2 --seq-q 64 --seq-k 128 --dim 64 --dim-v 64"
        bh.write(cases, f"gqa-f16 {dense} --dtype f16 --causal bottom-right\ngqa-f32 {dense} --dtype f32 --causal none\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(tmp, "fake"))
        out = os.path.join(tmp, "r.json")
        done = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), "--a", vkattn, *args, "--rounds", "2",
                               "--warmup", "1", "--iters", "3", "--json", out, cases],
                              capture_output=True, text=True, env=env, timeout=120)
        return done, out

    def test_compare_runs_torch_gpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, out = self.run_compare(tmp, "--b", "torch-gpu:efficient")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("| gqa-f32 |", done.stdout)
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
            run = doc["runs"][1]
            self.assertEqual((run["label"], run["program"], run["vk_driver_files"]),
                             ("torch-gpu:efficient", "torch-gpu", None))
            self.assertIn("SDPA backend efficient", run["version"])
            rows = [c["result"] for c in run["cases"]]
            self.assertEqual([r["ms_median"] for r in rows], [FAKE_MS["EFFICIENT_ATTENTION"]] * 4)
            self.assertEqual({r["iters"] for r in rows}, {3})
            self.assertEqual(rows[0]["kernel"], "sdpa efficient")

    def test_each_round_times_anew(self):
        import compare  # noqa: PLC0415

        class Side:  # TorchSide.run's caching, counted
            def __init__(self):
                self.cache, self.timed = {}, 0

            def run(self, shape):
                key = ct.shape_key(shape)
                if key not in self.cache:
                    self.timed += 1
                    self.cache[key] = ({"flash": {"ms": 1.0, "ms_min": 1.0, "tflops": 1.0, "iters": 1}}, None)
                return self.cache[key]
        prog = compare.Program("torch-gpu", "B")
        prog.torch = Side()
        for _ in range(3):
            prog.run("system", ["--heads", "2", "--seq-q", "4", "--dtype", "f16"], [], "x")
        self.assertEqual(prog.torch.timed, 3)

    def test_refusal_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, _ = self.run_compare(tmp, "--b", "torch-gpu")  # flash refuses f32
            self.assertEqual(done.returncode, 1, done.stderr)
            self.assertNotIn("Traceback", done.stderr)
            self.assertTrue(done.stderr.splitlines()[-1].startswith("compare.py: torch-gpu refused gqa-f32: "),
                            done.stderr)


class Flops(unittest.TestCase):
    def test_equals_vkattn_on_recorded_rows(self):
        # vkattn's tflops = its FLOPs / ms_median: the script's formula must give the same FLOPs.
        kinds = set()
        for side in load_sides().values():
            for row in side["rows"]:
                vk_flops = row["tflops"] * 1e12 * row["ms_median"] * 1e-3
                self.assertAlmostEqual(ct.attention_flops(row) / vk_flops, 1.0, delta=1e-9, msg=str(row))
                kinds.add("causal Sq==Sk" if row["causal"] != "none" and row["seq_q"] == row["seq_k"] else
                          "causal Sq!=Sk" if row["causal"] != "none" else "none")
                if row["dim_qk"] != row["dim_v"]:
                    kinds.add("dqk!=dv")
                if row["heads"] != row["kv_heads"]:
                    kinds.add("gqa")
        self.assertEqual(kinds, {"causal Sq==Sk", "causal Sq!=Sk", "none", "dqk!=dv", "gqa"})

    def test_hand_computed(self):
        base = dict(batch=2, heads=3, kv_heads=3, seq_q=128, seq_k=128, dim_qk=64, dim_v=64, causal="none", dtype="f16")
        self.assertEqual(ct.attention_flops(base), 4 * 2 * 3 * 128 * 128 * 64)
        # Causal with Sq == Sk: 128*129/2 visible pairs per head, in either alignment.
        self.assertEqual(ct.attention_flops(dict(base, causal="top-left")), 2 * 2 * 3 * (128 * 129 // 2) * 128)
        self.assertEqual(ct.attention_flops(dict(base, causal="bottom-right")), 2 * 2 * 3 * (128 * 129 // 2) * 128)
        self.assertEqual(ct.attention_flops(dict(base, dim_qk=40, dim_v=24)), 4 * 2 * 3 * 128 * 128 * 32)
        # Decode aligned bottom-right: the one query sees every key.
        self.assertEqual(ct.attention_flops(dict(base, seq_q=1, seq_k=4096, causal="bottom-right")), 4 * 2 * 3 * 4096 * 64)
        # Top-left decode: the one query sees key 0 only.
        self.assertEqual(ct.attention_flops(dict(base, seq_q=1, seq_k=4096, causal="top-left")), 4 * 2 * 3 * 1 * 64)
        # The case: Sq 128, Sk 512 top-left sees 128*129/2 pairs, 12.6% of the square.
        self.assertEqual(ct.attention_flops(dict(base, seq_q=128, seq_k=512, causal="top-left")),
                         2 * 2 * 3 * (128 * 129 // 2) * 128)
        # Sq > Sk bottom-right: the first Sq - Sk rows see nothing.
        self.assertEqual(ct.visible_pairs(10, 4, "bottom-right"), 1 + 2 + 3 + 4)
        for sq in (1, 2, 7, 64, 65):
            for sk in (1, 3, 64, 100):
                for causal, off in (("top-left", 0), ("bottom-right", sk - sq)):
                    brute = sum(min(sk, max(0, i + 1 + off)) for i in range(sq))
                    self.assertEqual(ct.visible_pairs(sq, sk, causal), brute, (sq, sk, causal))
        self.assertAlmostEqual(ct.tflops(base, 1.0), 4 * 2 * 3 * 128 * 128 * 64 / 1e-3 / 1e12)
        self.assertIsNone(ct.tflops(base, 0))

    @unittest.skipUnless(VKATTN, "no --vkattn given")
    def test_equals_live_vkattn(self):
        binary = VKATTN
        for extra in (["--causal", "top-left", "--dim", "24", "--dim-v", "16"],
                      ["--seq-k", "48", "--causal", "bottom-right", "--kv-heads", "1"]):
            done = subprocess.run([binary, "bench", "--json", "--batch", "1", "--heads", "2", "--seq-q", "32",
                                   "--warmup", "0", "--iters", "1", *extra], capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            side = ct.load_vkattn(done.stdout, "prefill", "live vkattn bench --json")  # its schema is accepted
            row = side["rows"][0]
            self.assertEqual(row["status"], "ok")
            self.assertAlmostEqual(ct.attention_flops(row) / (row["tflops"] * 1e9 * row["ms_median"]), 1.0, delta=1e-9)


class Arguments(unittest.TestCase):
    BAD = [
        ["--max-seq", "0"], ["--max-seq", "many"], ["--backends", "flash,triton"], ["--backends", ""],
        ["--presets", "encode"], ["--iters", "0"], ["--warmup", "-1"], ["--budget", "0"], ["--budget", "nan"],
        ["--from-json", "/nonexistent/results.json"], ["--from-json", TORCH, "--dry-run"],
        ["--from-json", TORCH, "--max-seq", "64"], ["--png", "chart.png"],
        ["--vkattn-prefill-json", PREFILL, "--presets", "decode"], ["--vkattn-decode-json", "/nonexistent.json"],
        ["--vkattn", "/nonexistent/vkattn"], ["--no-such-option"], ["stray"],
    ]

    def test_bad_values_are_one_line_and_exit_2(self):
        for args in self.BAD:
            with self.subTest(args=args):
                done = run_script(*args)
                self.assertEqual(done.returncode, 2, done.stderr)
                lines = done.stderr.splitlines()
                self.assertEqual(len(lines), 1, done.stderr)
                self.assertTrue(lines[0].startswith("compare_torch.py: error: "), lines[0])
                self.assertEqual(done.stdout, "")

    def test_dry_run_runs_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "ran")
            binary = os.path.join(tmp, "vkattn")
            with open(binary, "w", encoding="utf-8") as f:
                f.write(f"#!/bin/sh\ntouch {marker}\n")
            os.chmod(binary, 0o755)
            # A torch whose import fails loudly: the dry run must not import it.
            fake_package(tmp, "torch", "raise RuntimeError('torch imported')\n")
            done = run_script("--dry-run", "--vkattn", binary, "--device", "nvidia", "--max-seq", "2048",
                              "--backends", "flash,math", "--vkattn-decode-json", DECODE, env_path=tmp)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertFalse(os.path.exists(marker))
        self.assertIn(f"{binary} bench --sweep prefill --json --max-seq 2048 --device nvidia", done.stdout)
        self.assertIn(f"vkattn decode: from {DECODE}", done.stdout)
        self.assertIn("backends flash, math", done.stdout)
        self.assertIn("<device>-<date>.json and .png", done.stdout)

    def test_vkattn_command_passes_options_through(self):
        args = ct.parse_args(["--vkattn-prefill-json", PREFILL, "--vkattn-decode-json", DECODE, "--max-seq", "512",
                              "--device", "1", "--iters", "7", "--vkattn", "/opt/vkattn"])
        self.assertEqual(ct.vkattn_command(args, "decode"),
                         ["/opt/vkattn", "bench", "--sweep", "decode", "--json", "--max-seq", "512", "--device", "1",
                          "--warmup", "10", "--iters", "7"])  # given counts: exact, on both sides
        args = ct.parse_args(["--vkattn-prefill-json", PREFILL, "--vkattn-decode-json", DECODE])
        self.assertEqual(args.presets, ["prefill", "decode"])
        self.assertEqual(args.backends, ["flash", "efficient", "cudnn", "math"])
        # Default counts: the same caps and the same budget as the torch side.
        self.assertEqual(ct.vkattn_command(args, "prefill")[1:], ["bench", "--sweep", "prefill", "--json", "--warmup",
                                                                  "10", "--iters", "50", "--budget", "2"])


class VkattnJson(unittest.TestCase):
    def test_recorded_file(self):
        side = load_sides()["prefill"]
        self.assertEqual(side["device"], "llvmpipe (LLVM 15.0.6, 256 bits)")
        self.assertEqual(side["version"], "0.1.0")
        self.assertEqual(len(side["rows"]), 9)
        self.assertTrue(all(r["status"] == "ok" and r["reason"] is None for r in side["rows"]))

    def test_schema_tolerance_and_refusals(self):
        doc = {"device": "d", "driver": "v", "version": "0.2.0", "sweep": "decode", "reduced": False, "fits": [],
               "results": [dict(batch=1, heads=8, kv_heads=2, seq_q=1, seq_k=4096, dim_qk=128, dim_v=128, dtype="f16",
                                causal="bottom-right", ms_median=1.0, tflops=0.5, status="skipped",
                                reason="needs 9 GiB", peak_device_bytes=10)]}
        side = ct.load_vkattn(json.dumps(doc), "decode", "x")
        self.assertEqual((side["rows"][0]["status"], side["rows"][0]["reason"]), ("skipped", "needs 9 GiB"))
        with self.assertRaisesRegex(ct.Failure, "holds the 'decode' sweep, not 'prefill'"):
            ct.load_vkattn(json.dumps(doc), "prefill", "x")
        bad = copy.deepcopy(doc)
        del bad["results"][0]["dim_v"]
        with self.assertRaisesRegex(ct.Failure, "lacks dim_v"):
            ct.load_vkattn(bad, "decode", "x")
        bad = copy.deepcopy(doc)
        bad["results"][0]["causal"] = "diagonal"
        with self.assertRaisesRegex(ct.Failure, "causal is 'diagonal'"):
            ct.load_vkattn(bad, "decode", "x")
        with self.assertRaisesRegex(ct.Failure, "not JSON"):
            ct.load_vkattn("vkattn: error: no device", "decode", "x")
        with self.assertRaisesRegex(ct.Failure, "no \"results\" list"):
            ct.load_vkattn({"device": "d"}, "decode", "x")

    def test_max_seq_caps_a_recorded_file(self):
        side = ct.cap_seq(load_sides()["decode"], 512)
        self.assertEqual([r["seq_k"] for r in side["rows"]], [256, 512, 512])
        self.assertIs(ct.cap_seq(side, None), side)

    def test_runs_the_binary_with_the_options(self):
        with tempfile.TemporaryDirectory() as tmp:
            argv_file = os.path.join(tmp, "argv")
            binary = os.path.join(tmp, "vkattn")
            with open(binary, "w", encoding="utf-8") as f:
                f.write(f"#!{sys.executable}\nimport sys\nopen({argv_file!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                        f"sys.stdout.write(open({DECODE!r}).read())\n")
            os.chmod(binary, 0o755)
            args = ct.parse_args(["--vkattn", binary, "--max-seq", "1024", "--device", "nvidia"])
            side = ct.run_vkattn(ct.vkattn_command(args, "decode"), "decode")
            with open(argv_file, encoding="utf-8") as f:
                self.assertEqual(f.read(), "bench --sweep decode --json --max-seq 1024 --device nvidia "
                                           "--warmup 10 --iters 50 --budget 2")
            self.assertEqual(len(side["rows"]), 5)
            with open(binary, "w", encoding="utf-8") as f:
                f.write("#!/bin/sh\necho 'vkattn: error: unknown --sweep' >&2\nexit 109\n")
            with self.assertRaisesRegex(ct.Failure, "exited with 109"):
                ct.run_vkattn([binary, "bench", "--sweep", "decode", "--json"], "decode")


class Merge(unittest.TestCase):
    def test_merged_per_shape(self):
        results = merged()
        self.assertEqual(list(results["presets"]), ["prefill", "decode"])
        # (The recorded files predate the host_cpu field: null.)
        self.assertEqual(results["vkattn"], {"device": "llvmpipe (LLVM 15.0.6, 256 bits)",
                                             "driver": "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)", "host_cpu": None,
                                             "version": "0.1.0"})
        for key in ("date", "device", "torch_version", "cuda", "flops", "ratio"):
            self.assertIn(key, results)
        sides = load_sides()
        for preset, entries in results["presets"].items():
            self.assertEqual([ct.shape_key(e) for e in entries], [ct.shape_key(r) for r in sides[preset]["rows"]])
            for e, row in zip(entries, sides[preset]["rows"]):
                self.assertEqual(e["vkattn"]["ms"], row["ms_median"])
                self.assertEqual(e["vkattn"]["tflops"], row["tflops"])
                self.assertEqual(e["vkattn"]["status"], "ok")
                self.assertEqual(list(e["torch"]), ["flash", "efficient", "cudnn", "math"])
        first = results["presets"]["prefill"][0]  # f32: flash refuses it in the synthetic side
        self.assertEqual(set(first["torch"]["flash"]), {"unsupported"})
        self.assertEqual(set(first["torch"]["math"]), {"ms", "ms_min", "tflops", "iters"})
        decode = results["presets"]["decode"][0]
        self.assertIn("is_causal=False", decode["torch_call"])
        json.dumps(results)  # serialisable as is

    def test_skipped_row_and_missing_torch_figures(self):
        sides = load_sides()
        skipped = dict(sides["prefill"]["rows"][1], status="skipped", reason="needs 81 GiB, device has 80")
        sides["prefill"]["rows"][1] = skipped
        extra = dict(skipped, seq_q=99, seq_k=99, status="ok")  # a shape torch has no figures for
        sides["prefill"]["rows"].append(extra)
        torch_results, meta = synthetic_torch()
        results = ct.merge(sides, torch_results, meta)
        entry = results["presets"]["prefill"][1]
        self.assertEqual(entry["vkattn"], {"ms": None, "tflops": None, "status": "skipped",
                                           "reason": "needs 81 GiB, device has 80"})
        self.assertIn("tflops", entry["torch"]["efficient"])  # torch still ran the shape
        self.assertEqual(results["presets"]["prefill"][-1]["torch"]["math"], {"unsupported": "not run"})
        table = ct.format_table(results)
        self.assertIn("vkattn skipped: needs 81 GiB, device has 80 (1 shape)", table)

    def test_sides_from_different_devices_are_refused(self):
        sides = load_sides()
        sides["decode"]["device"] = "NVIDIA H100"
        with self.assertRaisesRegex(ct.Failure, "different devices"):
            ct.merge(sides, {}, {"backends": ["math"]})


class TorchCall(unittest.TestCase):
    SHAPE = dict(batch=1, heads=8, kv_heads=8, seq_q=512, seq_k=512, dim_qk=64, dim_v=64, causal="none", dtype="f16")

    def test_plans(self):
        plan = ct.plan_torch_call
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
        reason = ct.refusal_reason(RuntimeError("No available kernel.\n Aborting execution."), caught)
        self.assertEqual(reason, "Flash attention requires q,k,v to have the same last dimension; "
                                 "RuntimeError: No available kernel. Aborting execution.")
        self.assertLessEqual(len(ct.refusal_reason(RuntimeError("x" * 5000))), 600)

    def test_run_counts_follow_vkattn(self):
        self.assertEqual(ct.run_counts(0.01, 10, 50, 2.0), (9, 50))   # fast: the full counts
        self.assertEqual(ct.run_counts(1000.0, 10, 50, 2.0), (0, 2))  # slow: what fits the budget
        self.assertEqual(ct.run_counts(5000.0, 10, 50, 2.0), (0, 1))  # at least one timed run


class Table(unittest.TestCase):
    def test_ratio_table(self):
        results = merged()
        table = ct.format_table(results)
        self.assertIn("SYNTHETIC", table)
        self.assertIn("ratio = vkattn TFLOP/s / backend TFLOP/s", table)
        lines = table.splitlines()
        header = next(line for line in lines if line.strip().startswith("B ") and "vkattn" in line)
        self.assertEqual([c.split() for c in header.split("|")[1:]],
                         [["vkattn"], ["flash", "ratio"], ["efficient", "ratio"], ["cudnn", "ratio"], ["math", "ratio"]])
        # The f16 GQA prefill shape: every backend has a figure; check one ratio by hand.
        entry = next(e for e in results["presets"]["prefill"] if e["dtype"] == "f16")
        expected = entry["vkattn"]["tflops"] / entry["torch"]["cudnn"]["tflops"]
        row = next(line for line in lines if line.startswith(f"{1:>4} {4:>4} {2:>4} {128:>6}"))
        cells = [c.split() for c in row.split("|")]
        self.assertEqual(cells[1], [f"{entry['vkattn']['tflops']:.4g}"])
        self.assertEqual(cells[4], [f"{entry['torch']['cudnn']['tflops']:.4g}", f"{expected:.3g}"])
        f32_row = next(line for line in lines if line.startswith(f"{1:>4} {2:>4} {2:>4} {64:>6}"))
        self.assertEqual(f32_row.split("|")[2].split(), ["unsup.", "-"])
        self.assertIn("flash unsupported: (synthetic) flash needs fp16 or bf16 inputs, got float32 (8 shapes)", table)
        self.assertRegex(table, r"efficient: geometric mean ratio [0-9.e+-]+ over 9 shape\(s\)")

    def test_ratio(self):
        entry = {"vkattn": {"tflops": 2.0, "status": "ok"},
                 "torch": {"flash": {"tflops": 4.0}, "math": {"unsupported": "no"}}}
        self.assertEqual(ct.ratio(entry, "flash"), 0.5)
        self.assertIsNone(ct.ratio(entry, "math"))
        self.assertIsNone(ct.ratio(entry, "cudnn"))
        entry["vkattn"] = {"tflops": None, "status": "skipped"}
        self.assertIsNone(ct.ratio(entry, "flash"))


# What the chart must hold for the fixtures: one panel per (preset, dims, causal, dtype, GQA group), and
# a line for vkattn and for each backend with a figure in it (flash and cuDNN refuse f32; flash dqk != dv).
EXPECTED_PANELS = {
    "prefill: d64, non-causal, f32": ["vkattn", "torch efficient", "torch math"],
    "prefill: d64, causal top-left, f32": ["vkattn", "torch efficient", "torch math"],
    "prefill: dqk 40 dv 24, non-causal, f32": ["vkattn", "torch efficient", "torch math"],
    "prefill: d64, non-causal, f16, GQA 2:1": ["vkattn", "torch flash", "torch efficient", "torch cudnn", "torch math"],
    "decode: d64, causal bottom-right, f16, GQA 4:1": ["vkattn", "torch flash", "torch efficient", "torch cudnn",
                                                       "torch math"],
    "decode: d128, non-causal, f32": ["vkattn", "torch efficient", "torch math"],
}


def png_ok(path):
    with open(path, "rb") as f:
        return f.read(8) == PNG_SIGNATURE and os.path.getsize(path) > 1000


class Chart(unittest.TestCase):
    def test_plot_panels_and_lines(self):
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "chart.png")
            summary = ct.plot(merged(), png)
            self.assertTrue(png_ok(png))
        self.assertEqual({p["title"]: p["lines"] for p in summary["panels"]}, EXPECTED_PANELS)
        self.assertEqual([p["preset"] for p in summary["panels"]], ["prefill"] * 4 + ["decode"] * 2)

    def test_repeated_seq_gets_one_line_per_batch(self):
        results = merged()
        entries = results["presets"]["decode"]
        entries.append(dict(copy.deepcopy(entries[-1]), batch=8))  # a second batch size at seq_k 1024
        with tempfile.TemporaryDirectory() as tmp:
            summary = ct.plot(results, os.path.join(tmp, "c.png"))
        lines = summary["panels"][-1]["lines"]
        self.assertIn("vkattn B2 H4 Sq1", lines)
        self.assertIn("vkattn B8 H4 Sq1", lines)

    def test_from_json_command(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "nvidia-h100-80gb-hbm3-synthetic-2026-11-22.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(merged(), f)
            # No torch needed: a torch whose import fails loudly is on the path.
            fake_package(os.path.join(tmp, "fake"), "torch", "raise RuntimeError('torch imported')\n")
            done = run_script("--from-json", path, env_path=os.path.join(tmp, "fake"))
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertTrue(png_ok(path[:-5] + ".png"))
            self.assertIn("prefill", done.stdout)
            self.assertIn("chart: " + path[:-5] + ".png (6 panels)", done.stdout)
            other = os.path.join(tmp, "other.png")
            done = run_script("--from-json", path, "--png", other)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertTrue(png_ok(other))
            done = run_script("--from-json", PREFILL)  # vkattn's JSON, not a results file
            self.assertEqual(done.returncode, 1)
            self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
            self.assertIn("not a compare_torch.py results file", done.stderr)


class Paths(unittest.TestCase):
    def test_device_slug(self):
        self.assertEqual(ct.device_slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3")
        self.assertEqual(ct.device_slug("NVIDIA H200"), "nvidia-h200")
        self.assertEqual(ct.device_slug("NVIDIA GeForce RTX 4090 (laptop) / x"), "nvidia-geforce-rtx-4090-laptop-x")
        self.assertEqual(ct.device_slug("llvmpipe (LLVM 15.0.6, 256 bits)"), "lavapipe")
        self.assertEqual(ct.device_slug("  "), "unknown-device")

    def test_output_paths(self):
        self.assertEqual(ct.output_paths("/r", "NVIDIA H100 80GB HBM3", "2026-11-22", exists=lambda p: False),
                         ("/r/nvidia-h100-80gb-hbm3-2026-11-22.json", "/r/nvidia-h100-80gb-hbm3-2026-11-22.png"))
        taken = {"/r/nvidia-h200-2026-11-22.json", "/r/nvidia-h200-2026-11-22-2.png"}
        self.assertEqual(ct.output_paths("/r", "NVIDIA H200", "2026-11-22", exists=taken.__contains__),
                         ("/r/nvidia-h200-2026-11-22-3.json", "/r/nvidia-h200-2026-11-22-3.png"))
        self.assertEqual(ct.RESULTS_DIR, os.path.join(HERE, "results"))
        self.assertEqual(ct.parse_args(["--dry-run"]).results_dir, os.path.join(HERE, "results"))


class Dependencies(unittest.TestCase):
    RUN = ["--vkattn-prefill-json", PREFILL, "--vkattn-decode-json", DECODE]

    def assert_one_line_failure(self, done, text):
        self.assertEqual(done.returncode, 1, done.stderr)
        lines = done.stderr.splitlines()
        self.assertEqual(len(lines), 1, done.stderr)
        self.assertTrue(lines[0].startswith("compare_torch.py: error: "), lines[0])
        self.assertIn(text, lines[0])

    def test_torch_missing(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_package(tmp, "torch", "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
            self.assert_one_line_failure(run_script(*self.RUN, env_path=tmp), "PyTorch is not installed")

    def test_torch_too_old(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_torch(tmp, "1.13.1")
            done = run_script(*self.RUN, env_path=tmp)
        self.assert_one_line_failure(done, "torch 1.13.1 is too old: torch.nn.functional.scaled_dot_product_attention "
                                           "needs torch >= 2.0")

    def test_torch_without_cuda(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_torch(tmp, "2.4.0+cpu", cuda_built=None)
            done = run_script(*self.RUN, env_path=tmp)
        self.assert_one_line_failure(done, "torch 2.4.0+cpu cannot use CUDA here (it is a CPU-only build")
        with tempfile.TemporaryDirectory() as tmp:
            fake_torch(tmp, "2.4.0", cuda_built="12.1")
            done = run_script(*self.RUN, env_path=tmp)
        self.assert_one_line_failure(done, "no CUDA device or driver is visible")

    def test_installed_torch(self):
        """Whatever torch this machine has (Debian bookworm's python3-torch is 1.13, without SDPA)."""
        done = run_script(*self.RUN)
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        if "PyTorch is not installed" in message:
            self.skipTest("no torch installed")
        old = re.search(r"torch (\S+) is too old", message)
        if old:
            self.assertLess(version_tuple(old.group(1)), (2, 0, 0))
            self.assert_one_line_failure(done, "needs torch >= 2.0")
        elif "cannot use CUDA here" in message:
            self.assert_one_line_failure(done, "torch.cuda.is_available() is False")
        else:
            self.skipTest("torch with CUDA: this is a GPU machine, run the script itself")

    def test_matplotlib_missing(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake_package(tmp, "matplotlib", "raise ImportError(\"No module named 'matplotlib'\")\n")
            path = os.path.join(tmp, "r.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(merged(), f)
            done = run_script("--from-json", path, env_path=tmp)
            self.assert_one_line_failure(done, "matplotlib is not installed")
            self.assertFalse(os.path.exists(os.path.join(tmp, "r.png")))
            done = run_script("--from-json", path, "--no-plot", env_path=tmp)  # the table needs no matplotlib
            self.assertEqual(done.returncode, 0, done.stderr)

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


class FreshRunWithFakeTorch(unittest.TestCase):
    """The whole fresh-run path against fake_cuda_torch: not torch's behaviour, the script's plumbing."""

    def run_fake(self, new_api, *extra, prefill=PREFILL, decode=DECODE):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        fake_cuda_torch(os.path.join(tmp, "fake"), new_api)
        out = os.path.join(tmp, "results")
        sides = (["--vkattn-prefill-json", prefill] if prefill else []) + ["--vkattn-decode-json", decode]
        done = run_script(*sides, "--results-dir", out, *extra, env_path=os.path.join(tmp, "fake"))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("warning: vkattn ran on llvmpipe", done.stderr)  # the recorded side is lavapipe's
        names = sorted(os.listdir(out))
        self.assertEqual(len(names), 2, names)
        self.assertRegex(names[0], r"^nvidia-h100-80gb-hbm3-fake-\d{4}-\d{2}-\d{2}\.json$")
        self.assertEqual(names[1], names[0][:-5] + ".png")
        self.assertTrue(png_ok(os.path.join(out, names[1])))
        with open(os.path.join(out, names[0]), encoding="utf-8") as f:
            return json.load(f), done.stdout

    def test_new_api(self):
        results, stdout = self.run_fake(True, "--iters", "5", "--warmup", "1")
        self.assertEqual((results["torch_version"], results["cuda"], results["cudnn"]), ("2.5.0+fake", "12.4", 90100))
        self.assertEqual(results["timing"]["iters"], 5)
        self.assertIn("recorded: " + PREFILL, results["commands"]["prefill"])
        for preset, entries in results["presets"].items():
            self.assertEqual(len(entries), 9 if preset == "prefill" else 5)
            for e in entries:
                for backend, member in (("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
                                        ("cudnn", "CUDNN_ATTENTION"), ("math", "MATH")):
                    t = e["torch"][backend]
                    if e["dtype"] == "f32" and backend in ("flash", "cudnn"):
                        self.assertEqual(t, {"unsupported": f"{member} requires fp16 or bf16; "
                                                            "RuntimeError: No available kernel. Aborting execution."})
                    else:
                        self.assertEqual((t["ms"], t["ms_min"], t["iters"]), (FAKE_MS[member], FAKE_MS[member], 5))
                        self.assertAlmostEqual(t["tflops"], ct.tflops(e, FAKE_MS[member]))
        self.assertIn("ratio = vkattn TFLOP/s / backend TFLOP/s", stdout)

    def test_torch_2_1(self):
        results, _ = self.run_fake(False)  # and the budgeted counts: 1 ms per call, 2 s budget
        self.assertEqual(results["timing"]["budget_s"], 2.0)
        for entries in results["presets"].values():
            for e in entries:
                self.assertEqual(e["torch"]["cudnn"],
                                 {"unsupported": "torch 2.1.2+fake: torch.backends.cuda.sdp_kernel has no enable_cudnn"})
                if e["heads"] != e["kv_heads"]:  # no enable_gqa before 2.5: every backend declines, saying why
                    for b in ("flash", "efficient", "math"):
                        self.assertIn("needs enable_gqa (torch >= 2.5)", e["torch"][b]["unsupported"])
                elif e["dtype"] == "f32":
                    self.assertIn("unsupported", e["torch"]["flash"])
                    self.assertEqual(e["torch"]["math"]["iters"], 50)
                    self.assertEqual(e["torch"]["math"]["ms"], FAKE_MS["MATH"])


    def test_bottom_right_chunk(self):
        # seq_q 16 against 64 keys, bottom-right: causal_lower_right where torch has it, refused where not.
        with open(DECODE, encoding="utf-8") as f:
            doc = json.load(f)
        doc["results"] = [dict(doc["results"][0], heads=4, kv_heads=4, seq_q=16, seq_k=64)]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "decode.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            new, _ = self.run_fake(True, "--presets", "decode", "--backends", "flash,math", "--iters", "2",
                                   "--warmup", "0", prefill=None, decode=path)
            old, _ = self.run_fake(False, "--presets", "decode", "--backends", "flash,math", "--iters", "2",
                                   "--warmup", "0", prefill=None, decode=path)
        entry = new["presets"]["decode"][0]
        self.assertEqual(entry["torch_call"], "attn_mask=causal_lower_right(seq_q, seq_k)")
        self.assertEqual([entry["torch"][b]["ms"] for b in ("flash", "math")], [FAKE_MS["FLASH_ATTENTION"], FAKE_MS["MATH"]])
        entry = old["presets"]["decode"][0]
        self.assertNotIn("torch_call", entry)
        for b in ("flash", "math"):
            self.assertIn("needs torch.nn.attention.bias.causal_lower_right", entry["torch"][b]["unsupported"])
        self.assertEqual(list(new["presets"]), ["decode"])


if __name__ == "__main__":
    unittest.main()
