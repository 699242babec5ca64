"""vkattn.flash_attn_func and vkattn.flash_attn_varlen_func: FlashAttention's calls, in its
(batch, seq, heads, dim) and packed (total, heads, dim) layouts, read in place (a transposed NumPy
view, no copy)."""

import numbers

import numpy as np

from . import _vkattn
from ._autograd import AttentionCall, needs_grad
from ._arrays import float32_values, host_tensor, is_torch_tensor, layout_ready, new_output, same_kind_and_dtype
from ._device_array import call_context, with_leading_axis
from ._errors import invalid
from ._options import dropout, optional_float, window_pair


def _bhsd(array):
    """A (batch, seq, heads, dim) array as the (batch, heads, seq, dim) view vkattn reads."""
    return array.transpose(0, 2, 1, 3)


def _options(causal, window_size, softcap, softmax_scale, dropout_p):
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool, got {type(causal).__name__}")
    window = window_pair(window_size)
    if window == (-1, -1):
        window = None  # FlashAttention's "no window"
    cap = optional_float("softcap", softcap)
    p, seed = dropout(dropout_p)
    return {
        # FlashAttention's causal mask is bottom-right aligned (the last query sees every key).
        "causal": "bottom-right" if causal else "none",
        "window": window,
        "softcap": None if cap == 0.0 else cap,  # 0: FlashAttention's "no softcap"
        "scale": optional_float("softmax_scale", softmax_scale),
        "dropout_p": p,
        "dropout_seed": seed,
    }


def _check_ndim(tensors, ndim, layout):
    for name, t in tensors:
        if len(t.shape) != ndim:
            raise invalid(f"{name}: expected {ndim} dimensions {layout}, got shape {t.shape}")


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    *,
    context=None,
):
    """Attention as FlashAttention's flash_attn_func computes it, on a Vulkan device.

    q (B, Sq, H, D), k (B, Sk, G, D), v (B, Sk, G, Dv): NumPy arrays (float32, float16) or torch CPU
    tensors (float32, float16, bfloat16), of one kind and dtype, any strides; H % G == 0 (GQA/MQA).
    Returns out (B, Sq, H, Dv) of the same kind and dtype; with return_attn_probs=True,
    (out, softmax_lse, attn_probs): softmax_lse float32 (B, H, Sq) and attn_probs the float32 softmax
    weights P (B, H, Sq, Sk) before dropout (FlashAttention's S_dmask is a testing aid that encodes
    the dropout mask; vkattn gives the weights instead, from its three-stage path).

    causal: bottom-right aligned (key j visible to query i when j <= i + Sk - Sq).
    window_size: (left, right), -1 = unbounded; (-1, -1) is no window. softcap: 0 is none.
    alibi_slopes: (H) or (B, H) float32. deterministic: accepted; vkattn is always deterministic.
    context: the vkattn.Context to run on (default: vkattn.default_context()).
    Torch tensors that require grad give an output with a grad_fn whose backward is vkattn's
    (docs/python.md, "Autograd"); softmax_lse, attn_probs and the ALiBi slopes get no gradient.
    """
    tq, tk, tv = host_tensor("q", q), host_tensor("k", k), host_tensor("v", v)
    same_kind_and_dtype([("q", tq), ("k", tk), ("v", tv)])
    _check_ndim([("q", tq), ("k", tk), ("v", tv)], 4, "(batch, seq, heads, dim)")
    options = _options(causal, window_size, softcap, softmax_scale, dropout_p)
    ctx = call_context(context, (q, k, v))

    batch, seq_q, heads, _ = tq.shape
    seq_k, dim_v = tk.shape[1], tv.shape[3]
    if needs_grad(q, k, v):  # a torch autograd graph: vkattn's backward (_autograd.py)
        call = AttentionCall(ctx, tq.dtype, "bshd", alibi=alibi_slopes, weights=return_attn_probs, **options)
        results = call.apply(q, k, v, None)
        return results if return_attn_probs else results[0]
    out, out_view = new_output(tq.kind, tq.dtype, (batch, seq_q, heads, dim_v), ctx)
    lse = lse_view = probs = probs_view = None
    if return_attn_probs:
        lse, lse_view = new_output(tq.kind, "f32", (batch, heads, seq_q), ctx)
        probs, probs_view = new_output(tq.kind, "f32", (batch, heads, seq_q, seq_k), ctx)
    _vkattn.attention(
        ctx,
        layout_ready(_bhsd(tq.array)),
        layout_ready(_bhsd(tk.array)),
        layout_ready(_bhsd(tv.array)),
        _bhsd(out_view),
        tq.dtype,
        lse=lse_view,
        weights=probs_view,
        alibi=None if alibi_slopes is None else float32_values("alibi_slopes", alibi_slopes),
        **options,
    )
    return (out, lse, probs) if return_attn_probs else out


