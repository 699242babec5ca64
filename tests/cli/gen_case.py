#!/usr/bin/env python3
"""Writes the .npy inputs of one attention case, and its fp64 reference (sdpa_reference.py).

    python3 tests/cli/gen_case.py --list
    python3 tests/cli/gen_case.py --case causal_bottom_right_sq_gt_sk --out-dir /tmp/case
        -> q.npy k.npy v.npy [mask.npy] [kv_lens.npy] ref_out.npy ref_lse.npy ref_p.npy, and the
           `vkattn run` arguments on stdout

check_run.py runs the cases through `vkattn run` and compares. A case is a plain dataclass so new
ones are one line in CASES.
"""
import argparse
import dataclasses
import os
import sys
import zlib

try:
    import numpy as np
except ImportError:  # keep the message to one line, like the C++ tool
    sys.exit("gen_case: error: numpy is required (Debian: apt install python3-numpy; run with /usr/bin/python3)")

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_reference  # noqa: E402


@dataclasses.dataclass
class Case:
    name: str
    batch: int = 2
    heads: int = 3
    kv_heads: int = None  # None: = heads
    seq_q: int = 33
    seq_k: int = None  # None: = seq_q
    dim: int = 32
    dim_v: int = None  # None: = dim
    file_dtype: str = "f4"  # Q/K/V files: 'f4' ('<f4') or 'f2' ('<f2')
    dtype: str = None  # --dtype passed to vkattn run (None: computed in the files' dtype)
    causal: str = "none"
    scale: float = None
    mask: str = None  # None | 'bool' | 'f32' | 'f16'
    mask_shape: str = "2d"  # '2d' (Sq,Sk) | 'b1' (B,1,Sq,Sk) | '1h' (1,H,Sq,Sk) | 'bh' (B,H,Sq,Sk)
    masked_rows: int = 0  # leading query rows the mask hides completely (-> O = 0, LSE = -inf)
    kv_lengths: list = None
    poison: bool = False  # NaN and Inf in K and V at keys >= kv_lengths[b]: must not leak
    nan_visible: bool = False  # NaN in one query row and one visible value: must propagate, only there
    lse: bool = True
    weights: bool = False  # also --weights p.npy, checked against the reference's softmax weights
    heatmap: bool = False  # also --heatmap heads.png (checked to be a PNG)
    path: str = None  # --path passed to vkattn run (None: the default, auto)
    # Score modifiers: --window L:R, --align, --softcap, --alibi slopes ('h': (H,), 'bh': (B,H)), --sinks
    window: tuple = None
    align: str = None
    softcap: float = None
    alibi: str = None
    sinks: bool = False

    def __post_init__(self):
        self.kv_heads = self.kv_heads or self.heads
        self.seq_k = self.seq_k or self.seq_q
        self.dim_v = self.dim_v or self.dim

    @property
    def compute_dtype(self):
        return self.dtype or ("f16" if self.file_dtype == "f2" else "f32")


