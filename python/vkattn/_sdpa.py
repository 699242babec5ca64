"""vkattn.scaled_dot_product_attention: PyTorch's call on (batch, heads, seq, dim) tensors."""

from . import _vkattn
from ._autograd import AttentionCall, needs_grad
from ._arrays import float32_values, host_tensor, layout_ready, mask_array, new_output, same_kind_and_dtype
from ._device_array import call_context
from ._errors import invalid
from ._options import causal_name, dropout, optional_float, window_pair


def _causal(is_causal, causal):
    """One causal alignment from PyTorch's is_causal (top-left) and vkattn's `causal`."""
    name = causal_name(causal)
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal: expected a bool, got {type(is_causal).__name__}")
    if is_causal:
        if causal is not None and name != "top-left":
            raise invalid(f"is_causal=True is top-left causal masking; causal={causal!r} contradicts it")
        return "top-left"
    return name


def _check_shapes(q, k, v, enable_gqa):
    for name, t in (("query", q), ("key", k), ("value", v)):
        if len(t.shape) != 4:
            raise invalid(f"{name}: expected 4 dimensions (batch, heads, seq, dim), got shape {t.shape}")
    if q.shape[1] != k.shape[1] and not enable_gqa:
        raise invalid(
            f"query has {q.shape[1]} heads but key has {k.shape[1]}: pass enable_gqa=True for grouped-query attention"
        )


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    *,
    causal=None,
    window=None,
    softcap=None,
    alibi_slopes=None,
    sinks=None,
    return_lse=False,
    context=None,
):
    """Attention as torch.nn.functional.scaled_dot_product_attention computes it, on a Vulkan device.

    query (B, H, Sq, D), key (B, G, Sk, D), value (B, G, Sk, Dv): NumPy arrays (float32, float16) or
    torch CPU tensors (float32, float16, bfloat16), all of one kind and dtype, any strides. Returns the
    output (B, H, Sq, Dv) of the same kind and dtype; with return_lse=True, (output, lse), lse the
    float32 log-sum-exp of each row's scores (B, H, Sq).

    attn_mask: broadcastable to (B, H, Sq, Sk); bool (True = attend) or float (added to the scores).
    dropout_p: the probability of dropping a weight (a fresh mask every call).
    is_causal: top-left causal masking (key j visible to query i when j <= i).
    scale: the scores' factor, default 1/sqrt(D).
    enable_gqa: allow G < H key/value heads (H % G == 0; query head h uses key head h // (H // G)).
    causal: "top-left" or "bottom-right" (j <= i + Sk - Sq, FlashAttention's and KV-cache decoding's).
    window: (left, right), a sliding window around the diagonal (-1: unbounded on that side).
    softcap: c > 0, scores become c * tanh(s / c).
    alibi_slopes: (H) or (B, H) float32 slopes, bias -slope * |i + off - j|.
    sinks: (H) float32 attention-sink logits, in each row's softmax denominator.
    context: the vkattn.Context to run on (default: vkattn.default_context()).

    Torch tensors that require grad (query, key, value, sinks) give an output with a grad_fn whose
    backward is vkattn's (docs/python.md, "Autograd"); masks, ALiBi slopes and the lse get none.

    Unlike PyTorch, a row whose keys are all masked gives 0 (and lse -inf), not NaN. The window and
    ALiBi align like causal when it is set, else bottom-right (docs/semantics.md, "Score modifiers").
    Raises vkattn.Error (a ValueError) for a bad shape or value, TypeError for a wrong type or dtype.
    """
    q = host_tensor("query", query)
    k = host_tensor("key", key)
    v = host_tensor("value", value)
    same_kind_and_dtype([("query", q), ("key", k), ("value", v)])
    _check_shapes(q, k, v, enable_gqa)
    causal_alignment = _causal(is_causal, causal)
    p, seed = dropout(dropout_p)
    ctx = call_context(context, (query, key, value))

    batch, heads, seq_q, _ = q.shape
    seq_k, dim_v = k.shape[2], v.shape[3]
    if needs_grad(query, key, value, sinks):  # a torch autograd graph: vkattn's backward (_autograd.py)
        call = AttentionCall(
            ctx, q.dtype, "bhsd", mask=None if attn_mask is None else mask_array(attn_mask, batch, heads, seq_q, seq_k),
            alibi=alibi_slopes, sinks=sinks, scale=optional_float("scale", scale), causal=causal_alignment,
            window=window_pair(window), softcap=optional_float("softcap", softcap), dropout_p=p, dropout_seed=seed)
        out, lse = call.apply(query, key, value, sinks)
        return (out, lse) if return_lse else out
    out, out_view = new_output(q.kind, q.dtype, (batch, heads, seq_q, dim_v), ctx)
    lse = lse_view = None
    if return_lse:
        lse, lse_view = new_output(q.kind, "f32", (batch, heads, seq_q), ctx)
    _vkattn.attention(
        ctx,
        layout_ready(q.array),
        layout_ready(k.array),
        layout_ready(v.array),
        out_view,
        q.dtype,
        mask=None if attn_mask is None else mask_array(attn_mask, batch, heads, seq_q, seq_k),
        lse=lse_view,
        alibi=None if alibi_slopes is None else float32_values("alibi_slopes", alibi_slopes),
        sinks=None if sinks is None else float32_values("sinks", sinks),
        scale=optional_float("scale", scale),
        causal=causal_alignment,
        window=window_pair(window),
        softcap=optional_float("softcap", softcap),
        dropout_p=p,
        dropout_seed=seed,
    )
    return (out, lse) if return_lse else out
