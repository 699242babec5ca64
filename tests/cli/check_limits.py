#!/usr/bin/env python3
"""`vkattn run` beyond the device's limits, against the independent numpy fp64 reference.

Two problems issue 4 names, each past a limit of lavapipe (docs/devices.md):
  - K and V of 600,000 x 64 f32 (154 MB each): one KV head is larger than one storage-buffer binding
    (128 MiB), so the library binds it by key range over several dispatches;
  - 70,000 heads: more (batch, head) workgroups than maxComputeWorkGroupCount (65535) allows in one
    dispatch, so the grid is split.
Both paths run on the second; the first on the fused path (the three-stage path refuses it, naming
the fused path, which is checked too).

    /usr/bin/python3 tests/cli/check_limits.py --vkattn build/release/tools/vkattn
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdpa_reference import attention  # noqa: E402


def run(vkattn, tmp, q, k, v, causal, path):
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(os.path.join(tmp, name + ".npy"), x)
    out, lse = os.path.join(tmp, "o.npy"), os.path.join(tmp, "lse.npy")
    cmd = [vkattn, "run", "--q", os.path.join(tmp, "q.npy"), "--k", os.path.join(tmp, "k.npy"),
           "--v", os.path.join(tmp, "v.npy"), "--causal", causal, "--path", path, "--out", out, "--lse", lse]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, None, done.stderr.strip()
    return np.load(out), np.load(lse), ""


def check(name, vkattn, tmp, q, k, v, causal, path):
    got, got_lse, err = run(vkattn, tmp, q, k, v, causal, path)
    if got is None:
        print(f"FAIL {name} ({path}): {err}")
        return False
    ref, ref_lse = attention(q, k, v, causal=causal)
    o_err = np.max(np.abs(got - ref)) / np.max(np.abs(v))
    lse_err = np.max(np.abs(got_lse - ref_lse) / np.maximum(1.0, np.abs(ref_lse)))
    ok = o_err <= 1e-5 and lse_err <= 1e-4
    print(f"{'ok  ' if ok else 'FAIL'} {name} ({path}): max|O err|/max|V| {o_err:.2e}, LSE rel err {lse_err:.2e}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default="build/release/tools/vkattn")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        q = rng.standard_normal((1, 2, 3, 64)).astype(np.float32)
        k = rng.standard_normal((1, 1, 600000, 64)).astype(np.float32)
        v = rng.standard_normal((1, 1, 600000, 64)).astype(np.float32)
        ok &= check("K, V 600000 x 64 f32 (154 MB each)", args.vkattn, tmp, q, k, v, "bottom-right", "fused")
        _, _, err = run(args.vkattn, tmp, q, k, v, "bottom-right", "unfused")
        refused = "use the fused path" in err
        print(f"{'ok  ' if refused else 'FAIL'} the same on the unfused path is refused: {err or '<no error>'}")
        ok &= refused
        del k, v
        q = rng.standard_normal((1, 70000, 3, 16)).astype(np.float32)
        k = rng.standard_normal((1, 70000, 5, 16)).astype(np.float32)
        v = rng.standard_normal((1, 70000, 5, 16)).astype(np.float32)
        for path in ("fused", "unfused"):
            ok &= check("70000 heads", args.vkattn, tmp, q, k, v, "bottom-right", path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
