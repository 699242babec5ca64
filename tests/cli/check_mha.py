#!/usr/bin/env python3
"""Checks `vkattn mha` against an independent fp64 NumPy reference of torch.nn.MultiheadAttention
(mha_reference.py), and checks that bad weights and inputs fail cleanly: one "vkattn: error:" line
on stderr, a non-zero exit, no output file, and before a device is opened (every error case runs
with --device naming no device, so a check made after opening it would report the device instead).

    python3 tests/cli/check_mha.py                        # every case, the build's vkattn
    python3 tests/cli/check_mha.py --case gqa_self --vkattn build/release/tools/vkattn
    python3 tests/cli/check_mha.py --list | --errors-only

The layer output is compared relative to max|out| of the reference, the attention weights absolutely
(they are probabilities), both against the tolerance (docs/testing.md, "Precision and the tolerances the tests use") of the compute dtype; the reference
is fed the weights and inputs rounded to that dtype (the GPU also rounds its intermediates, which
the tolerance absorbs). Masked keys must weigh exactly 0. The grad_* cases also run the backward
(--grad-out/--grads-out) and compare every gradient in the .npz, relative to its own max |reference|,
with mha_reference.multi_head_attention_backward and, where Debian's torch imports and the case is a
torch layer, with torch.autograd of torch.nn.MultiheadAttention in float64 on the same state_dict.
Exits 1 when any case fails.
"""
import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
except ImportError:
    sys.exit("check_mha: error: numpy is required (Debian: apt install python3-numpy; run with /usr/bin/python3)")

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mha_reference  # noqa: E402
from sdpa_reference import round_to  # noqa: E402

TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}  # docs/testing.md, "Precision and the tolerances the tests use"
# The gradients (--grads-out), each relative to its own max |reference|: tests/backward.cpp's tolerances.
GRAD_TOLERANCE = {"f32": 2e-4, "f16": 1e-2, "bf16": 6e-2}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTPUTS = ("out.npy", "p.npy", "heads.png", "grads.npz")


@dataclasses.dataclass
class Case:
    name: str
    embed: int = 16
    heads: int = 4
    kv_heads: int = None  # None: = heads (torch's layer); fewer: the separate q/k/v layout
    pass_kv_heads: bool = False  # give --kv-heads explicitly (else the tool reads it off k_proj_weight)
    kdim: int = None
    vdim: int = None
    bias: bool = True
    batch: int = 2
    seq_q: int = 7
    seq_k: int = None  # None: self-attention (no --key/--value)
    causal: str = "none"
    key_padding_mask: str = None  # None | 'bool' | 'int'
    attn_mask: str = None  # None | 'float' (added, some -inf) | 'bool' (True = not allowed)
    masked_batch: bool = False  # key_padding_mask hides every key of batch 0: out = out_proj.bias
    file_dtype: str = "f4"
    dtype: str = None  # --dtype (None: the query's)
    path: str = None  # --path (None: auto)
    weights: str = None  # None | 'per-head' | 'average'
    heatmap: bool = False
    # The score modifiers: options (--window "L:R", --align, --softcap) and the state_dict's per-head
    # arrays 'sinks' and 'alibi_slopes'.
    window: str = None
    align: str = None
    softcap: float = None
    sinks: bool = False
    alibi: bool = False
    grad: bool = False  # also --grad-out dY.npy --grads-out grads.npz, against the NumPy (and torch) backward

    @property
    def compute_dtype(self):
        return self.dtype or ("f16" if self.file_dtype == "f2" else "f32")