# Everything the contract (docs/semantics.md) promises, on sizes small enough for lavapipe, plus the long-KV decode case.
CASES = [
    Case("basic_f32", batch=2, heads=3, seq_q=65, dim=64),
    Case("basic_f32_unfused", batch=2, heads=3, seq_q=65, dim=64, path="unfused"),
    Case("weights_basic", batch=2, heads=3, seq_q=65, seq_k=70, dim=64, weights=True, heatmap=True),
    Case("causal_top_left_sq_lt_sk", seq_q=37, seq_k=113, causal="top-left"),
    Case("causal_bottom_right_sq_lt_sk", seq_q=37, seq_k=113, causal="bottom-right"),
    Case("causal_top_left_sq_gt_sk", seq_q=113, seq_k=37, causal="top-left"),
    Case("causal_bottom_right_sq_gt_sk", seq_q=113, seq_k=37, causal="bottom-right",
         weights=True),  # rows < 76 fully masked
    Case("bool_mask_2d", seq_q=47, seq_k=71, mask="bool"),
    Case("bool_mask_fully_masked_rows", seq_q=40, seq_k=50, mask="bool", mask_shape="b1", masked_rows=5),
    Case("float_mask_f32_bh_inf_rows", seq_q=40, seq_k=50, mask="f32", mask_shape="bh", masked_rows=3, weights=True),
    Case("float_mask_f16_1h", heads=4, seq_q=31, seq_k=64, mask="f16", mask_shape="1h", causal="bottom-right"),
    Case("kv_lengths_with_zero", batch=3, seq_q=20, seq_k=45, kv_lengths=[0, 17, 45]),
    Case("kv_lengths_poisoned", batch=3, seq_q=20, seq_k=45, kv_lengths=[9, 0, 30], poison=True, causal="top-left",
         weights=True),
    Case("gqa_8_over_2", batch=2, heads=8, kv_heads=2, seq_q=50, seq_k=77, dim=40),
    Case("mqa_6_over_1", batch=1, heads=6, kv_heads=1, seq_q=17, seq_k=130, causal="bottom-right"),
    Case("dim_1", seq_q=29, seq_k=41, dim=1),
    Case("dim_203", batch=1, heads=2, seq_q=35, seq_k=70, dim=203),
    Case("dim_256", batch=1, heads=2, seq_q=35, seq_k=70, dim=256, causal="top-left"),
    Case("dim_qk_72_dim_v_40", seq_q=30, seq_k=50, dim=72, dim_v=40),
    Case("negative_scale", seq_q=30, seq_k=30, scale=-0.3),
    Case("nan_propagates", seq_q=40, seq_k=40, causal="top-left", nan_visible=True),
    # NaN in a float32 file converted to f16 is data, not overflow: accepted, and it propagates.
    Case("nan_propagates_f16_from_f32", seq_q=40, seq_k=40, causal="top-left", nan_visible=True, dtype="f16"),
    Case("everything_at_once", batch=3, heads=4, kv_heads=2, seq_q=27, seq_k=61, dim=21, causal="top-left",
         mask="bool", mask_shape="bh", masked_rows=2, kv_lengths=[61, 0, 13], poison=True, scale=0.2,
         weights=True, heatmap=True),
    Case("f16_files", heads=4, seq_q=63, seq_k=130, dim=64, file_dtype="f2", causal="bottom-right"),
    Case("f16_files_mask_gqa", heads=4, kv_heads=2, seq_q=33, seq_k=40, file_dtype="f2", mask="f16", masked_rows=2,
         weights=True),
    Case("f16_from_f32", seq_q=40, seq_k=90, dim=48, dtype="f16"),
    Case("bf16_from_f32", seq_q=40, seq_k=90, dim=48, dtype="bf16", causal="top-left", weights=True),
    Case("bf16_dim_256_gqa", batch=1, heads=4, kv_heads=1, seq_q=20, seq_k=64, dim=256, dtype="bf16"),
    Case("decode_seq_k_20000", batch=1, heads=4, seq_q=1, seq_k=20000, dim=64),
    Case("decode_seq_k_20000_causal_kv", batch=2, heads=2, seq_q=1, seq_k=20000, dim=64, causal="bottom-right",
         kv_lengths=[20000, 15001]),
    Case("decode_seq_k_20000_f16", batch=1, heads=2, seq_q=1, seq_k=20000, dim=128, file_dtype="f2"),
    # Score modifiers
    Case("window_two_sided_gqa", heads=4, kv_heads=2, seq_q=37, seq_k=53, window=(7, 3)),
    Case("window_causal_kv_poisoned", batch=3, seq_q=20, seq_k=70, window=(16, -1), causal="bottom-right",
         kv_lengths=[70, 0, 33], poison=True),
    Case("window_top_left_sq_gt_sk", seq_q=53, seq_k=37, window=(5, 5), align="top-left", weights=True),
    Case("window_unfused", seq_q=40, seq_k=64, window=(-1, 4), mask="bool", path="unfused"),
    Case("alibi_heads_causal", heads=4, seq_q=33, seq_k=50, alibi="h", causal="top-left"),
    Case("alibi_batch_heads_softcap_mask", seq_q=30, seq_k=17, alibi="bh", softcap=20.0, mask="f32", align="top-left",
         weights=True),
    Case("softcap_f16", heads=4, seq_q=41, seq_k=41, file_dtype="f2", softcap=5.0, causal="bottom-right"),
    Case("sinks_fully_masked_rows", seq_q=9, seq_k=4, causal="bottom-right", sinks=True, weights=True),
    Case("sinks_kv_lengths_gqa", batch=3, heads=4, kv_heads=2, seq_q=17, seq_k=33, kv_lengths=[0, 7, 33], sinks=True),
    Case("modifiers_all_at_once", batch=2, heads=4, kv_heads=2, seq_q=31, seq_k=57, dim=40, window=(16, -1),
         causal="bottom-right", alibi="bh", softcap=5.0, sinks=True, mask="bool", mask_shape="bh",
         kv_lengths=[57, 20], poison=True, dtype="bf16"),
    Case("decode_seq_k_20000_window_sinks", batch=1, heads=4, kv_heads=2, seq_q=1, seq_k=20000, dim=64,
         window=(1000, 0), sinks=True, alibi="h"),
]


def find_case(name):
    for case in CASES:
        if case.name == name:
            return case
    raise SystemExit(f"gen_case: error: no case named {name!r} (see --list)")


def mask_dims(case):
    return {
        "2d": (case.seq_q, case.seq_k),
        "b1": (case.batch, 1, case.seq_q, case.seq_k),
        "1h": (1, case.heads, case.seq_q, case.seq_k),
        "bh": (case.batch, case.heads, case.seq_q, case.seq_k),
    }[case.mask_shape]


