#!/usr/bin/env python3
"""Offline tests of bench/compare_ggml.py: no ggml needed (nor numpy, nor a GPU).

    /usr/bin/python3 bench/test_compare_ggml.py [--vkattn build/release/tools/vkattn] [unittest args]

The parser reads output of ggml's `test-backend-ops perf` captured on lavapipe (bench/testdata/ggml-*.txt,
see bench/testdata/README.md): the cases, us/run, runs, the device; the shapes and FLOP counts derived
from them must agree with the GFLOP/s ggml printed. A fake test-backend-ops (printing one of those
captures) and the fake vkattn of bench/bench_test_helpers.py stand for the two programs: the rounds
must alternate, the table, the JSON, --from-json, --dry-run and the one-line errors are checked. With
--vkattn, a tiny case also runs through the real binary. bench/compare.py's ggml=PATH program is checked
too: the --test-file lines it writes (issue 12's are bench/cases/ggml-issue12-shapes.txt's) and a run on the fakes.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_test_helpers as bh  # noqa: E402
import compare_torch as ct  # noqa: E402
import compare_ggml as cg  # noqa: E402

SCRIPT = os.path.join(HERE, "compare_ggml.py")
TESTDATA = os.path.join(HERE, "testdata")
RECORDED = os.path.join(TESTDATA, "ggml-perf-lavapipe-default.txt")   # the recorded run's first round
SMALL_BATCH = os.path.join(TESTDATA, "ggml-perf-lavapipe-d64-nb4.txt")  # one case: d64, 4 queries, GQA 8
NO_DEVICE = os.path.join(TESTDATA, "ggml-perf-lavapipe-no-device.txt")  # lavapipe without GGML_VK_VISIBLE_DEVICES
VKATTN = None  # --vkattn: the built binary, for the live check (taken off argv before unittest sees it)
if __name__ == "__main__" and "--vkattn" in sys.argv[:-1]:
    _i = sys.argv.index("--vkattn")
    VKATTN = sys.argv[_i + 1]
    del sys.argv[_i:_i + 2]

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


class Fakes:
    """A temporary directory with the fake test-backend-ops (bin/test-backend-ops), the fake vkattn and a log."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.ggml = os.path.join(tmp, "bin", "test-backend-ops")
        bh.write(self.ggml, f"#!{sys.executable}\n" + FAKE_GGML, 0o755)
        self.vkattn = os.path.join(tmp, "bin", "vkattn")
        bh.write(self.vkattn, f"#!{sys.executable}\n" + bh.FAKE_VKATTN, 0o755)
        self.log = os.path.join(tmp, "log")
        self.args_log = os.path.join(tmp, "ggml-args")

    def env(self, out=RECORDED, **extra):
        env = dict(os.environ, FAKE_LOG=self.log, FAKE_GGML_OUT=out, FAKE_GGML_ARGS=self.args_log)
        env.update(extra)
        return env

    def events(self):
        return read(self.log).split() if os.path.exists(self.log) else []

    def ggml_args(self):
        return [line.split("\t") for line in read(self.args_log).splitlines()] if os.path.exists(self.args_log) else []


def run_script(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=300)


def one_line_error(test, done, code, text):
    bh.one_line_error(test, done, code, text, "compare_ggml.py", ("running ", "round "))