CASES = [
    Case("packed_self", weights="per-head"),
    Case("packed_self_fused", path="fused"),
    Case("packed_cross_bottom_right_padding", heads=2, seq_q=5, seq_k=9, causal="bottom-right",
         key_padding_mask="bool", weights="per-head", heatmap=True),
    Case("top_left_sq_gt_sk_masked_rows", seq_q=9, seq_k=4, causal="top-left", weights="average"),
    Case("kdim_vdim_no_bias_float_mask", embed=12, heads=3, kdim=7, vdim=5, bias=False, seq_q=6, seq_k=10,
         attn_mask="float", weights="average"),
    Case("gqa_self_bool_mask_int_padding", heads=4, kv_heads=2, seq_q=8, attn_mask="bool",
         key_padding_mask="int", masked_batch=True, weights="per-head", path="unfused"),
    Case("gqa_given_kv_heads", embed=24, heads=6, kv_heads=3, pass_kv_heads=True, seq_q=5, seq_k=11),
    Case("mqa_cross_unfused_no_weights", embed=16, heads=4, kv_heads=1, seq_q=6, seq_k=13, path="unfused"),
    Case("f16_files", file_dtype="f2", seq_q=9, seq_k=12, causal="top-left", weights="per-head"),
    Case("f16_from_f32", dtype="f16", seq_q=9, seq_k=12, key_padding_mask="bool"),
    Case("bf16_from_f32", dtype="bf16", embed=32, heads=4, seq_q=10, seq_k=10, attn_mask="float"),
    Case("many_heads_heatmap", embed=40, heads=20, seq_q=6, seq_k=8, heatmap=True),
    Case("window_sinks_causal", seq_q=12, causal="top-left", window="4:-1", sinks=True, weights="per-head"),
    Case("alibi_softcap_window_top_left", heads=2, seq_q=5, seq_k=9, align="top-left", window="2:1", softcap=0.5,
         alibi=True, key_padding_mask="bool", weights="average"),
    Case("gqa_every_modifier_f16", heads=4, kv_heads=2, seq_q=7, seq_k=15, window="-1:3", softcap=1.0, sinks=True,
         alibi=True, attn_mask="float", file_dtype="f2", path="unfused"),
    Case("every_modifier_fused", seq_q=9, seq_k=20, causal="bottom-right", window="6:-1", softcap=0.75, sinks=True,
         alibi=True, path="fused"),
    # The backward (--grad-out/--grads-out).
    Case("grad_packed_self", grad=True, key_padding_mask="bool", attn_mask="float"),
    Case("grad_packed_cross_bool_mask", grad=True, heads=2, seq_q=5, seq_k=9, attn_mask="bool"),
    Case("grad_kdim_vdim_no_bias", grad=True, embed=12, heads=3, kdim=7, vdim=5, bias=False, seq_q=6, seq_k=10),
    Case("grad_gqa_causal_sinks_alibi", grad=True, heads=4, kv_heads=2, seq_q=7, seq_k=11, causal="bottom-right",
         sinks=True, alibi=True, softcap=1.0, masked_batch=True, key_padding_mask="int"),
    Case("grad_f16_self_causal", grad=True, file_dtype="f2", seq_q=9, causal="top-left", window="3:-1"),
]


def find_case(name):
    for case in CASES:
        if case.name == name:
            return case
    raise SystemExit(f"check_mha: error: no case named {name!r} (see --list)")


