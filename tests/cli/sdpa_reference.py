"""An independent fp64 NumPy reference of vkattn's attention contract (docs/semantics.md).

Written from the contract, not from the C++ reference, so that `vkattn run` can be checked against
something that shares no code with the library:

    O[b,h,i,:] = sum_j softmax_j(scale * Q[b,h,i,:].K[b,g(h),j,:] + bias[b,h,i,j]) V[b,g(h),j,:]

with g(h) = h // (H // G); causal top-left (j <= i) or bottom-right (j <= i + Sk - Sq); key padding
(j >= kv_lengths[b] masked); a bool mask (True = attend) or a float mask (added; -inf masks),
broadcast over batch and heads. A fully masked row gives O = 0 and LSE = -inf; a masked key never
influences the output even when its K or V holds NaN or Inf.

Score modifiers (docs/semantics.md, "Score modifiers"), in this order on each score: softcap c·tanh(s/c) (finite
scores only), + ALiBi -slope·|i + off - j|, + float mask; a sliding window (left, right) hides keys
outside i + off - left .. i + off + right (-1 = unbounded); off = 0 (top-left) or Sk - Sq
(bottom-right), causal's alignment when causal is set, else `align` (default bottom-right); sink
logits (H) join each row's softmax denominator without a value (a fully masked row: O = 0, LSE = the
sink; the weights P exclude it).
"""
import numpy as np


def round_bf16(x):
    """float32 -> bfloat16 -> float32 with round-to-nearest-even (NaN stays NaN), like the shaders."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32).copy()
    nan = np.isnan(x)
    out[nan] = x[nan]
    return out


def round_to(x, dtype):
    """The values the GPU sees when `x` is stored as `dtype` ('f32', 'f16', 'bf16')."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return round_bf16(x)
    return x


def diagonal_offset(seq_q, seq_k, causal, align):
    """off of the call's one alignment: causal's when set, else `align` (default bottom-right)."""
    if causal != "none":
        align = causal
    return 0 if align == "top-left" else seq_k - seq_q


def visibility(batch, heads, seq_q, seq_k, causal, kv_lengths, bool_mask, window=None, align=None):
    """(B, H, Sq, Sk) bool: which keys each query row may attend to."""
    i = np.arange(seq_q)[:, None]
    j = np.arange(seq_k)[None, :]
    visible = np.ones((batch, heads, seq_q, seq_k), dtype=bool)
    if window is not None:
        off = diagonal_offset(seq_q, seq_k, causal, align)
        left, right = window
        if left >= 0:
            visible &= j >= i + off - left
        if right >= 0:
            visible &= j <= i + off + right
    if causal == "top-left":
        visible &= j <= i
    elif causal == "bottom-right":
        visible &= j <= i + (seq_k - seq_q)
    elif causal != "none":
        raise ValueError(f"causal: {causal!r}")
    if kv_lengths is not None:
        kv = np.asarray(kv_lengths, dtype=np.int64).reshape(batch, 1, 1, 1)
        visible &= j[None, None] < kv
    if bool_mask is not None:
        visible &= np.broadcast_to(as_4d(bool_mask), visible.shape)
    return visible


def as_4d(mask):
    return mask.reshape((1, 1) + mask.shape) if mask.ndim == 2 else mask


def attention(q, k, v, *, causal="none", scale=None, mask=None, kv_lengths=None, weights=False, window=None,
              align=None, softcap=None, alibi=None, sinks=None):
    """fp64 attention. q (B,H,Sq,D), k (B,G,Sk,D), v (B,G,Sk,Dv): already rounded to the storage
    dtype. mask: bool (True = attend) or float (added), 2-D or 4-D. window (left, right), align,
    softcap, alibi slopes (H,) or (B,H), sinks (H,): the score modifiers. Returns (O, LSE) in float64,
    and with weights=True also P (B,H,Sq,Sk): the softmax weights, exactly 0 for masked keys and for
    every key of a fully masked row."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    batch, heads, seq_q, dim = q.shape
    kv_heads, seq_k, dim_v = k.shape[1], k.shape[2], v.shape[3]
    assert heads % kv_heads == 0
    group = heads // kv_heads
    # The library takes the scale as a float: round it the same way before widening.
    scale = float(np.float32(1.0 / np.sqrt(dim) if scale is None else scale))

    bool_mask = mask if mask is not None and mask.dtype == np.bool_ else None
    visible = visibility(batch, heads, seq_q, seq_k, causal, kv_lengths, bool_mask, window, align)

    kk = np.repeat(k, group, axis=1)
    vv = np.repeat(v, group, axis=1)
    scores = scale * np.einsum("bhid,bhjd->bhij", q, kk)
    if softcap is not None:
        finite = np.isfinite(scores)
        scores = np.where(finite, softcap * np.tanh(np.where(finite, scores, 0.0) / softcap), scores)
    if alibi is not None:
        slopes = np.asarray(alibi, dtype=np.float64)
        slopes = np.broadcast_to(slopes.reshape((1,) * (2 - slopes.ndim) + slopes.shape), (batch, heads))
        off = diagonal_offset(seq_q, seq_k, causal, align)
        distance = np.abs(np.arange(seq_q)[:, None] + off - np.arange(seq_k)[None, :]).astype(np.float64)
        scores = scores - slopes[:, :, None, None] * distance
    if mask is not None and mask.dtype != np.bool_:
        scores = scores + np.broadcast_to(as_4d(mask.astype(np.float64)), scores.shape)
    # np.where replaces (rather than adds to) masked scores: NaN in a masked key's K cannot leak.
    scores = np.where(visible, scores, -np.inf)

    row_max = scores.max(axis=-1, keepdims=True)
    fully_masked = row_max == -np.inf  # every score -inf: by the masks, or by a float mask of -inf
    if sinks is not None:
        # The sink is one more term of the denominator: the max includes it, and a row with no key
        # keeps it alone (O = 0, LSE = the sink).
        sink = np.asarray(sinks, dtype=np.float64).reshape(1, heads, 1, 1)
        row_max = np.maximum(row_max, sink)
    shift = np.where(fully_masked & (sinks is None), 0.0, row_max)
    p = np.exp(scores - shift)  # exactly 0 for masked keys
    total = p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(sink - shift)
        fully_masked = np.zeros_like(fully_masked)  # every row has its sink: O = 0 comes from p = 0

    if np.isfinite(vv).all():
        out = np.einsum("bhij,bhjd->bhid", p, vv)
    else:
        # 0 * NaN is NaN: leave masked keys (masked by a mask, or by a -inf float bias) out of the
        # sum explicitly, one query row at a time; an unmasked key's NaN still propagates, even
        # where its weight underflowed to 0.
        live = scores != -np.inf
        out = np.empty((batch, heads, seq_q, dim_v))
        for i in range(seq_q):
            with np.errstate(invalid="ignore"):
                contrib = np.where(live[:, :, i, :, None], p[:, :, i, :, None] * vv, 0.0)
            out[:, :, i] = contrib.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(fully_masked, 0.0, out / np.where(fully_masked, 1.0, total))
        lse = np.where(fully_masked, -np.inf, shift + np.log(np.where(fully_masked, 1.0, total)))
        p = np.where(fully_masked, 0.0, p / np.where(fully_masked, 1.0, total))
    if weights:
        return out, lse[..., 0], p
    return out, lse[..., 0]