class Parser(unittest.TestCase):
    def test_captured_default_run(self):
        out = cg.parse_ggml_output(read(RECORDED))
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
        out = cg.parse_ggml_output(text)
        self.assertEqual(len(out["results"]), 1)
        r = out["results"][0]
        self.assertEqual(r["params"], PARAMS_D64)
        self.assertEqual((r["runs"], r["us_per_run"]), (199, 605460.12))
        self.assertAlmostEqual(r["printed_flops_per_run"], 503.32e6)
        self.assertAlmostEqual(r["printed_flops_per_s"], 831.30e6)

    def test_flop_count_is_ggmls_and_vkattns(self):
        for path in (RECORDED, SMALL_BATCH):
            for r in cg.parse_ggml_output(read(path))["results"]:
                case = cg.case_of(r["params"])
                self.assertEqual(case["flops"], ct.attention_flops(case["shape"]), r["params"])
                self.assertTrue(cg.printed_rate_agrees(r, case["flops"]), r)
                self.assertTrue(cg.printed_rate_agrees(dict(r, printed_flops_per_s=None), case["flops"]) is None)
                # a count off by the factor 2 that FLOP conventions differ by is caught
                self.assertFalse(cg.printed_rate_agrees(r, case["flops"] // 2), r)
        r = cg.parse_ggml_output(read(SMALL_BATCH))["results"][0]
        self.assertEqual(cg.case_of(r["params"])["flops"], 2 * 64 * 4 * (64 + 64) * 7680)
        self.assertAlmostEqual(cg.ggml_gflops(503316480, r["us_per_run"]), 0.831295, places=5)

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
        out = cg.parse_ggml_output(text)
        self.assertEqual(out["device"], "Some GPU")
        self.assertEqual([(r["op"], r["backend"], r["supported"]) for r in out["results"]],
                         [("FLASH_ATTN_EXT", "Vulkan0", False), ("FLASH_ATTN_EXT", "Vulkan0", True),
                          ("MUL_MAT", "Vulkan0", True), ("FLASH_ATTN_EXT", "CPU", True)])
        memory = out["results"][1]
        self.assertEqual((memory["us_per_run"], memory["printed_flops_per_s"]), (1500.0, None))

    def test_nothing_parseable(self):
        for text in ("", "garbage\nmore garbage (x): y\n", read(NO_DEVICE)):
            self.assertEqual(cg.parse_ggml_output(text)["results"], [])

    def test_params(self):
        p = cg.parse_params(PARAMS_8K)
        self.assertEqual((p["nr23"], p["permute"], p["max_bias"], p["prec"], p["mask"]), ([4, 1], [0, 1, 2, 3], 0.0, "f32", 1))
        with self.assertRaisesRegex(ct.Failure, "is not key=value"):
            cg.parse_params("hsk=64,oops")


class Cases(unittest.TestCase):
    def test_decode_case_maps_to_issue_12s_shape(self):
        case = cg.case_of(PARAMS_8K)
        self.assertEqual(case["shape"], dict(batch=1, heads=32, kv_heads=8, seq_q=1, seq_k=8192, dim_qk=128, dim_v=128,
                                             causal="none", dtype="f16"))
        self.assertIsNone(case["skip"])
        self.assertEqual(case["flops"], 2 * 32 * 8192 * 256)
        notes = " | ".join(case["notes"])
        for text in ("Q and O: f32 in ggml's test, f16 in vkattn", "ggml adds an f16 mask", "0 block(s)",
                     "views of a cache twice as long"):
            self.assertIn(text, notes)
        self.assertNotIn("fa_mask_opt", notes)  # seq_q 1

    def test_batched_gqa_prefill_and_mask_blocks(self):
        case = cg.case_of("hsk=64,hsv=64,nh=8,nr23=[8,2],kv=7680,nb=512,mask=1,sinks=0,max_bias=0.000000,"
                          "logit_softcap=0.000000,prec=f32,type_K=bf16,type_V=bf16,permute=[0,2,1,3],kv_view=0,"
                          "v_is_view_of_k=0")
        self.assertEqual(case["shape"], dict(batch=2, heads=64, kv_heads=8, seq_q=512, seq_k=7680, dim_qk=64, dim_v=64,
                                             causal="none", dtype="bf16"))
        self.assertEqual(case["flops"], ct.attention_flops(case["shape"]))
        notes = " | ".join(case["notes"])
        self.assertIn(f"{int(0.2 * 7680 * 512 * 2 / 8192)} block(s)", notes)
        self.assertIn("fa_mask_opt", notes)
        self.assertIn("permuted ([0, 2, 1, 3])", notes)
        self.assertNotIn("twice as long", notes)

    def test_cases_vkattn_cannot_run(self):
        for change, why in ((("type_K=f16,type_V=f16", "type_K=q8_0,type_V=q8_0"), "vkattn stores K and V in one of"),
                            (("type_K=f16,type_V=f16", "type_K=f16,type_V=f32"), "vkattn stores K and V in one of"),
                            (("logit_softcap=0.000000", "logit_softcap=10.000000"), "logit softcap"),
                            (("max_bias=0.000000", "max_bias=8.000000"), "ALiBi"),
                            (("sinks=0", "sinks=1"), "sinks"),
                            (("hsk=128,hsv=128", "hsk=576,hsv=512"), "head dim over 256")):
            case = cg.case_of(PARAMS_8K.replace(*change))
            self.assertIn(why, case["skip"] or "", change)

    def test_unknown_parameters_fail_in_one_line(self):
        with self.assertRaisesRegex(ct.Failure, "lacks hsv, nh"):
            cg.case_of("hsk=64,nr23=[1,1],kv=64,nb=1,type_K=f16,type_V=f16")
        with self.assertRaisesRegex(ct.Failure, "nr23=4 is not"):
            cg.case_of(PARAMS_8K.replace("nr23=[4,1]", "nr23=4"))
        with self.assertRaisesRegex(ct.Failure, "kv=0 is not a positive integer"):
            cg.case_of(PARAMS_8K.replace("kv=8192", "kv=0"))


# What test-backend-ops --test-file prints for a case of bench/cases/ggml-issue12-shapes.txt (test_generic_op)
GENERIC_32K = ("name=decode_h32_kv8_d128_sk32768_nomask,type=f32,ne=[128,32,1,1],op_params=[0:1035273459,3:10],"
               "sources=f32[128,1,32,1],f16[128,32768,8,1],f16[128,32768,8,1]")
GENERIC_D64 = ("name=prefill_h8_d64_s1024_nomask,type=f32,ne=[64,8,1024,1],op_params=[0:1040187392,3:10],"
               "sources=f32[64,1024,8,1],f16[64,1024,8,1],f16[64,1024,8,1]")
SHAPES_FILE = os.path.join(HERE, "cases", "ggml-issue12-shapes.txt")


class TestFileCases(unittest.TestCase):
    def test_generic_decode_case(self):
        case = cg.case_of(GENERIC_32K)
        self.assertEqual(case["shape"], dict(batch=1, heads=32, kv_heads=8, seq_q=1, seq_k=32768, dim_qk=128, dim_v=128,
                                             causal="none", dtype="f16"))
        self.assertIsNone(case["skip"])
        self.assertEqual(case["flops"], 2 * 32 * 32768 * 256)
        self.assertAlmostEqual(case["p"]["scale"], 128 ** -0.5, places=7)
        self.assertEqual((case["p"]["max_bias"], case["p"]["logit_softcap"], case["p"]["prec"]), (0.0, 0.0, "f32"))
        notes = " | ".join(case["notes"])
        self.assertIn("Q and O: f32 in ggml's test, f16 in vkattn", notes)
        self.assertNotIn("mask", notes)

    def test_generic_prefill_case_and_memory_line(self):
        line = (f"  FLASH_ATTN_EXT({GENERIC_D64}):                    47 runs - 1075000.50 us/run -    "
                "16384 kB/run - \x1b[1;34m   0.02 GB/s\x1b[0m")
        out = cg.parse_ggml_output(line)
        self.assertEqual(len(out["results"]), 1)
        r = out["results"][0]
        self.assertEqual((r["runs"], r["us_per_run"], r["printed_flops_per_s"]), (47, 1075000.5, None))
        case = cg.case_of(r["params"])
        self.assertEqual(case["shape"], dict(batch=1, heads=8, kv_heads=8, seq_q=1024, seq_k=1024, dim_qk=64, dim_v=64,
                                             causal="none", dtype="f16"))
        self.assertEqual(case["flops"], ct.attention_flops(case["shape"]))
        self.assertAlmostEqual(cg.ggml_gflops(case["flops"], r["us_per_run"]), 2 * 8 * 1024 * 1024 * 128 / 1075000.5e3)

    def test_generic_modifiers_mask_and_types(self):
        softcap = GENERIC_32K.replace("op_params=[0:1035273459,3:10]", "op_params=[0:1035273459,2:1112014848,3:10]")
        self.assertIn("logit softcap", cg.case_of(softcap)["skip"])   # 1112014848: 50.0f
        alibi = GENERIC_32K.replace("op_params=[0:1035273459,3:10]", "op_params=[0:1035273459,1:1090519040,3:10]")
        self.assertIn("ALiBi", cg.case_of(alibi)["skip"])             # 1090519040: 8.0f
        masked = GENERIC_32K + ",f16[32768,1,1,1]"
        self.assertIn("ggml's case has a mask source", " | ".join(cg.case_of(masked)["notes"]))
        quant = GENERIC_32K.replace("f16[128,32768,8,1],f16", "q8_0[128,32768,8,1],q8_0")
        self.assertIn("vkattn stores K and V in one of", cg.case_of(quant)["skip"])
        strided = GENERIC_32K.replace("f16[128,32768,8,1],f16[128,32768,8,1]",
                                      "f16[128,32768,8,1]nb[2,512,16777216,134217728],f16[128,32768,8,1]")
        self.assertEqual(cg.case_of(strided)["shape"]["seq_k"], 32768)

    def test_generic_cases_that_are_not_attention(self):
        with self.assertRaisesRegex(ct.Failure, "needs Q, K and V sources"):
            cg.case_of("name=x,type=f32,ne=[128,32,1,1],op_params=[],sources=f32[128,1,32,1]")
        with self.assertRaisesRegex(ct.Failure, "are not one attention problem"):
            cg.case_of(GENERIC_32K.replace("f16[128,32768,8,1],f16[128,32768,8,1]", "f16[128,32768,8,1],f16[128,100,8,1]"))
        with self.assertRaisesRegex(ct.Failure, "cannot read the sources"):
            cg.case_of(GENERIC_32K.replace("sources=f32[", "sources=f32("))

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
                self.assertAlmostEqual(cg._int32_bits_as_float(params[0]), q[0] ** -0.5, places=7)
                self.assertEqual(params[1:], [0, 0, 10])
                shapes.append((q[2], k[2], q[1], k[1], q[0]))
        self.assertEqual(shapes, [(8, 8, 1024, 1024, 64), (8, 8, 1024, 1024, 128), (32, 8, 1, 8192, 128),
                                  (32, 8, 1, 32768, 128)])


class Arguments(unittest.TestCase):
    def test_bad_values_are_one_line_and_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            for args, text in (([], "--ggml PATH (ggml's test-backend-ops) is required"),
                               (["--ggml", os.path.join(tmp, "nothing")], "--ggml"),
                               (["--ggml", fakes.ggml, "--vkattn", os.path.join(tmp, "nothing")], "--vkattn"),
                               (["--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--rounds", "0"], "0 is not positive"),
                               (["--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--params", "(["], "not a regex"),
                               (["--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--json", tmp], "a directory"),
                               (["--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--test-file",
                                 os.path.join(tmp, "nothing.txt")], "--test-file"),
                               (["--from-json", os.path.join(tmp, "nothing.json")], "no such file")):
                done = run_script(*args)
                one_line_error(self, done, 2, text)
            done = run_script("--ggml", os.path.join(tmp, "nothing"), "--vkattn", fakes.vkattn)
            one_line_error(self, done, 2, "no such executable")

    def test_dry_run_runs_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = run_script("--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--dry-run", env=fakes.env())
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(fakes.events(), [])
            self.assertIn(f"{fakes.ggml} perf -o FLASH_ATTN_EXT -b Vulkan0 -p {cg.DEFAULT_PARAMS}", done.stdout)
            self.assertIn("--warmup 10 --iters 50 --budget 10", done.stdout)

    def test_dry_run_with_a_test_file_passes_no_regex(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = run_script("--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--dry-run", "--test-file", SHAPES_FILE,
                              env=fakes.env())
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn(f"{fakes.ggml} perf -o FLASH_ATTN_EXT -b Vulkan0 --test-file {SHAPES_FILE}\n", done.stdout)
            done = run_script("--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--dry-run", "--test-file", SHAPES_FILE,
                              "--params", "d64", env=fakes.env())
            self.assertIn(f"--test-file {SHAPES_FILE} -p d64\n", done.stdout)

    def test_default_regex_selects_the_recorded_cases(self):
        import re  # noqa: PLC0415
        wanted = re.compile(cg.DEFAULT_PARAMS)
        for case in (PARAMS_QWEN, PARAMS_8K, PARAMS_16K):
            self.assertTrue(wanted.search(case), case)
        for other in (PARAMS_4K, PARAMS_8K.replace("nr23=[4,1]", "nr23=[1,1]"), PARAMS_8K.replace("hsk=128,hsv=128", "hsk=64,hsv=64"),
                      PARAMS_8K.replace("type_K=f16,type_V=f16", "type_K=q8_0,type_V=q8_0"), PARAMS_D64,
                      PARAMS_QWEN.replace("type_K=f16,type_V=f16", "type_K=q4_0,type_V=q4_0")):
            self.assertFalse(wanted.search(other), other)


class Rounds(unittest.TestCase):
    def run_fake(self, tmp, fakes, *extra, **env):
        out = os.path.join(tmp, "r.json")
        done = run_script("--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--rounds", "2", "--json", out,
                          "--ggml-commit", "abc123", *extra, env=fakes.env(**env))
        return done, out

    def test_alternating_rounds_json_and_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done, out = self.run_fake(tmp, fakes, "--params", "kv=(8192|16384)", "--iters", "3")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(bh.collapse(fakes.events()), [("ggml", 1), ("vkattn", 3)] * 2)
            self.assertEqual(fakes.ggml_args(), [["perf", "-o", "FLASH_ATTN_EXT", "-b", "Vulkan0", "-p", "kv=(8192|16384)"]] * 2)
            doc = json.loads(read(out))
            self.assertEqual((doc["tool"], doc["rounds"], doc["ggml"]["commit"]), ("compare_ggml", 2, "abc123"))
            self.assertEqual(doc["ggml"]["device"], "llvmpipe (LLVM 15.0.6, 256 bits)")
            self.assertEqual(doc["ggml"]["raw_output"], [read(RECORDED)] * 2)
            self.assertEqual(doc["vkattn"]["device"], "llvmpipe (LLVM 15.0.6, 256 bits)")
            self.assertEqual(len(doc["entries"]), 3)
            for e, us, flops in zip(doc["entries"], RECORDED_US, (153732907008, 134217728, 268435456)):
                s = e["shape"]
                self.assertEqual(flops, 2 * s["heads"] * s["seq_q"] * s["seq_k"] * (s["dim_qk"] + s["dim_v"]))
                self.assertEqual(e["flops"], flops)
                self.assertAlmostEqual(e["ggml"]["gflops_median"], flops / (us * 1e3))
                self.assertAlmostEqual(e["vkattn"]["gflops_median"], flops / 1e6)  # the fake's f16 rows: 1.0 ms
                self.assertAlmostEqual(e["ratio_median"], us * 1e-3)            # ggml ms / vkattn ms
                self.assertEqual([r["iters"] for r in e["vkattn"]["rounds"]], [3, 3])
                self.assertTrue(all(r["printed_rate_agrees"] for r in e["ggml"]["rounds"]))
            table = done.stdout
            self.assertIn("ggml abc123 test-backend-ops -b Vulkan0 on llvmpipe (LLVM 15.0.6, 256 bits)", table)
            self.assertIn(" 1   1  16  16  5776   5776   72   72     f16   no |    0.879   0.879 |", table)
            self.assertIn(" 2   1  32   8     1   8192  128  128     f16  yes |     1.18    1.18 |", table)
            self.assertIn(f"  1: FLASH_ATTN_EXT({PARAMS_QWEN})", table)
            self.assertIn(f"  3: FLASH_ATTN_EXT({PARAMS_16K})", table)
            self.assertIn("[2,3] ggml adds an f16 mask", table)
            self.assertIn("[1,2,3] Q and O: f32 in ggml's test, f16 in vkattn", table)
            self.assertIn(f"results: {out}", table)
            again = run_script("--from-json", out)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertEqual(again.stdout, table.replace(f"results: {out}\n", ""))

    def test_cases_not_run_by_vkattn_are_listed(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            capture = os.path.join(tmp, "capture.txt")
            text = read(SMALL_BATCH).replace("type_K=f16,type_V=f16", "type_K=q8_0,type_V=q8_0")
            # a case the backend refuses, in Vulkan0's section (the CPU section after it is skipped)
            text = text.replace("  Backend Vulkan0:", f"  FLASH_ATTN_EXT({PARAMS_8K}): not supported\n  Backend Vulkan0:")
            bh.write(capture, text)
            done, out = self.run_fake(tmp, fakes, FAKE_GGML_OUT=capture)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(fakes.events(), ["ggml", "ggml"])  # nothing for vkattn to run
            doc = json.loads(read(out))
            quant, unsupported = doc["entries"]
            self.assertEqual(quant["vkattn"]["status"], "not run")
            self.assertIn("q8_0", quant["vkattn"]["reason"])
            self.assertIsNone(quant["ratio_median"])
            self.assertEqual(unsupported["ggml"]["status"], "unsupported")
            self.assertIn("unsupp.", done.stdout)
            self.assertIn("vkattn not run: K q8_0 / V q8_0", done.stdout)

    def test_ggml_printing_nothing_parseable_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            garbage = os.path.join(tmp, "garbage.txt")
            bh.write(garbage, "Segmentation fault\n")
            done, out = self.run_fake(tmp, fakes, FAKE_GGML_OUT=garbage, FAKE_GGML_EXIT="139")
            one_line_error(self, done, 1, "printed no FLASH_ATTN_EXT perf result")
            self.assertIn("(exit 139)", done.stderr)
            self.assertIn("its last line: Segmentation fault", done.stderr)
            self.assertEqual(fakes.events(), ["ggml"])
            self.assertFalse(os.path.exists(out))
            done, _ = self.run_fake(tmp, fakes, FAKE_GGML_OUT=NO_DEVICE)
            one_line_error(self, done, 1, "GGML_VK_VISIBLE_DEVICES")

    def test_vkattn_failing_is_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done, out = self.run_fake(tmp, fakes, FAKE_VKATTN_FAIL="1")
            self.assertEqual(done.returncode, 1)
            self.assertIn("vkattn: error: no Vulkan device", done.stderr)
            self.assertIn("exited with 3", done.stderr.splitlines()[-1])
            self.assertTrue(done.stderr.splitlines()[-1].startswith("compare_ggml.py: error: "))
            self.assertNotIn("Traceback", done.stderr)
            self.assertFalse(os.path.exists(out))

    def test_ggml_changing_its_cases_between_rounds_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            calls = []

            def ggml_round():
                calls.append(1)
                path = RECORDED if len(calls) == 1 else SMALL_BATCH
                parsed = cg.parse_ggml_output(read(path))
                parsed["exit_code"] = 0
                return parsed, ""

            args = cg.parse_args(["--ggml", fakes.ggml, "--vkattn", fakes.vkattn, "--rounds", "2"])
            fake_vk = lambda cmd, preset, source: ct.load_vkattn(  # noqa: E731
                subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=fakes.env()).stdout, preset, source)
            with self.assertRaisesRegex(ct.Failure, "round 2: test-backend-ops ran other cases than in round 1"):
                cg.run_rounds(args, lambda text: None, ggml_round, fake_vk)

    @unittest.skipUnless(VKATTN, "--vkattn not given")
    def test_live_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            tiny = PARAMS_4K.replace("nh=8,nr23=[4,1],kv=4096", "nh=2,nr23=[2,1],kv=64").replace("hsk=128,hsv=128",
                                                                                               "hsk=16,hsv=16")
            capture = os.path.join(tmp, "tiny.txt")
            bh.write(capture, f"Backend 1/1: Vulkan0\n  FLASH_ATTN_EXT({tiny}):  10 runs -  100.00 us/run -  "
                              "16.38 kFLOP/run -  163.84 MFLOPS\n")
            out = os.path.join(tmp, "r.json")
            done = run_script("--ggml", fakes.ggml, "--vkattn", VKATTN, "--rounds", "1", "--warmup", "0", "--iters", "2",
                              "--json", out, env=fakes.env(out=capture))
            self.assertEqual(done.returncode, 0, done.stderr)
            e = json.loads(read(out))["entries"][0]
            self.assertEqual(e["shape"], dict(batch=1, heads=4, kv_heads=2, seq_q=1, seq_k=64, dim_qk=16, dim_v=16,
                                              causal="none", dtype="f16"))
            self.assertEqual(e["flops"], 2 * 4 * 64 * 32)
            self.assertEqual(e["ggml"]["rounds"][0]["printed_rate_agrees"], True)
            self.assertEqual(e["vkattn"]["status"], "ok")
            live = e["vkattn"]["rounds"][0]
            self.assertAlmostEqual(live["tflops"] * 1e3, live["gflops"], delta=1e-6 * live["gflops"])


class CompareProgram(unittest.TestCase):
    """bench/compare.py's ggml program: each case as a generated --test-file line (compare_ggml.test_file_line)."""

    COMPARE = os.path.join(HERE, "compare.py")

    def test_lines_of_issue12_are_the_shapes_file(self):
        import compare  # noqa: PLC0415
        wanted = [line.split()[:-1] for line in read(SHAPES_FILE).splitlines() if line.strip() and not line.startswith("#")]
        cases = dict((name, args) for _, name, args in compare.bl.load_cases(["issue12"]))
        made = [cg.test_file_line(compare.dense_shape(cases[name], "ggml"), name).split()[:-1]
                for name in ("prefill-h8-s1024-d64-f16", "prefill-h8-s1024-d128-f16", "decode-h32-kv8-d128-k8192-f16",
                             "decode-h32-kv8-d128-k32768-f16")]
        self.assertEqual(made, wanted)
        f32 = cg.test_file_line(compare.dense_shape(cases["prefill-h8-s1024-d64-f32"], "ggml"), "x").split()
        self.assertEqual((f32[21], f32[30]), ("0", "0"))  # K and V f32
        for bad in (["--causal", "top-left"], ["--dtype", "q8_0"], ["--heads", "6", "--kv-heads", "4"]):
            with self.assertRaises(ct.Failure):
                cg.test_file_line(compare.dense_shape(bad, "ggml"), "x")

    def test_compare_runs_ggml_and_vkattn(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            cases = os.path.join(tmp, "cases.txt")
            args = "--batch 1 --heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 128 --dim-v 128 --causal none"
            bh.write(cases, f"decode-32k {args} --dtype f16\n")
            capture = os.path.join(tmp, "ggml.txt")
            bh.write(capture, "Testing 2 devices\n\nBackend 1/2: Vulkan0\n  Device description: llvmpipe (fake)\n"
                              f"  FLASH_ATTN_EXT({GENERIC_32K}):  200 runs - 4000.00 us/run -  16384 kB/run - 4.00 GB/s\n")
            out = os.path.join(tmp, "r.json")
            done = subprocess.run([sys.executable, self.COMPARE, "--a", fakes.vkattn, "--b", f"ggml={fakes.ggml}",
                                   "--rounds", "2", "--iters", "3", "--json", out, cases],
                                  capture_output=True, text=True, env=fakes.env(out=capture), timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            # rounds alternate (A B, B A); each vkattn call is its --version and its bench
            self.assertEqual(bh.collapse(fakes.events()), [("vkattn", 2), ("ggml", 2), ("vkattn", 2)])
            ggml_args = fakes.ggml_args()[0]
            self.assertEqual(ggml_args[:6], ["perf", "-o", "FLASH_ATTN_EXT", "-b", "Vulkan0", "--test-file"])
            flops = 2 * 32 * 1 * 32768 * 256
            # the fake vkattn prints no tflops: A shows "-"
            self.assertIn(f"| decode-32k | - [-] | {flops / 4e6:.2f} [{flops / 4e6:.2f}] | -x | -x | 1.000 / 4.000 | "
                          "ggml FLASH_ATTN_EXT |", done.stdout)
            doc = json.loads(read(out))
            ggml_run = doc["runs"][1]
            self.assertEqual((ggml_run["label"], ggml_run["program"], ggml_run["comparison"]), ("ggml", "ggml", "A vs ggml"))
            row = ggml_run["cases"][0]["result"]
            self.assertEqual((row["ms_median"], row["iters"]), (4.0, 200))
            self.assertTrue(row["ggml_case"].startswith("74 0 128 32 1 1 4 1035273459 0 0 10 3 "))

    def test_compare_refuses_what_ggml_cannot_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            fakes = Fakes(tmp)
            done = subprocess.run([sys.executable, self.COMPARE, "--a", fakes.vkattn, "--b", f"ggml={fakes.ggml}",
                                   "--case", "decode-h32-kv8-d128-k8192-f16", "--case", "x", "serving"],
                                  capture_output=True, text=True, env=fakes.env(), timeout=300)
            self.assertEqual(done.returncode, 1)
            self.assertTrue(done.stderr.startswith("compare.py: "), done.stderr)
            self.assertEqual(fakes.events(), [])
            done = subprocess.run([sys.executable, self.COMPARE, "--a", fakes.vkattn, "--b", f"ggml={fakes.ggml}",
                                   "ggml-issue12-shapes"], capture_output=True, text=True, env=fakes.env(), timeout=300)
            self.assertEqual(done.returncode, 1)
            self.assertIn("not vkattn cases", done.stderr)
            self.assertEqual(fakes.events(), [])


RECORDED_US = [174906664.0, 113577.84, 325823.13]  # us/run of RECORDED's three lines, read off the file


if __name__ == "__main__":
    unittest.main()
