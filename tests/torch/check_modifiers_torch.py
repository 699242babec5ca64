#!/usr/bin/env python3
"""Checks vkattn's score modifiers against PyTorch, an implementation vkattn shares no code with.

    /usr/bin/python3 tests/torch/check_modifiers_torch.py [--vkattn build/release/tools/vkattn]

Debian's python3-torch (1.13) has no scaled_dot_product_attention, so the modifiers are written the
way model code writes them, in torch ops on float64: scores = scale * q @ k^T; softcap as
c * tanh(scores / c) (Gemma 2); ALiBi as a bias -slope * |i + off - j| added to the scores (BLOOM,
FlashAttention's alibi_slopes); causal, the sliding window (Mistral), key lengths and the boolean mask
with masked_fill(-inf); the float mask added; sinks the way gpt-oss's reference does it: the sink
logit appended as one more column of the scores, softmax over the row, the column dropped. Each case
runs through `vkattn run` (fused path; --weights cases also take the three-stage path) on .npy files
and is compared, O and LSE (and P), with the tolerances of docs/testing.md. Prints one line per case and exits
1 when any differs. Needs numpy and torch.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    sys.exit(f"check_modifiers_torch: error: {e.name} is required (Debian: apt install python3-numpy python3-torch)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERANCE = {"f32": 1e-5, "f16": 2e-3}  # docs/testing.md, "Precision and the tolerances the tests use": max |O - ref| / max |V|
LSE_TOLERANCE = 1e-4

CASES = [
    # name, shape (B, H, G, Sq, Sk, D), file dtype, options
    ("window+causal, GQA", (2, 4, 2, 37, 90, 64), "f32", dict(causal="bottom-right", window=(16, -1))),
    ("two-sided window, top-left, Sq > Sk", (1, 3, 3, 60, 41, 32), "f32", dict(window=(6, 4), align="top-left")),
    ("ALiBi (H), causal top-left", (2, 4, 4, 33, 33, 64), "f32", dict(causal="top-left", alibi="h")),
    ("softcap + ALiBi (B,H) + float mask", (2, 2, 1, 30, 47, 48), "f32", dict(softcap=5.0, alibi="bh", mask="f32")),
    ("sinks, fully masked rows", (1, 2, 2, 9, 4, 64), "f32", dict(causal="bottom-right", sinks=True, weights=True)),
    ("sinks + key lengths, GQA", (3, 4, 2, 17, 33, 40), "f32", dict(sinks=True, kv_lens=[0, 7, 33])),
    ("everything, f16", (2, 4, 2, 31, 57, 64), "f16",
     dict(causal="bottom-right", window=(16, -1), alibi="bh", softcap=5.0, sinks=True, mask="bool", kv_lens=[57, 20])),
    ("decode 8000 keys, window + sinks + ALiBi", (1, 8, 2, 1, 8000, 64), "f32", dict(window=(1000, 0), sinks=True,
                                                                                      alibi="h")),
]


def torch_attention(q, k, v, scale, causal="none", window=None, align=None, softcap=None, alibi=None, sinks=None,
                    mask=None, kv_lens=None):
    """O (B,H,Sq,Dv), LSE (B,H,Sq), P (B,H,Sq,Sk) in float64 torch ops."""
    B, H, Sq, _ = q.shape
    G, Sk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(H // G, dim=1)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    off = 0 if (causal if causal != "none" else align) == "top-left" else Sk - Sq
    i = torch.arange(Sq).view(Sq, 1)
    j = torch.arange(Sk).view(1, Sk)
    if alibi is not None:
        slopes = alibi.view(1, H, 1, 1) if alibi.dim() == 1 else alibi.view(B, H, 1, 1)
        s = s - slopes * (i + off - j).abs().to(s.dtype)
    if mask is not None and mask.dtype != torch.bool:
        s = s + mask
    hidden = torch.zeros(B, H, Sq, Sk, dtype=torch.bool)
    if causal != "none":
        hidden |= j > i + off
    if window is not None:
        left, right = window
        if left >= 0:
            hidden |= j < i + off - left
        if right >= 0:
            hidden |= j > i + off + right
    if kv_lens is not None:
        hidden |= j.view(1, 1, 1, Sk) >= torch.tensor(kv_lens).view(B, 1, 1, 1)
    if mask is not None and mask.dtype == torch.bool:
        hidden |= ~mask
    s = s.masked_fill(hidden, float("-inf"))
    if sinks is not None:
        logits = torch.cat([s, sinks.view(1, H, 1, 1).expand(B, H, Sq, 1)], dim=-1)
        p = torch.softmax(logits, dim=-1)[..., :Sk]
        lse = torch.logsumexp(logits, dim=-1)
    else:
        p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)  # a fully masked row: 0, not NaN
        lse = torch.logsumexp(s, dim=-1)
    return torch.matmul(p, v), lse, p


def run_case(vkattn, name, shape, file_dtype, opts, rng, directory):
    B, H, G, Sq, Sk, D = shape
    ftype = np.float16 if file_dtype == "f16" else np.float32
    q = rng.standard_normal((B, H, Sq, D)).astype(ftype)
    k = rng.standard_normal((B, G, Sk, D)).astype(ftype)
    v = rng.standard_normal((B, G, Sk, D)).astype(ftype)
    files = {"q": q, "k": k, "v": v}
    args = ["run", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "out.npy", "--lse", "lse.npy"]
    kw = {}
    if opts.get("causal"):
        args += ["--causal", opts["causal"]]
        kw["causal"] = opts["causal"]
    if opts.get("window"):
        args += ["--window", "%d:%d" % opts["window"]]
        kw["window"] = opts["window"]
    if opts.get("align"):
        args += ["--align", opts["align"]]
        kw["align"] = opts["align"]
    if opts.get("softcap"):
        args += ["--softcap", repr(opts["softcap"])]
        kw["softcap"] = opts["softcap"]
    if opts.get("alibi"):
        files["alibi"] = (rng.random((H,) if opts["alibi"] == "h" else (B, H)) * 0.5).astype(np.float32)
        args += ["--alibi", "alibi.npy"]
        kw["alibi"] = torch.from_numpy(files["alibi"].astype(np.float64))
    if opts.get("sinks"):
        files["sinks"] = (rng.random(H) * 4.0 - 1.0).astype(np.float32)
        args += ["--sinks", "sinks.npy"]
        kw["sinks"] = torch.from_numpy(files["sinks"].astype(np.float64))
    if opts.get("mask") == "f32":
        files["mask"] = (rng.standard_normal((Sq, Sk)) * 0.5).astype(np.float32)
        args += ["--mask", "mask.npy"]
        kw["mask"] = torch.from_numpy(files["mask"].astype(np.float64))
    elif opts.get("mask") == "bool":
        files["mask"] = rng.random((B, H, Sq, Sk)) < 0.8
        args += ["--mask", "mask.npy"]
        kw["mask"] = torch.from_numpy(files["mask"])
    if opts.get("kv_lens"):
        files["kv"] = np.asarray(opts["kv_lens"], np.int32)
        args += ["--kv-lens", "kv.npy"]
        kw["kv_lens"] = opts["kv_lens"]
    if opts.get("weights"):
        args += ["--weights", "p.npy"]
    for n, a in files.items():
        np.save(os.path.join(directory, n + ".npy"), a)
    proc = subprocess.run([vkattn] + args, cwd=directory, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return False, f"vkattn run failed: {proc.stderr.strip()}"
    t = [torch.from_numpy(x.astype(np.float64)) for x in (q, k, v)]
    o_ref, lse_ref, p_ref = torch_attention(*t, scale=float(np.float32(1.0 / np.sqrt(D))), **kw)
    o = np.load(os.path.join(directory, "out.npy")).astype(np.float64)
    lse = np.load(os.path.join(directory, "lse.npy")).astype(np.float64)
    o_err = float(np.max(np.abs(o - o_ref.numpy())) / np.max(np.abs(v.astype(np.float64))))
    lse_ref = lse_ref.numpy()
    # Equal infinities (rows with no visible key and no sink: -inf) agree; any other non-finite value differs.
    finite = np.isfinite(lse_ref) & np.isfinite(lse)
    if not np.array_equal(lse[~finite], lse_ref[~finite]):
        lse_err = float("inf")
    else:
        lse_err = float(np.max(np.abs(lse[finite] - lse_ref[finite]) / (1.0 + np.abs(lse_ref[finite])), initial=0.0))
    ok = o_err <= TOLERANCE[file_dtype] and lse_err <= LSE_TOLERANCE
    detail = f"O {o_err:.2e} (tol {TOLERANCE[file_dtype]:.0e})  LSE {lse_err:.2e}"
    if opts.get("weights"):
        p = np.load(os.path.join(directory, "p.npy")).astype(np.float64)
        p_err = float(np.max(np.abs(p - p_ref.numpy())))
        ok = ok and p_err <= TOLERANCE[file_dtype]
        detail += f"  P {p_err:.2e}"
    return ok, detail


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    built = os.path.join(REPO, "build", "release", "tools", "vkattn")
    parser.add_argument("--vkattn", default=built, help="the vkattn binary (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    if not os.path.exists(args.vkattn):
        sys.exit(f"check_modifiers_torch: error: {args.vkattn} does not exist (build it, or pass --vkattn)")
    print(f"torch {torch.__version__}, numpy {np.__version__}, vkattn {os.path.abspath(args.vkattn)}")
    rng = np.random.default_rng(args.seed)
    failures = 0
    with tempfile.TemporaryDirectory() as root:
        for n, (name, shape, dtype, opts) in enumerate(CASES):
            directory = os.path.join(root, str(n))
            os.makedirs(directory)
            ok, detail = run_case(os.path.abspath(args.vkattn), name, shape, dtype, opts, rng, directory)
            failures += not ok
            print(f"{'PASS' if ok else 'FAIL'}  {name:42s} B,H,G,Sq,Sk,D={shape} {dtype}  {detail}", flush=True)
    print(f"{len(CASES) - failures}/{len(CASES)} agree with torch")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