def _offsets(name, cu_seqlens):
    """cu_seqlens as a C-contiguous int32 NumPy array (values are checked by the module)."""
    if is_torch_tensor(cu_seqlens):
        if cu_seqlens.device.type != "cpu":
            raise TypeError(f"{name}: a tensor on {cu_seqlens.device} (vkattn takes CPU tensors)")
        cu_seqlens = cu_seqlens.detach().numpy()
    elif isinstance(cu_seqlens, (list, tuple)):
        cu_seqlens = np.asarray(cu_seqlens)
    if not isinstance(cu_seqlens, np.ndarray):
        raise TypeError(f"{name}: expected a NumPy array, a torch tensor or a list, got {type(cu_seqlens).__name__}")
    if cu_seqlens.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integers, got dtype {cu_seqlens.dtype}")
    if cu_seqlens.size and (cu_seqlens.min() < np.iinfo(np.int32).min or cu_seqlens.max() > np.iinfo(np.int32).max):
        raise invalid(f"{name}: values beyond int32")
    return np.ascontiguousarray(cu_seqlens, dtype=np.int32)


def _max_seqlen(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    return int(value)


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    *,
    context=None,
):
    """FlashAttention's flash_attn_varlen_func: sequences of a batch laid end to end, with no padding.

    q (total_q, H, D), k (total_k, G, D), v (total_k, G, Dv); cu_seqlens_q and cu_seqlens_k (B + 1)
    integer offsets, starting at 0, non-decreasing, ending at total_q and total_k: sequence b's queries
    q[cu_seqlens_q[b]:cu_seqlens_q[b+1]] attend only to its keys k[cu_seqlens_k[b]:cu_seqlens_k[b+1]].
    max_seqlen_q and max_seqlen_k must bound every sequence's lengths (checked). Returns out
    (total_q, H, Dv); with return_attn_probs=True, (out, softmax_lse float32 (H, total_q), attn_probs
    float32 (H, total_q, total_k), each row holding its sequence's weights and 0 elsewhere).
    causal is bottom-right per sequence; the other options, and autograd, as flash_attn_func's.
    """
    tq, tk, tv = host_tensor("q", q), host_tensor("k", k), host_tensor("v", v)
    same_kind_and_dtype([("q", tq), ("k", tk), ("v", tv)])
    _check_ndim([("q", tq), ("k", tk), ("v", tv)], 3, "(total, heads, dim)")
    options = _options(causal, window_size, softcap, softmax_scale, dropout_p)
    offsets_q, offsets_k = _offsets("cu_seqlens_q", cu_seqlens_q), _offsets("cu_seqlens_k", cu_seqlens_k)
    max_q, max_k = _max_seqlen("max_seqlen_q", max_seqlen_q), _max_seqlen("max_seqlen_k", max_seqlen_k)
    ctx = call_context(context, (q, k, v))

    total_q, heads, _ = tq.shape
    total_k, dim_v = tk.shape[0], tv.shape[2]
    if needs_grad(q, k, v):  # a torch autograd graph: vkattn's backward (_autograd.py)
        call = AttentionCall(ctx, tq.dtype, "packed", alibi=alibi_slopes, packed=(offsets_q, offsets_k, max_q, max_k),
                             weights=return_attn_probs, **options)
        results = call.apply(q, k, v, None)
        return results if return_attn_probs else results[0]
    out, out_view = new_output(tq.kind, tq.dtype, (total_q, heads, dim_v), ctx)
    lse = lse_view = probs = probs_view = None
    if return_attn_probs:
        lse, lse_view = new_output(tq.kind, "f32", (heads, total_q), ctx)
        probs, probs_view = new_output(tq.kind, "f32", (heads, total_q, total_k), ctx)

    def packed(array):  # (total, heads, dim) as the (1, heads, total, dim) view vkattn reads
        return _bhsd(with_leading_axis(array))

    _vkattn.varlen_attention(
        ctx,
        packed(layout_ready(tq.array)),
        packed(layout_ready(tk.array)),
        packed(layout_ready(tv.array)),
        packed(out_view),
        tq.dtype,
        offsets_q,
        offsets_k,
        max_q,
        max_k,
        lse=lse_view,
        weights=probs_view,
        alibi=None if alibi_slopes is None else float32_values("alibi_slopes", alibi_slopes),
        **options,
    )
    return (out, lse, probs) if return_attn_probs else out
