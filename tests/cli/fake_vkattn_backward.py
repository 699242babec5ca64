"""A stand-in for `vkattn run --grad-out ...` for check_backward.py --self-test: it reads the same
files and options, computes the outputs with the NumPy references (sdpa_reference.py,
sdpa_backward.py) and writes them as vkattn would (the inputs' dtype, f32 for bf16; dsinks f32).
FAKE_BACKWARD_BREAK names one thing to get wrong, so that the self-test can see check_backward fail:
  dk       dK 0.5% too large
  dq_row   a fully masked row's dQ not 0 (the first such row; else the first row) by 1e-3
  dsinks   dsinks' sign flipped
  dv_gqa   dV of the first query head of each group only (no GQA sum)
  dtype    dQ written as float64
  nan      one NaN in dV
Usage: python3 fake_vkattn_backward.py run --q q.npy ... (only what check_backward's cases pass)."""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_reference  # noqa: E402
from sdpa_backward import live_scores, sdpa_backward, varlen_backward  # noqa: E402


def main(argv):
    assert argv[0] == "run"
    opts = dict(zip(argv[1::2], argv[2::2]))
    load = lambda key: np.load(opts[key]) if key in opts else None  # noqa: E731
    q, k, v, dout = load("--q"), load("--k"), load("--v"), load("--grad-out")
    dtype = opts.get("--dtype") or ("f16" if q.dtype == np.float16 else "f32")
    out_type = np.float16 if q.dtype == np.float16 and dtype != "bf16" else np.float32
    seen = [sdpa_reference.round_to(x, dtype) for x in (q, k, v, dout)]
    window = tuple(int(x) for x in opts["--window"].split(":")) if "--window" in opts else None
    kw = dict(causal=opts.get("--causal", "none"), window=window, align=opts.get("--align"),
              softcap=float(opts["--softcap"]) if "--softcap" in opts else None, alibi=load("--alibi"),
              sinks=load("--sinks"), scale=float(opts["--scale"]) if "--scale" in opts else None)
    broken = os.environ.get("FAKE_BACKWARD_BREAK", "")
    if "--cu-seqlens-q" in opts:
        r = varlen_backward(*seen, load("--cu-seqlens-q"), load("--cu-seqlens-k"), **kw)
        dead_rows = np.zeros(q.shape[0], bool)
    else:
        kv = load("--kv-lens")
        dense = dict(kw, mask=load("--mask"), kv_lengths=None if kv is None else [int(x) for x in kv])
        r = sdpa_backward(*seen, **dense)
        live = live_scores(seen[0], seen[1], **{n: dense[n] for n in ("causal", "mask", "kv_lengths", "window",
                                                                       "align")})
        dead_rows = ~live.any(axis=-1)
        if broken == "dv_gqa":
            group = q.shape[1] // k.shape[1]
            p = sdpa_reference.attention(*seen[:3], weights=True, **dense)[2]
            r["dv"] = np.einsum("bhij,bhid->bhjd", p, seen[3].astype(np.float64))[:, ::group]
    if broken == "dk":
        r["dk"] = r["dk"] * 1.005
    if broken == "dq_row":
        where = np.argwhere(dead_rows)
        index = tuple(where[0]) if len(where) else (0,) * (dead_rows.ndim)
        r["dq"][index] += 1e-3
    if broken == "dsinks" and r["dsinks"] is not None:
        r["dsinks"] = -r["dsinks"]
    if broken == "nan":
        r["dv"].flat[0] = np.nan
    np.save(opts["--out"], r["out"].astype(out_type))
    if "--lse" in opts:
        np.save(opts["--lse"], r["lse"].astype(np.float32))
    for name in ("dq", "dk", "dv"):
        np.save(opts["--" + name], r[name].astype(np.float64 if broken == "dtype" and name == "dq" else out_type))
    if "--dsinks" in opts:
        np.save(opts["--dsinks"], r["dsinks"].astype(np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
