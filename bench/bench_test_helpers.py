"""What the offline tests of bench/compare.py's peers share: a fake `vkattn`, running compare.py, --vkattn.

Not a test itself (bench/test_peer_torch_gpu.py, bench/test_peer_torch_cpu.py and bench/test_peer_ggml.py
import it).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "compare.py")
TESTDATA = os.path.join(HERE, "testdata")


# A stand-in for `vkattn bench --json` (and `vkattn --version`): one row per call from the shape options
# (ms by dtype, so the two dtypes of a shape differ; no tflops); with --backward the row says
# "backward": true, unless $FAKE_VKATTN_FORWARD_ONLY is set (a vkattn that would not time it). Appends
# "vkattn" to $FAKE_LOG; exits 3 with a message when $FAKE_VKATTN_FAIL is set. The test case files give
# every shape option.
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
if args == ["--version"]:
    print("vkattn 0.0.0-fake")
    sys.exit(0)
dtype = opt("--dtype", "f32")
row = {"batch": int(opt("--batch")), "heads": int(opt("--heads")), "kv_heads": int(opt("--kv-heads")),
       "seq_q": int(opt("--seq-q")), "seq_k": int(opt("--seq-k")), "dim_qk": int(opt("--dim")),
       "dim_v": int(opt("--dim-v")), "dtype": dtype, "causal": opt("--causal", "none"), "path": "fused",
       "kernel": "rowwise", "splits": 1, "ms_median": 2.0 if dtype == "f32" else 1.0, "ms_min": 0.5,
       "tflops": None, "status": "ok", "reason": None, "iters": int(opt("--iters", "10"))}
if "--backward" in args and not os.environ.get("FAKE_VKATTN_FORWARD_ONLY"):
    row["backward"] = True
print(json.dumps({"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "driver": "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)",
                  "version": "0.1.0", "sweep": None, "results": [row]}))
'''


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def take_vkattn_arg(argv):
    """The --vkattn PATH of a test's command line (the built binary, for the live checks), taken off argv
    before unittest sees it; None when not given."""
    if "--vkattn" not in argv[:-1]:
        return None
    i = argv.index("--vkattn")
    path = argv[i + 1]
    del argv[i:i + 2]
    return path


def run_compare(*args, env=None, timeout=300):
    """bench/compare.py with these arguments, finished; PYTHONPATH dropped unless env sets it."""
    if env is None:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, COMPARE, *args], capture_output=True, text=True, env=env, timeout=timeout)


def one_line_error(test, done, text):
    """compare.py (a finished subprocess) exited with 1 and its last stderr line is "compare.py: ...text...",
    after round progress lines only, and no traceback."""
    test.assertEqual(done.returncode, 1, done.stderr)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("round ")]
    test.assertEqual(len(lines), 1, done.stderr)
    test.assertTrue(lines[0].startswith("compare.py: "), lines[0])
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