def generate(case, directory):
    """Writes the case's files; returns (`vkattn mha` args, reference out, reference weights)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    file_type = np.float16 if case.file_dtype == "f2" else np.float32
    d = mha_reference.state_dict(rng, case.embed, case.heads, case.kv_heads, case.kdim, case.vdim, case.bias)
    if case.sinks:
        d["sinks"] = rng.uniform(-1.0, 2.0, case.heads).astype(np.float32)
    if case.alibi:
        d["alibi_slopes"] = np.exp2(-8.0 * np.arange(1, case.heads + 1) / case.heads).astype(np.float32)
    np.savez(os.path.join(directory, "w.npz"), **d)
    query = rng.standard_normal((case.batch, case.seq_q, case.embed)).astype(file_type)
    np.save(os.path.join(directory, "query.npy"), query)
    args = ["mha", "--weights", "w.npz", "--query", "query.npy", "--heads", str(case.heads), "--out", "out.npy"]
    key = value = None
    seq_k = case.seq_k or case.seq_q
    if case.seq_k:
        key = rng.standard_normal((case.batch, seq_k, case.kdim or case.embed)).astype(file_type)
        value = rng.standard_normal((case.batch, seq_k, case.vdim or case.embed)).astype(file_type)
        np.save(os.path.join(directory, "key.npy"), key)
        np.save(os.path.join(directory, "value.npy"), value)
        args += ["--key", "key.npy", "--value", "value.npy"]
    kpm = None
    if case.key_padding_mask:
        kpm = rng.random((case.batch, seq_k)) < 0.3
        kpm[:, 0] = False
        if case.masked_batch:
            kpm[0, :] = True
        saved = kpm if case.key_padding_mask == "bool" else kpm.astype(np.int64) * 7  # any nonzero = ignore
        np.save(os.path.join(directory, "kpm.npy"), saved)
        args += ["--key-padding-mask", "kpm.npy"]
    mask = None
    if case.attn_mask == "float":
        mask = (0.5 * rng.standard_normal((case.seq_q, seq_k))).astype(np.float32)
        mask[rng.random(mask.shape) < 0.2] = -np.inf
        mask[:, 0] = 0.0
    elif case.attn_mask == "bool":
        mask = rng.random((case.seq_q, seq_k)) < 0.3  # True = not allowed
        mask[:, 0] = False
    if mask is not None:
        np.save(os.path.join(directory, "mask.npy"), mask)
        args += ["--attn-mask", "mask.npy"]
    if case.causal != "none":
        args += ["--causal", case.causal]
    if case.window:
        args += ["--window", case.window]
    if case.align:
        args += ["--align", case.align]
    if case.softcap is not None:
        args += ["--softcap", repr(case.softcap)]
    if case.pass_kv_heads:
        args += ["--kv-heads", str(case.kv_heads)]
    if case.dtype:
        args += ["--dtype", case.dtype]
    if case.path:
        args += ["--path", case.path]
    if case.weights:
        args += ["--attn-weights", "p.npy"] + (["--average-weights"] if case.weights == "average" else [])
    if case.heatmap:
        args += ["--heatmap", "heads.png"]

    dtype = case.compute_dtype
    seen = {name: round_to(array, dtype) for name, array in d.items()}
    inputs = (round_to(query, dtype), None if key is None else round_to(key, dtype),
              None if value is None else round_to(value, dtype))
    options = dict(heads=case.heads, kv_heads=case.kv_heads, causal=case.causal, key_padding_mask=kpm,
                   attn_mask=mask, window=tuple(int(x) for x in case.window.split(":")) if case.window else None,
                   align=case.align, softcap=case.softcap)
    out, p = mha_reference.multi_head_attention(seen, *inputs, **options)
    if case.weights == "average":
        p = p.mean(axis=1)
    grads = None
    if case.grad:
        dy = rng.standard_normal((case.batch, case.seq_q, case.embed)).astype(file_type)
        np.save(os.path.join(directory, "dY.npy"), dy)
        args += ["--grad-out", "dY.npy", "--grads-out", "grads.npz"]
        grads = mha_reference.multi_head_attention_backward(seen, *inputs, round_to(dy, dtype), **options)
        grads = {"numpy": grads}
        torch_grads = torch_backward(case, seen, inputs, round_to(dy, dtype), kpm, mask)
        if torch_grads is not None:
            grads["torch"] = torch_grads
    return args, out, p, grads


def torch_backward(case, d, inputs, dy, kpm, mask):
    """torch.autograd's gradients of torch.nn.MultiheadAttention(batch_first=True) in float64 with the
    state_dict d, where torch has the case's layer (no GQA, no score modifiers, no causal, no fully
    masked row, where torch gives NaN) and Debian's torch imports; else None."""
    if (case.kv_heads not in (None, case.heads) or case.sinks or case.alibi or case.window or case.softcap is not None
            or case.causal != "none" or case.masked_batch):
        return None
    try:
        import torch
    except ImportError:
        return None
    embed = case.embed
    layer = torch.nn.MultiheadAttention(embed, case.heads, bias=case.bias, kdim=case.kdim, vdim=case.vdim,
                                        batch_first=True, dtype=torch.float64)
    layer.load_state_dict({k: torch.from_numpy(np.asarray(v, np.float64)) for k, v in d.items()})
    query = torch.tensor(inputs[0], dtype=torch.float64, requires_grad=True)
    self_attention = inputs[1] is None
    key = query if self_attention else torch.tensor(inputs[1], dtype=torch.float64, requires_grad=True)
    value = query if self_attention else torch.tensor(inputs[2], dtype=torch.float64, requires_grad=True)
    attn_mask = None
    if mask is not None:
        attn_mask = torch.from_numpy(mask) if mask.dtype == np.bool_ else torch.from_numpy(mask.astype(np.float64))
    out, _ = layer(query, key, value, key_padding_mask=None if kpm is None else torch.from_numpy(np.asarray(kpm, bool)),
                   attn_mask=attn_mask, need_weights=False)
    out.backward(torch.from_numpy(np.asarray(dy, np.float64)))
    grads = {name: p.grad.numpy() for name, p in layer.named_parameters()}
    grads["query"] = query.grad.numpy()
    if not self_attention:
        grads["key"], grads["value"] = key.grad.numpy(), value.grad.numpy()
    return grads


