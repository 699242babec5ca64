#!/usr/bin/env python3
"""Runs `vkattn mha` and torch.nn.MultiheadAttention on the same weights and inputs and compares.

PyTorch is not a dependency of vkattn; this script is how the layer's agreement with PyTorch is
checked by hand (Debian: apt-get install python3-torch). For each case it builds a layer with random
weights (biases too: torch initialises them to 0, which would hide a bias bug), exports its
state_dict with numpy.savez exactly as a user would, runs the CLI, and compares O and the attention
weights with torch's, computed in float64.

    /usr/bin/python3 tests/torch/compare_mha_torch.py --vkattn build/release/tools/vkattn

Differences by design (see include/vkattn/mha_reference.hpp): rows whose keys are all masked are
0 in vkattn and NaN in torch, so cases here never mask a whole row.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from optional_deps import MissingDependency, import_torch  # noqa: E402

torch = None  # imported by main(): without it, one line instead of a traceback

CASES = [
    # name, E, H, kdim, vdim, bias, B, Sq, Sk, self, causal, padding, attn_mask, weights(avg)
    dict(name="self E64 H4", E=64, H=4),
    dict(name="self E48 H3 no bias", E=48, H=3, bias=False),
    dict(name="cross kdim 20 vdim 12", E=32, H=4, kdim=20, vdim=12, Sq=9, Sk=23),
    dict(name="cross + key padding + weights per head", E=32, H=2, Sq=6, Sk=17, padding=True, weights="per-head"),
    dict(name="self + causal top-left + averaged weights", E=40, H=5, Sq=15, causal="top-left", weights="average"),
    dict(name="cross + causal bottom-right", E=32, H=4, Sq=5, Sk=12, causal="bottom-right"),
    dict(name="self + float attn_mask + padding", E=24, H=2, Sq=11, attn_mask=True, padding=True),
    dict(name="unfused path", E=32, H=4, Sq=7, Sk=9, path="unfused"),
    # f16 storage: the CLI rounds inputs, weights and intermediates to f16, torch stays in float64.
    dict(name="self, f16 storage", E=64, H=4, dtype="f16"),
]


def causal_mask(sq, sk, alignment):
    """Float mask (sq, sk): 0 where key j is visible to query i, -inf elsewhere."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    limit = i if alignment == "top-left" else i + sk - sq
    return np.where(j <= limit, 0.0, -np.inf)


def run_case(vkattn, case, rng, tmp):
    E, H = case["E"], case["H"]
    kdim, vdim = case.get("kdim", E), case.get("vdim", E)
    B, Sq = case.get("B", 2), case.get("Sq", 8)
    self_attention = "Sk" not in case and kdim == E and vdim == E
    Sk = Sq if self_attention else case["Sk"]
    bias = case.get("bias", True)
    torch.manual_seed(int(rng.integers(1 << 31)))
    m = torch.nn.MultiheadAttention(E, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True).double()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "bias" in name:
                p.uniform_(-0.5, 0.5)
    state = {k: v.detach().numpy().astype(np.float32) for k, v in m.state_dict().items()}
    np.savez(os.path.join(tmp, "w.npz"), **state)

    query = rng.uniform(-2, 2, (B, Sq, E)).astype(np.float32)
    key = query if self_attention else rng.uniform(-2, 2, (B, Sk, kdim)).astype(np.float32)
    value = query if self_attention else rng.uniform(-2, 2, (B, Sk, vdim)).astype(np.float32)
    np.save(os.path.join(tmp, "q.npy"), query)
    cmd = [vkattn, "mha", "--weights", os.path.join(tmp, "w.npz"), "--query", os.path.join(tmp, "q.npy"),
           "--heads", str(H), "--out", os.path.join(tmp, "o.npy")]
    if not self_attention:
        np.save(os.path.join(tmp, "k.npy"), key)
        np.save(os.path.join(tmp, "v.npy"), value)
        cmd += ["--key", os.path.join(tmp, "k.npy"), "--value", os.path.join(tmp, "v.npy")]

    float_mask = np.zeros((Sq, Sk))
    if case.get("causal"):
        cmd += ["--causal", case["causal"]]
        float_mask = float_mask + causal_mask(Sq, Sk, case["causal"])
    if case.get("attn_mask"):
        extra = rng.uniform(-1, 1, (Sq, Sk)).astype(np.float32)
        extra[:, 1:][rng.uniform(size=(Sq, Sk - 1)) < 0.3] = -np.inf  # key 0 stays: no row fully masked
        np.save(os.path.join(tmp, "am.npy"), extra)
        cmd += ["--attn-mask", os.path.join(tmp, "am.npy")]
        float_mask = float_mask + extra
    padding = None
    if case.get("padding"):
        padding = np.zeros((B, Sk), dtype=bool)
        padding[0, Sk // 2:] = True  # true = ignore (torch's convention)
        padding[-1, -1] = True
        np.save(os.path.join(tmp, "kpm.npy"), padding)
        cmd += ["--key-padding-mask", os.path.join(tmp, "kpm.npy")]
    weights = case.get("weights")
    if weights:
        cmd += ["--attn-weights", os.path.join(tmp, "p.npy")]
        if weights == "average":
            cmd += ["--average-weights"]
    if case.get("path"):
        cmd += ["--path", case["path"]]
    if case.get("dtype"):
        cmd += ["--dtype", case["dtype"]]
    tolerance = 1e-5 if case.get("dtype", "f32") == "f32" else 1e-2

    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return False, "vkattn failed: " + run.stderr.strip()
    got = np.load(os.path.join(tmp, "o.npy"))

    use_mask = case.get("causal") or case.get("attn_mask")
    with torch.no_grad():
        out, w = m(torch.from_numpy(query).double(), torch.from_numpy(key).double(), torch.from_numpy(value).double(),
                   key_padding_mask=None if padding is None else torch.from_numpy(padding),
                   need_weights=bool(weights), attn_mask=torch.from_numpy(float_mask) if use_mask else None,
                   average_attn_weights=weights == "average")
    expected = out.numpy()
    err = np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-30)
    text = f"max |O - torch| / max|O| = {err:.2e}"
    ok = err <= tolerance
    if weights:
        got_w = np.load(os.path.join(tmp, "p.npy"))
        w_err = np.max(np.abs(got_w - w.numpy()))
        text += f", max |P - torch| = {w_err:.2e} (shape {got_w.shape})"
        ok = ok and got_w.shape == tuple(w.shape) and w_err <= tolerance
    return ok, text


def main():
    global torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default="build/release/tools/vkattn")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    try:
        torch = import_torch()
    except MissingDependency as e:
        print(f"compare_mha_torch.py: error: {e}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    print(f"torch {torch.__version__}, numpy {np.__version__}, seed {args.seed}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            ok, text = run_case(args.vkattn, case, rng, tmp)
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {case['name']}: {text}")
    print(f"{len(CASES) - failed}/{len(CASES)} agree with torch.nn.MultiheadAttention")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
