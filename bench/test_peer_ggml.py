#!/usr/bin/env python3
"""Offline tests of bench/compare.py's ggml=PATH program (bench/peer_ggml.py): no ggml, numpy or GPU needed.

    /usr/bin/python3 bench/test_peer_ggml.py [--vkattn build/release/tools/vkattn] [unittest args]

The parser reads output of ggml's `test-backend-ops perf` captured on lavapipe (bench/testdata/ggml-*.txt,
see bench/testdata/README.md): the cases, us/run, runs, the device. The --test-file lines the adapter
writes are checked against bench/cases/ggml-issue12-shapes.txt and read back the way ggml prints them.
A fake test-backend-ops (printing a capture) and the fake vkattn of bench/bench_test_helpers.py stand
for the two programs in compare.py's rounds: the records, the refusals and ggml's failures as one line.
With --vkattn, a tiny case also runs through the real binary.
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_test_helpers as bh  # noqa: E402
import benchlib as bl  # noqa: E402
import compare  # noqa: E402
import peer_ggml as pgg  # noqa: E402

VKATTN = bh.take_vkattn_arg(sys.argv) if __name__ == "__main__" else None
RECORDED = os.path.join(bh.TESTDATA, "ggml-perf-lavapipe-default.txt")   # a perf-list run's first round
SMALL_BATCH = os.path.join(bh.TESTDATA, "ggml-perf-lavapipe-d64-nb4.txt")  # one case: d64, 4 queries, GQA 8
NO_DEVICE = os.path.join(bh.TESTDATA, "ggml-perf-lavapipe-no-device.txt")  # lavapipe without GGML_VK_VISIBLE_DEVICES
RECORDED_US = [174906664.0, 113577.84, 325823.13]  # us/run of RECORDED's three lines, read off the file

PARAMS_8K = ("hsk=128,hsv=128,nh=8,nr23=[4,1],kv=8192,nb=1,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,"
             "prec=f32,type_K=f16,type_V=f16,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0")
PARAMS_4K = PARAMS_8K.replace("kv=8192", "kv=4096")
PARAMS_16K = PARAMS_8K.replace("kv=8192", "kv=16384")
PARAMS_QWEN = PARAMS_8K.replace("hsk=128,hsv=128,nh=8,nr23=[4,1],kv=8192,nb=1,mask=1",
                                "hsk=72,hsv=72,nh=16,nr23=[1,1],kv=5776,nb=5776,mask=0")
PARAMS_D64 = PARAMS_8K.replace("hsk=128,hsv=128,nh=8,nr23=[4,1],kv=8192,nb=1", "hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=4")

# A stand-in for test-backend-ops: prints $FAKE_GGML_OUT (a capture) whatever the arguments, after
# appending "ggml" to $FAKE_LOG and its arguments to $FAKE_GGML_ARGS; exits $FAKE_GGML_EXIT (default 0).
FAKE_GGML = r'''
import os, sys
if os.environ.get("FAKE_LOG"):
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write("ggml\n")
if os.environ.get("FAKE_GGML_ARGS"):
    with open(os.environ["FAKE_GGML_ARGS"], "a") as f:
        f.write("\t".join(sys.argv[1:]) + "\n")
with open(os.environ["FAKE_GGML_OUT"], encoding="utf-8") as f:
    sys.stdout.write(f.read())
sys.exit(int(os.environ.get("FAKE_GGML_EXIT", "0")))
'''


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Parser(unittest.TestCase):
    def test_captured_default_run(self):
        out = pgg.parse_ggml_output(read(RECORDED))
        self.assertEqual(out["device"], "llvmpipe (LLVM 15.0.6, 256 bits)")
        self.assertEqual(len(out["vulkan_devices"]), 1)
        self.assertTrue(out["vulkan_devices"][0].startswith("llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe) |"))
        self.assertEqual([r["params"] for r in out["results"]], [PARAMS_QWEN, PARAMS_8K, PARAMS_16K])
        for r in out["results"]:
            self.assertEqual((r["op"], r["backend"], r["supported"]), ("FLASH_ATTN_EXT", "Vulkan0", True))
        # as printed: "1 runs - 174906664.00 us/run - 153.73 GFLOP/run - 878.94 MFLOPS" and so on
        self.assertEqual([r["runs"] for r in out["results"]], [1, 746, 373])
        self.assertEqual([r["us_per_run"] for r in out["results"]], RECORDED_US)
        self.assertEqual([r["printed_flops_per_s"] for r in out["results"]], [878.94e6, 1.18e9, 823.87e6])
        self.assertEqual([r["printed_flops_per_run"] for r in out["results"]], [153.73e9, 134.22e6, 268.44e6])

    def test_captured_small_batch_line_and_colours(self):
        text = read(SMALL_BATCH)
        self.assertIn("\x1b[1;34m", text)  # the capture keeps ggml's colours
        out = pgg.parse_ggml_output(text)
        self.assertEqual(len(out["results"]), 1)
        r = out["results"][0]
        self.assertEqual(r["params"], PARAMS_D64)
        self.assertEqual((r["runs"], r["us_per_run"]), (199, 605460.12))
        self.assertAlmostEqual(r["printed_flops_per_run"], 503.32e6)
        self.assertAlmostEqual(r["printed_flops_per_s"], 831.30e6)

    def test_not_supported_other_backends_and_memory_lines(self):
        text = "\n".join([
            "Backend 1/2: Vulkan0",
            "  Device description: Some GPU",
            f"  FLASH_ATTN_EXT({PARAMS_4K}): not supported",
            "  FLASH_ATTN_EXT(hsk=64,hsv=64,nh=1,nr23=[1,1],kv=64,nb=1,type_K=f16,type_V=f16):     "
            "  100 runs -  1.5e+03 us/run -   1024 kB/run -    0.65 GB/s",
            "  MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256):   10 runs - 5.00 us/run - 8.19 kFLOP/run - 1.64 GFLOPS",
            "Backend 2/2: CPU",
            "  Device description: Some CPU",
            f"  FLASH_ATTN_EXT({PARAMS_4K}):  3 runs - 100.00 us/run - 67.11 MFLOP/run - 671.09 GFLOPS"])
        out = pgg.parse_ggml_output(text)
        self.assertEqual(out["device"], "Some GPU")
        self.assertEqual([(r["op"], r["backend"], r["supported"]) for r in out["results"]],
                         [("FLASH_ATTN_EXT", "Vulkan0", False), ("FLASH_ATTN_EXT", "Vulkan0", True),
                          ("MUL_MAT", "Vulkan0", True), ("FLASH_ATTN_EXT", "CPU", True)])
        memory = out["results"][1]
        self.assertEqual((memory["us_per_run"], memory["printed_flops_per_s"]), (1500.0, None))

    def test_nothing_parseable(self):
        for text in ("", "garbage\nmore garbage (x): y\n", read(NO_DEVICE)):
            self.assertEqual(pgg.parse_ggml_output(text)["results"], [])

    def test_split_params(self):
        p = pgg.split_params(PARAMS_8K)
        self.assertEqual((p["nr23"], p["permute"], p["max_bias"], p["prec"]), ("[4,1]", "[0,1,2,3]", "0.000000", "f32"))
        with self.assertRaisesRegex(RuntimeError, "is not key=value"):
            pgg.split_params("hsk=64,oops")


# What test-backend-ops --test-file prints for a case of bench/cases/ggml-issue12-shapes.txt (test_generic_op)
GENERIC_32K = ("name=decode_h32_kv8_d128_sk32768_nomask,type=f32,ne=[128,32,1,1],op_params=[0:1035273459,3:10],"
               "sources=f32[128,1,32,1],f16[128,32768,8,1],f16[128,32768,8,1]")
GENERIC_D64 = ("name=prefill_h8_d64_s1024_nomask,type=f32,ne=[64,8,1024,1],op_params=[0:1040187392,3:10],"
               "sources=f32[64,1024,8,1],f16[64,1024,8,1],f16[64,1024,8,1]")
SHAPES_FILE = os.path.join(HERE, "cases", "ggml-issue12-shapes.txt")


class TestFileCases(unittest.TestCase):
    def test_generic_decode_case(self):
        case = pgg.case_of(GENERIC_32K)
        self.assertEqual(case["shape"], dict(batch=1, heads=32, kv_heads=8, seq_q=1, seq_k=32768, dim_qk=128, dim_v=128,
                                             causal="none", dtype="f16"))
        self.assertEqual(case["flops"], 2 * 32 * 32768 * 256)
        self.assertAlmostEqual(case["p"]["scale"], 128 ** -0.5, places=7)
        self.assertEqual((case["p"]["max_bias"], case["p"]["logit_softcap"], case["p"]["prec"]), (0.0, 0.0, "f32"))
        notes = " | ".join(case["notes"])
        self.assertIn("Q and O: f32 in ggml's test, f16 in vkattn", notes)
        self.assertNotIn("mask", notes)

    def test_generic_prefill_case_and_memory_line(self):
        line = (f"  FLASH_ATTN_EXT({GENERIC_D64}):                    47 runs - 1075000.50 us/run -    "
                "16384 kB/run - \x1b[1;34m   0.02 GB/s\x1b[0m")
        out = pgg.parse_ggml_output(line)
        self.assertEqual(len(out["results"]), 1)
        r = out["results"][0]
        self.assertEqual((r["runs"], r["us_per_run"], r["printed_flops_per_s"]), (47, 1075000.5, None))
        case = pgg.case_of(r["params"])
        self.assertEqual(case["shape"], dict(batch=1, heads=8, kv_heads=8, seq_q=1024, seq_k=1024, dim_qk=64, dim_v=64,
                                             causal="none", dtype="f16"))
        self.assertEqual(case["flops"], bl.attention_flops(case["shape"]))
        self.assertEqual(case["flops"], 2 * 8 * 1024 * 1024 * 128)

    def test_generic_modifiers_mask_and_types(self):
        softcap = GENERIC_32K.replace("op_params=[0:1035273459,3:10]", "op_params=[0:1035273459,2:1112014848,3:10]")
        self.assertEqual(pgg.case_of(softcap)["p"]["logit_softcap"], 50.0)   # 1112014848: 50.0f
        alibi = GENERIC_32K.replace("op_params=[0:1035273459,3:10]", "op_params=[0:1035273459,1:1090519040,3:10]")
        self.assertEqual(pgg.case_of(alibi)["p"]["max_bias"], 8.0)           # 1090519040: 8.0f
        masked = GENERIC_32K + ",f16[32768,1,1,1]"
        self.assertIn("ggml's case has a mask source", " | ".join(pgg.case_of(masked)["notes"]))
        quant = GENERIC_32K.replace("f16[128,32768,8,1],f16", "q8_0[128,32768,8,1],q8_0")
        self.assertIsNone(pgg.case_of(quant)["shape"])  # not a vkattn storage dtype
        strided = GENERIC_32K.replace("f16[128,32768,8,1],f16[128,32768,8,1]",
                                      "f16[128,32768,8,1]nb[2,512,16777216,134217728],f16[128,32768,8,1]")
        self.assertEqual(pgg.case_of(strided)["shape"]["seq_k"], 32768)

    def test_generic_cases_that_are_not_attention(self):
        with self.assertRaisesRegex(RuntimeError, "needs Q, K and V sources"):
            pgg.case_of("name=x,type=f32,ne=[128,32,1,1],op_params=[],sources=f32[128,1,32,1]")
        with self.assertRaisesRegex(RuntimeError, "are not one attention problem"):
            pgg.case_of(GENERIC_32K.replace("f16[128,32768,8,1],f16[128,32768,8,1]", "f16[128,32768,8,1],f16[128,100,8,1]"))
        with self.assertRaisesRegex(RuntimeError, "cannot read the sources"):
            pgg.case_of(GENERIC_32K.replace("sources=f32[", "sources=f32("))

    def test_committed_shapes_file_is_issue_12s(self):
        """bench/cases/ggml-issue12-shapes.txt, read the way make_test_cases_from_file reads it."""
        shapes = []
        with open(SHAPES_FILE) as f:
            for line in f:
                t = line.split()
                op, out_type, ne, n_params = int(t[0]), int(t[1]), [int(x) for x in t[2:6]], int(t[6])
                params = [int(x) for x in t[7:7 + n_params]]
                pos = 7 + n_params
                n_src = int(t[pos])
                pos += 1
                srcs = []
                for _ in range(n_src):
                    srcs.append((int(t[pos]), [int(x) for x in t[pos + 1:pos + 5]], [int(x) for x in t[pos + 5:pos + 9]]))
                    pos += 9
                self.assertEqual(pos, len(t) - 1, line)  # then the name
                self.assertEqual((op, out_type, n_src), (74, 0, 3))
                (tq, q, _), (tk, k, _), (tv, v, _) = srcs
                self.assertEqual((tq, tk, tv), (0, 1, 1))  # f32 Q, f16 K and V
                self.assertEqual(ne, [v[0], q[2], q[1], q[3]])  # O: [Dv, H, seq_q, B]
                self.assertAlmostEqual(pgg._int32_bits_as_float(params[0]), q[0] ** -0.5, places=7)
                self.assertEqual(params[1:], [0, 0, 10])
                shapes.append((q[2], k[2], q[1], k[1], q[0]))
        self.assertEqual(shapes, [(8, 8, 1024, 1024, 64), (8, 8, 1024, 1024, 128), (32, 8, 1, 8192, 128),
                                  (32, 8, 1, 32768, 128)])


    def test_lines_of_issue12_are_the_shapes_file(self):
        wanted = [line.split()[:-1] for line in read(SHAPES_FILE).splitlines() if line.strip() and not line.startswith("#")]
        cases = dict((name, args) for _, name, args in bl.load_cases(["issue12"]))
        made = [pgg.test_file_line(compare.dense_shape(cases[name], "ggml"), name).split()[:-1]
                for name in ("prefill-h8-s1024-d64-f16", "prefill-h8-s1024-d128-f16", "decode-h32-kv8-d128-k8192-f16",
                             "decode-h32-kv8-d128-k32768-f16")]
        self.assertEqual(made, wanted)
        f32 = pgg.test_file_line(compare.dense_shape(cases["prefill-h8-s1024-d64-f32"], "ggml"), "x").split()
        self.assertEqual((f32[21], f32[30]), ("0", "0"))  # K and V f32
        for bad, why in ((["--causal", "top-left"], "needs a mask"), (["--dtype", "q8_0"], "no ggml storage type"),
                         (["--heads", "6", "--kv-heads", "4"], "not a multiple")):
            with self.assertRaisesRegex(RuntimeError, why):
                pgg.test_file_line(compare.dense_shape(bad, "ggml"), "x")

    def test_line_read_back_as_ggml_prints_it(self):
        shape = compare.dense_shape("--batch 2 --heads 8 --kv-heads 2 --seq-q 3 --seq-k 40 --dim 32 --dim-v 16 "
                                    "--dtype bf16".split(), "ggml")
        t = pgg.test_file_line(shape, "n").split()
        sources = ",".join(f"{ {'0': 'f32', '30': 'bf16'}[t[i]]}[{','.join(t[i + 1:i + 5])}]" for i in (12, 21, 30))
        printed = f"name=n,type=f32,ne=[{','.join(t[2:6])}],op_params=[0:{t[7]},3:{t[10]}],sources={sources}"
        case = pgg.case_of(printed)
        self.assertEqual(case["shape"], shape)
        self.assertAlmostEqual(case["p"]["scale"], 32 ** -0.5, places=7)  # 1/sqrt(Dqk), not Dv
        self.assertEqual((case["p"]["prec"], case["p"]["mask"], case["notes"][0][:25]), ("f32", 0, "Q and O: f32 in ggml's te"))


class Fakes:
    """A temporary directory with the fake test-backend-ops (bin/test-backend-ops), the fake vkattn, a log."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.ggml = os.path.join(tmp, "bin", "test-backend-ops")
        bh.write(self.ggml, f"#!{sys.executable}\n" + FAKE_GGML, 0o755)
        self.vkattn = os.path.join(tmp, "bin", "vkattn")
        bh.write(self.vkattn, f"#!{sys.executable}\n" + bh.FAKE_VKATTN, 0o755)
        self.log = os.path.join(tmp, "log")
        self.args_log = os.path.join(tmp, "ggml-args")
        self.cases = os.path.join(tmp, "cases.txt")
        bh.write(self.cases, "decode-32k --batch 1 --heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 128 --dim-v 128 "
                             "--causal none --dtype f16\n")
        self.capture = os.path.join(tmp, "ggml.txt")
        self.out = os.path.join(tmp, "r.json")
        self.set_output(f"  FLASH_ATTN_EXT({GENERIC_32K}):  200 runs - 4000.00 us/run -  16384 kB/run - 4.00 GB/s\n")

    def set_output(self, lines):
        bh.write(self.capture, "Testing 2 devices\n\nBackend 1/2: Vulkan0\n  Device description: llvmpipe (fake)\n" + lines)

    def env(self, **extra):
        return dict(os.environ, FAKE_LOG=self.log, FAKE_GGML_OUT=self.capture, FAKE_GGML_ARGS=self.args_log, **extra)

    def events(self):
        return read(self.log).split() if os.path.exists(self.log) else []

    def ggml_args(self):
        return [line.split("\t") for line in read(self.args_log).splitlines()] if os.path.exists(self.args_log) else []

    def compare(self, *args, program=None, vkattn=None, **env):
        return bh.run_compare("--a", vkattn or self.vkattn, "--b", program or f"ggml={self.ggml}", *args, "--json",
                              self.out, self.cases, env=self.env(**env))