def check_case(vkattn, case, directory):
    os.makedirs(directory, exist_ok=True)
    args, ref_out, ref_p, ref_grads = generate(case, directory)
    proc = subprocess.run([vkattn] + args, cwd=directory, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return False, f"vkattn mha exited {proc.returncode}: {proc.stderr.strip()}"
    out = np.load(os.path.join(directory, "out.npy"))
    expected = np.float16 if case.file_dtype == "f2" and case.compute_dtype == "f16" else np.float32
    if out.dtype != expected or out.shape != ref_out.shape:
        return False, f"out.npy is {out.dtype} {out.shape}, expected {np.dtype(expected)} {ref_out.shape}"
    tol = TOLERANCE[case.compute_dtype]
    scale = max(float(np.abs(ref_out).max()), 1e-30)
    got = out.astype(np.float64)
    err = float(np.abs(got - ref_out).max() / scale) if np.isfinite(got).all() else np.inf
    ok = err <= tol
    detail = f"out {err:.2e} / tol {tol:.0e}"
    if case.masked_batch:
        bias = np.load(os.path.join(directory, "w.npz"))["out_proj.bias"]
        if not np.array_equal(out[0], np.broadcast_to(round_to(bias, case.compute_dtype).astype(out.dtype),
                                                      out[0].shape)):
            ok = False
            detail += "  (fully masked batch 0 is not out_proj.bias)"
    if case.weights:
        p = np.load(os.path.join(directory, "p.npy"))
        if p.dtype != np.float32 or p.shape != ref_p.shape:
            return False, f"p.npy is {p.dtype} {p.shape}, expected float32 {ref_p.shape}"
        p_err = float(np.abs(p - ref_p).max()) if np.isfinite(p).all() else np.inf
        nonzero_masked = int((p[ref_p == 0.0] != 0.0).sum())
        ok = ok and p_err <= tol and nonzero_masked == 0
        detail += f"  weights {p_err:.2e}" + (f" ({nonzero_masked} masked weights not 0)" if nonzero_masked else "")
    if case.heatmap:
        with open(os.path.join(directory, "heads.png"), "rb") as png:
            if png.read(8) != b"\x89PNG\r\n\x1a\n":
                return False, "heads.png is not a PNG"
        detail += "  heatmap ok"
    if ref_grads:
        grads = np.load(os.path.join(directory, "grads.npz"))
        tol = GRAD_TOLERANCE[case.compute_dtype]
        for source, want in ref_grads.items():
            if sorted(grads.files) != sorted(want):
                return False, f"grads.npz holds {sorted(grads.files)}, the {source} backward {sorted(want)}"
            worst, worst_name = 0.0, ""
            for name, w in want.items():
                g = grads[name]
                if g.dtype != np.float32 or g.shape != w.shape:
                    return False, f"grads.npz {name} is {g.dtype} {g.shape}, expected float32 {w.shape}"
                e = float(np.abs(g - w).max() / max(float(np.abs(w).max()), 1e-3)) if np.isfinite(g).all() else np.inf
                if e >= worst:
                    worst, worst_name = e, name
            ok = ok and worst <= tol
            detail += f"  grads vs {source} {worst:.2e} ({worst_name})"
    return ok, detail


def error_cases():
    """(name, files {name: array, dict (-> .npz) or bytes}, args after `vkattn mha`): each must fail."""
    rng = np.random.default_rng(3)
    d = mha_reference.state_dict(rng, 16, 4)
    sep = mha_reference.state_dict(rng, 16, 4, kv_heads=2)
    kdim = mha_reference.state_dict(rng, 16, 4, kdim=6)
    query = rng.standard_normal((2, 5, 16)).astype(np.float32)
    key = rng.standard_normal((2, 7, 16)).astype(np.float32)

    def without(src, *names):
        return {k: v for k, v in src.items() if k not in names}

    base = {"w.npz": d, "query.npy": query}
    cross = dict(base, **{"key.npy": key, "value.npy": key})
    heads = ["--heads", "4"]
    kv = ["--key", "key.npy", "--value", "value.npy"]
    return [
        ("missing_out_proj_weight", dict(base, **{"w.npz": without(d, "out_proj.weight")}), heads),
        ("missing_in_proj_weight", dict(base, **{"w.npz": without(d, "in_proj_weight")}), heads),
        ("missing_v_proj_weight", dict(base, **{"w.npz": without(sep, "v_proj_weight")}), heads),
        ("packed_and_separate", dict(base, **{"w.npz": dict(d, q_proj_weight=sep["q_proj_weight"])}), heads),
        ("unknown_array_name", dict(base, **{"w.npz": dict(without(d, "in_proj_bias"),
                                                           in_proj_biases=d["in_proj_bias"])}), heads),
        ("add_bias_kv_unsupported", dict(base, **{"w.npz": dict(d, bias_k=np.zeros((1, 1, 16), np.float32))}), heads),
        ("only_out_proj_bias", dict(base, **{"w.npz": without(d, "in_proj_bias")}), heads),
        ("only_in_proj_bias", dict(base, **{"w.npz": without(d, "out_proj.bias")}), heads),
        ("in_proj_weight_misshapen", dict(base, **{"w.npz": dict(d, in_proj_weight=d["in_proj_weight"][:, :15])}),
         heads),
        ("in_proj_bias_misshapen", dict(base, **{"w.npz": dict(d, in_proj_bias=d["in_proj_bias"][:40])}), heads),
        ("out_proj_weight_not_square", dict(base, **{"w.npz": dict(d, **{"out_proj.weight": d["in_proj_weight"]})}),
         heads),
        ("float64_weight", dict(base, **{"w.npz": dict(d, in_proj_weight=d["in_proj_weight"].astype(np.float64))}),
         heads),
        ("weights_not_npz", dict(base, **{"w.npz": b"not a zip archive at all"}), heads),
        ("embed_not_divisible_by_heads", base, ["--heads", "3"]),
        ("heads_not_divisible_by_kv_heads", dict(base, **{"w.npz": sep}), ["--heads", "4", "--kv-heads", "3"]),
        ("kv_heads_with_packed_weights", base, ["--heads", "4", "--kv-heads", "2"]),
        ("k_proj_rows_not_head_multiple", dict(base, **{"w.npz": dict(sep, k_proj_weight=sep["k_proj_weight"][:7])}),
         heads),
        ("query_wrong_features", dict(base, **{"query.npy": query[..., :15]}), heads),
        ("query_2d", dict(base, **{"query.npy": query[0]}), heads),
        ("query_float64", dict(base, **{"query.npy": query.astype(np.float64)}), heads),
        ("key_without_value", cross, heads + ["--key", "key.npy"]),
        ("key_batch_mismatch", dict(cross, **{"key.npy": key[:1], "value.npy": key[:1]}), heads + kv),
        ("key_value_seq_mismatch", dict(cross, **{"value.npy": key[:, :6]}), heads + kv),
        ("key_wrong_kdim", dict(cross, **{"w.npz": kdim}), heads + kv),
        ("key_dtype_differs", dict(cross, **{"key.npy": key.astype(np.float16)}), heads + kv),
        ("self_attention_needs_kdim_e", dict(base, **{"w.npz": kdim}), heads),
        ("key_padding_mask_shape", dict(cross, **{"kpm.npy": np.zeros((2, 5), bool)}),
         heads + kv + ["--key-padding-mask", "kpm.npy"]),
        ("key_padding_mask_float", dict(cross, **{"kpm.npy": np.zeros((2, 7), np.float32)}),
         heads + kv + ["--key-padding-mask", "kpm.npy"]),
        ("attn_mask_shape", dict(cross, **{"mask.npy": np.zeros((5, 5), np.float32)}),
         heads + kv + ["--attn-mask", "mask.npy"]),
        ("attn_mask_3d", dict(cross, **{"mask.npy": np.zeros((8, 5, 7), np.float32)}),
         heads + kv + ["--attn-mask", "mask.npy"]),
        ("attn_mask_int", dict(cross, **{"mask.npy": np.zeros((5, 7), np.int32)}),
         heads + kv + ["--attn-mask", "mask.npy"]),
        ("fused_with_attn_weights", base, heads + ["--path", "fused", "--attn-weights", "p.npy"]),
        ("fused_with_heatmap", base, heads + ["--path", "fused", "--heatmap", "heads.png"]),
        ("average_without_attn_weights", base, heads + ["--average-weights"]),
        ("out_same_as_attn_weights", base, heads + ["--attn-weights", "out.npy"]),
        ("missing_heads", base, []),
        ("grad_out_wrong_shape", dict(base, **{"dY.npy": query[:, :4]}),
         heads + ["--grad-out", "dY.npy", "--grads-out", "grads.npz"]),
        ("grad_out_without_grads_out", dict(base, **{"dY.npy": query}), heads + ["--grad-out", "dY.npy"]),
        ("missing_query_file", {"w.npz": d}, heads),
        # Values beyond the compute dtype's range (the layer stores inputs and weights in it).
        # The score modifiers: bad option values and per-head arrays of the wrong shape or not finite.
        ("window_not_l_r", base, heads + ["--window", "5"]),
        ("window_side_below_minus_one", base, heads + ["--window=-2:0"]),
        ("window_side_not_integer", base, heads + ["--window", "4:x"]),
        ("softcap_zero", base, heads + ["--softcap", "0"]),
        ("softcap_negative", base, heads + ["--softcap=-1.5"]),
        ("softcap_not_a_number", base, heads + ["--softcap", "big"]),
        ("align_against_causal", base, heads + ["--causal", "bottom-right", "--align", "top-left"]),
        ("align_unknown", base, heads + ["--align", "middle"]),
        ("sinks_wrong_shape", dict(base, **{"w.npz": dict(d, sinks=np.zeros(3, np.float32))}), heads),
        ("alibi_slopes_2d", dict(base, **{"w.npz": dict(d, alibi_slopes=np.ones((2, 4), np.float32))}), heads),
        ("sinks_not_finite", dict(base, **{"w.npz": dict(d, sinks=np.array([0, np.inf, 0, 0], np.float32))}), heads),
        ("alibi_slopes_float64", dict(base, **{"w.npz": dict(d, alibi_slopes=np.ones(4, np.float64))}), heads),
        ("query_overflows_f16", dict(base, **{"query.npy": np.where(query > 1.5, 1e5, query).astype(np.float32)}),
         heads + ["--dtype", "f16"]),
        ("weight_overflows_f16", dict(base, **{"w.npz": dict(d, **{"out_proj.weight": d["out_proj.weight"] * 1e6})}),
         heads + ["--dtype", "f16"]),
    ]


def write_files(directory, files):
    os.makedirs(directory, exist_ok=True)
    for filename, content in files.items():
        path = os.path.join(directory, filename)
        if isinstance(content, bytes):
            with open(path, "wb") as f:
                f.write(content)
        elif isinstance(content, dict):
            np.savez(path, **content)
        else:
            np.save(path, content)


def check_error_case(vkattn, name, files, extra, directory):
    write_files(directory, files)
    args = ["mha", "--weights", "w.npz", "--query", "query.npy", "--out", "out.npy", "--device", "no-such-device"]
    proc = subprocess.run([vkattn] + args + extra, cwd=directory, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.splitlines()
    leftovers = [f for f in os.listdir(directory) if f.startswith(OUTPUTS)]
    if proc.returncode == 0:
        return False, "succeeded, expected a failure"
    if name.startswith("grad_out") and proc.returncode != 2:
        return False, f"exit {proc.returncode}, expected 2 (a usage error): {proc.stderr.strip()}"
    if len(lines) != 1 or not lines[0].startswith("vkattn: error: "):
        return False, f"stderr is not one 'vkattn: error:' line: {proc.stderr!r}"
    if "no-such-device" in lines[0]:
        return False, f"the device was opened before the inputs were checked: {lines[0]}"
    if leftovers:
        return False, f"left output files behind: {leftovers}"
    if proc.stdout:
        return False, f"wrote to stdout: {proc.stdout!r}"
    return True, f"exit {proc.returncode}: {lines[0][len('vkattn: error: '):]}"


def default_vkattn():
    built = os.path.join(REPO, "build", "release", "tools", "vkattn")
    return built if os.path.exists(built) else shutil.which("vkattn") or built


def main():
    parser = argparse.ArgumentParser(description="Check `vkattn mha` against an fp64 NumPy reference.")
    parser.add_argument("--vkattn", default=default_vkattn(), help="the vkattn binary (default: %(default)s)")
    parser.add_argument("--case", action="append", help="run only this case (repeatable; see --list)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    parser.add_argument("--errors-only", action="store_true", help="only the bad-input cases (no device needed)")
    parser.add_argument("--keep", help="keep each case's files under this directory")
    args = parser.parse_args()

    errors = error_cases()
    if args.list:
        for case in CASES:
            print(case.name)
        for name, _, _ in errors:
            print("error:" + name)
        return 0
    vkattn = os.path.abspath(args.vkattn)
    if not os.path.exists(vkattn):
        sys.exit(f"check_mha: error: {vkattn} does not exist (build it, or pass --vkattn)")

    selected = args.case or ([] if args.errors_only else [c.name for c in CASES]) + ["error:" + e[0] for e in errors]
    root = args.keep or tempfile.mkdtemp(prefix="vkattn-check-mha-")
    failures = 0
    for name in selected:
        directory = os.path.join(root, name.replace(":", "_"))
        if name.startswith("error:"):
            matches = [e for e in errors if e[0] == name[len("error:"):]]
            if not matches:
                sys.exit(f"check_mha: error: no case named {name!r} (see --list)")
            ok, detail = check_error_case(vkattn, *matches[0], directory)
        else:
            ok, detail = check_case(vkattn, find_case(name), directory)
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name:40s} {detail}", flush=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(selected) - failures}/{len(selected)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