def make_mask(case, rng):
    shape = mask_dims(case)
    if case.mask == "bool":
        mask = rng.random(shape) < 0.8
        mask[..., : case.masked_rows, :] = False
        return mask
    mask = (0.5 * rng.standard_normal(shape)).astype(np.float32)
    mask[rng.random(shape) < 0.1] = -np.inf
    mask[..., : case.masked_rows, :] = -np.inf
    return mask.astype(np.float16 if case.mask == "f16" else np.float32)


def add_modifiers(case, rng, batch, heads, files, args):
    """The score modifiers of a case: --window, --align and --softcap added to `args`, then the ALiBi
    slopes ((heads) or (batch, heads)) and the sinks drawn from `rng` in this order into `files`, with
    their options. Returns (alibi, sinks), None where the case has none. Shared by every generator of
    `vkattn run` cases (dense here, paged and packed in run_serving_cases.py)."""
    if case.window is not None:
        args += ["--window", f"{case.window[0]}:{case.window[1]}"]
    if case.align:
        args += ["--align", case.align]
    if case.softcap is not None:
        args += ["--softcap", repr(case.softcap)]
    alibi = sinks = None
    if case.alibi:
        alibi = (rng.random((heads,) if case.alibi == "h" else (batch, heads)) * 0.5).astype(np.float32)
        files["alibi"] = alibi
        args += ["--alibi", "alibi.npy"]
    if case.sinks:
        sinks = (rng.random(heads) * 4.0 - 1.0).astype(np.float32)
        files["sinks"] = sinks
        args += ["--sinks", "sinks.npy"]
    return alibi, sinks


def generate(case, seed=0):
    """Returns (files {name: array}, `vkattn run` args [str], reference (out, lse, weights P), V as the
    GPU sees it)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + seed)
    file_type = np.float16 if case.file_dtype == "f2" else np.float32
    q = rng.standard_normal((case.batch, case.heads, case.seq_q, case.dim)).astype(file_type)
    k = rng.standard_normal((case.batch, case.kv_heads, case.seq_k, case.dim)).astype(file_type)
    v = rng.standard_normal((case.batch, case.kv_heads, case.seq_k, case.dim_v)).astype(file_type)
    if case.poison:
        for b, length in enumerate(case.kv_lengths):
            k[b, :, length::2] = np.nan
            k[b, :, length + 1::2] = np.inf
            v[b, :, length::3] = np.nan
            v[b, :, length + 1::3] = -np.inf
    if case.nan_visible:
        q[0, 0, 1, 0] = np.nan  # row 1 of head 0: O and LSE NaN
        v[0, 0, 5, 0] = np.nan  # key 5, column 0: NaN in column 0 of the rows that see key 5
    files = {"q": q, "k": k, "v": v}
    args = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "out.npy"]
    mask = None
    if case.mask:
        mask = make_mask(case, rng)
        files["mask"] = mask
        args += ["--mask", "mask.npy"]
    if case.kv_lengths is not None:
        files["kv_lens"] = np.asarray(case.kv_lengths, dtype=np.int32 if case.batch % 2 else np.int64)
        args += ["--kv-lens", "kv_lens.npy"]
    if case.causal != "none":
        args += ["--causal", case.causal]
    if case.scale is not None:
        args += ["--scale", repr(case.scale)]
    if case.dtype:
        args += ["--dtype", case.dtype]
    if case.lse:
        args += ["--lse", "lse.npy"]
    if case.weights:
        args += ["--weights", "p.npy"]
    if case.heatmap:
        args += ["--heatmap", "heads.png"]
    if case.path:
        args += ["--path", case.path]
    alibi, sinks = add_modifiers(case, rng, case.batch, case.heads, files, args)

    dtype = case.compute_dtype
    seen = [sdpa_reference.round_to(x, dtype) for x in (q, k, v)]
    out, lse, p = sdpa_reference.attention(*seen, causal=case.causal, scale=case.scale, mask=mask,
                                           kv_lengths=case.kv_lengths, weights=True, window=case.window,
                                           align=case.align, softcap=case.softcap, alibi=alibi, sinks=sinks)
    return files, args, (out, lse, p), seen[2]


def write(directory, files):
    os.makedirs(directory, exist_ok=True)
    for name, array in files.items():
        np.save(os.path.join(directory, name + ".npy"), array)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="case name (see --list)")
    parser.add_argument("--out-dir", help="directory for the .npy files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list the cases")
    args = parser.parse_args()
    if args.list or not args.case:
        for case in CASES:
            print(case.name)
        return
    if not args.out_dir:
        parser.error("--out-dir is required with --case")
    files, run_args, (out, lse, p), _ = generate(find_case(args.case), args.seed)
    files["ref_out"], files["ref_lse"], files["ref_p"] = out, lse, p
    write(args.out_dir, files)
    print("vkattn run " + " ".join(run_args))


if __name__ == "__main__":
    main()