class CompareRuns(unittest.TestCase):
    def test_compare_runs_ggml_and_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = fakes.compare("--rounds", "2", "--iters", "3")
            self.assertEqual(done.returncode, 0, done.stderr)
            # rounds alternate (A B, B A); each vkattn call is its bench and its --version
            self.assertEqual(bh.collapse(fakes.events()), [("vkattn", 2), ("ggml", 2), ("vkattn", 2)])
            ggml_args = fakes.ggml_args()[0]
            doc = json.loads(read(fakes.out))
        self.assertEqual(ggml_args[:6], ["perf", "-o", "FLASH_ATTN_EXT", "-b", "Vulkan0", "--test-file"])
        flops = 2 * 32 * 1 * 32768 * 256
        # the fake vkattn prints no tflops: A shows "-"
        self.assertIn(f"| decode-32k | - [-] | {flops / 4e6:.2f} [{flops / 4e6:.2f}] | -x | -x | 1.000 / 4.000 | "
                      "ggml FLASH_ATTN_EXT |", done.stdout)
        ggml_run = doc["runs"][1]
        self.assertEqual((ggml_run["label"], ggml_run["program"], ggml_run["comparison"]), ("ggml", "ggml", "A vs ggml"))
        self.assertEqual(ggml_run["version"], "ggml test-backend-ops, FLASH_ATTN_EXT on Vulkan0 (Q and O f32)")
        row = ggml_run["cases"][0]["result"]
        self.assertEqual((row["ms_median"], row["iters"]), (4.0, 200))
        self.assertAlmostEqual(row["tflops"], flops / 4e-3 * 1e-12)
        self.assertTrue(row["ggml_case"].startswith("74 0 128 32 1 1 4 1035273459 0 0 10 3 "))
        self.assertIn("Q and O: f32 in ggml's test, f16 in vkattn (one storage dtype); K/V f16 on both", row["notes"])

    def test_label_backend_and_driver(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            fakes.set_output(read(fakes.capture).replace("Backend 1/2: Vulkan0", "Backend 1/2: Vulkan1"))
            done = fakes.compare("--rounds", "1", "--ggml-backend", "Vulkan1", "--driver", "/x/icd.json",
                                 program=f"ggml-d99724f={fakes.ggml}")
            self.assertEqual(done.returncode, 0, done.stderr)
            run = json.loads(read(fakes.out))["runs"][1]
            self.assertEqual(fakes.ggml_args()[0][4], "Vulkan1")
        self.assertEqual((run["label"], run["program"], run["vk_driver_files"]), ("ggml-d99724f", "ggml", "/x/icd.json"))

    def test_refuses_what_ggml_cannot_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            for line, text in (("c --heads 2 --seq-q 4 --causal top-left", "case c: ggml: causal top-left needs a mask"),
                               ("c --heads 2 --lengths 3,4", "ggml takes plain dense cases; not --lengths 3,4")):
                bh.write(fakes.cases, line + "\n")
                bh.one_line_error(self, fakes.compare(), text)
            done = bh.run_compare("--a", fakes.vkattn, "--b", f"ggml={fakes.ggml}", "ggml-issue12-shapes", env=fakes.env())
            bh.one_line_error(self, done, "holds ggml test-backend-ops --test-file lines, not vkattn cases")
            done = bh.run_compare("--a", fakes.vkattn, "--b", f"ggml={tmp}/none/test-backend-ops", "smoke", env=fakes.env())
            bh.one_line_error(self, done, "is not an executable file (ggml's test-backend-ops")
            self.assertEqual(fakes.events(), [])

    def test_ggml_failures_are_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            bh.write(fakes.capture, "Segmentation fault\n")
            done = fakes.compare(FAKE_GGML_EXIT="139")
            bh.one_line_error(self, done, "printed no FLASH_ATTN_EXT perf result for backend Vulkan0")
            self.assertIn("(exit 139)", done.stderr)
            self.assertIn("its last line: Segmentation fault", done.stderr)
            self.assertFalse(os.path.exists(fakes.out))
            fakes.capture = NO_DEVICE
            bh.one_line_error(self, fakes.compare(), "GGML_VK_VISIBLE_DEVICES")
            fakes.capture = os.path.join(tmp, "ggml.txt")
            fakes.set_output(f"  FLASH_ATTN_EXT({GENERIC_32K}): not supported\n")
            bh.one_line_error(self, fakes.compare(), "does not support case decode-32k")
            fakes.set_output(f"  FLASH_ATTN_EXT({GENERIC_D64}):  47 runs - 1075000.50 us/run - 16384 kB/run - 0.02 GB/s\n")
            bh.one_line_error(self, fakes.compare(), "ggml ran {'batch': 1, 'heads': 8")

    def test_dry_run_and_the_perf_list_shapes(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = bh.run_compare("--dry-run", "--a", fakes.vkattn, "--b", f"ggml={tmp}/none/test-backend-ops",
                                  "ggml-perf-list", env=fakes.env())
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(fakes.events(), [])
        self.assertIn("ggml (ggml)   (binary not found):", done.stdout)
        self.assertIn("ggml-prefill-h16-s5776-d72-f16: " + f"{tmp}/none/test-backend-ops perf -o FLASH_ATTN_EXT -b "
                      "Vulkan0 --test-file FILE, FILE: 74 0 72 16 5776 1 4 ", done.stdout)
        # the shapes of the perf list's PARAMS_8K, PARAMS_16K and PARAMS_QWEN, as vkattn cases
        shapes = [compare.dense_shape(args, "ggml") for _, _, args in bl.load_cases(["ggml-perf-list"])]
        self.assertEqual([(s["heads"], s["kv_heads"], s["seq_q"], s["seq_k"], s["dim_qk"], s["dtype"]) for s in shapes],
                         [(32, 8, 1, 8192, 128, "f16"), (32, 8, 1, 16384, 128, "f16"), (16, 16, 5776, 5776, 72, "f16")])

    @unittest.skipUnless(VKATTN, "--vkattn not given")
    def test_live_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            bh.write(fakes.cases, "tiny --heads 4 --kv-heads 2 --seq-q 1 --seq-k 64 --dim 16 --dtype f16\n")
            tiny = "name=tiny,type=f32,ne=[16,4,1,1],op_params=[0:1048576000,3:10],sources=f32[16,1,4,1],f16[16,64,2,1],f16[16,64,2,1]"
            fakes.set_output(f"  FLASH_ATTN_EXT({tiny}):  10 runs -  100.00 us/run -  1 kB/run -  0.01 GB/s\n")
            done = fakes.compare("--rounds", "1", "--warmup", "0", "--iters", "2", vkattn=VKATTN)
            self.assertEqual(done.returncode, 0, done.stderr)
            vk, ggml = json.loads(read(fakes.out))["runs"]
        row = vk["cases"][0]["result"]
        self.assertEqual((row["status"], row["iters"]), ("ok", 2))
        self.assertAlmostEqual(row["tflops"], bl.tflops(row, row["ms_median"]), delta=1e-6 * row["tflops"])
        self.assertAlmostEqual(ggml["cases"][0]["result"]["tflops"], 2 * 4 * 64 * 32 / 100e-6 * 1e-12)


if __name__ == "__main__":
    unittest.main()
