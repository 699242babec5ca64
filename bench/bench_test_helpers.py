"""What the offline tests of the bench/ comparison scripts share: a fake `vkattn`, files, one-line errors.

Not a test itself (bench/test_compare_torch_cpu.py and bench/test_compare_ggml.py import it).
"""
import os


# A stand-in for `vkattn bench --json`: one row per call from the shape options (ms by dtype, so the two
# dtypes of a shape differ), or the recorded decode sweep. Appends "vkattn" to $FAKE_LOG; exits 3 with a
# message when $FAKE_VKATTN_FAIL is set.
FAKE_VKATTN = r'''
import json, os, sys
args = sys.argv[1:]
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
if os.environ.get("FAKE_LOG"):
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write("vkattn\n")
if os.environ.get("FAKE_VKATTN_FAIL"):
    print("vkattn: error: no Vulkan device", file=sys.stderr)
    sys.exit(3)
if opt("--sweep") == "decode":
    with open(os.environ["FAKE_DECODE"]) as f:
        sys.stdout.write(f.read())
    sys.exit(0)
dtype = opt("--dtype", "f32")
row = {"batch": int(opt("--batch")), "heads": int(opt("--heads")), "kv_heads": int(opt("--kv-heads")),
       "seq_q": int(opt("--seq-q")), "seq_k": int(opt("--seq-k")), "dim_qk": int(opt("--dim")),
       "dim_v": int(opt("--dim-v")), "dtype": dtype, "causal": opt("--causal"), "path": "fused",
       "kernel": "rowwise", "splits": 1, "ms_median": 2.0 if dtype == "f32" else 1.0, "ms_min": 0.5,
       "tflops": None, "status": "ok", "reason": None, "iters": int(opt("--iters"))}
print(json.dumps({"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "driver": "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)",
                  "version": "0.1.0", "sweep": None, "results": [row]}))
'''


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def one_line_error(test, done, code, text, prog, progress=("running ",)):
    """done (a finished subprocess) exited with code and printed one line "<prog>: error: ...text..." on
    stderr, besides progress lines (those starting with one of progress), and no traceback."""
    test.assertEqual(done.returncode, code, done.stderr)
    lines = [line for line in done.stderr.splitlines() if not line.startswith(tuple(progress))]
    test.assertEqual(len(lines), 1, done.stderr)
    test.assertTrue(lines[0].startswith(f"{prog}: error: "), lines[0])
    test.assertIn(text, lines[0])
    test.assertNotIn("Traceback", done.stderr)


def collapse(events):
    """['vkattn', 'vkattn', 'torch', ...] -> [('vkattn', 2), ('torch', n), ...]"""
    runs = []
    for e in events:
        if runs and runs[-1][0] == e:
            runs[-1] = (e, runs[-1][1] + 1)
        else:
            runs.append((e, 1))
    return runs
