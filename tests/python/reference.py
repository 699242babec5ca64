"""The float64 NumPy reference the Python tests check vkattn against: softmax(Q·Kᵀ·scale + bias)·V with
the semantics of docs/semantics.md (a row whose keys are all masked gives 0 and LSE -inf, or the
sink's logit), written from the formula rather than from vkattn's code."""

import numpy as np


def as_float64(x):
    """A NumPy array or torch tensor (any dtype, bf16 included) as float64 NumPy."""
    if hasattr(x, "detach"):
        return x.detach().float().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def attention(q, k, v, *, mask=None, scale=None, causal=None, window=None, softcap=None, alibi=None, sinks=None):
    """q (B, H, Sq, D), k (B, G, Sk, D), v (B, G, Sk, Dv), any array kind. mask: bool (True = attend)
    or float (added), broadcastable to (B, H, Sq, Sk). causal: None, "top-left" or "bottom-right";
    the window and ALiBi align like causal, else bottom-right. Returns (out, lse) in float64."""
    q, k, v = as_float64(q), as_float64(k), as_float64(v)
    batch, heads, seq_q, dim = q.shape
    seq_k = k.shape[2]
    group = heads // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1.0 / np.sqrt(dim) if scale is None else scale
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    off = seq_k - seq_q if (causal or "bottom-right") == "bottom-right" else 0
    i = np.arange(seq_q)[:, None]
    j = np.arange(seq_k)[None, :]
    if alibi is not None:
        slopes = as_float64(alibi)
        slopes = slopes.reshape((1,) * (2 - slopes.ndim) + slopes.shape)[:, :, None, None]
        s = s - slopes * np.abs(i + off - j)
    visible = np.ones((batch, heads, seq_q, seq_k), dtype=bool)
    if mask is not None:
        m = np.asarray(mask.numpy() if hasattr(mask, "numpy") else mask)
        if m.dtype == bool:
            visible &= np.broadcast_to(m, visible.shape)
        else:
            s = s + as_float64(mask)
    if causal is not None:
        visible &= j <= i + off
    if window is not None:
        left, right = window
        if left >= 0:
            visible &= j >= i + off - left
        if right >= 0:
            visible &= j <= i + off + right
    s = np.where(visible, s, -np.inf)
    row_max = s.max(axis=-1, keepdims=True, initial=-np.inf)
    sink = None if sinks is None else as_float64(sinks)[None, :, None, None]
    if sink is not None:
        row_max = np.maximum(row_max, sink)
    empty = ~np.isfinite(row_max)  # every key masked (and no sink)
    row_max = np.where(empty, 0.0, row_max)
    e = np.exp(s - row_max)
    denominator = e.sum(axis=-1, keepdims=True)
    if sink is not None:
        denominator = denominator + np.exp(sink - row_max)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(denominator > 0, (e @ v) / np.where(denominator > 0, denominator, 1.0), 0.0)
        lse = np.where(denominator > 0, row_max + np.log(denominator), -np.inf)[..., 0]
    return out, lse


def weights(q, k, **kwargs):
    """The softmax weights P (B, H, Sq, Sk) of the same call: exactly 0 for masked keys."""
    ones = np.eye(k.shape[2])[None, None].repeat(k.shape[0], 0).repeat(k.shape[1], 1)
    p, _ = attention(q, k, ones, **kwargs)
    return p


# Error bounds on |vkattn - reference| / max|V|, from the storage type's rounding of O (f32
# accumulation inside): f32 1e-5 as the C++ suite, f16 and bf16 a few units of their last place.
TOLERANCE = {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2}


def assert_close(actual, expected, v, dtype):
    actual = as_float64(actual)
    scale = max(np.abs(as_float64(v)).max(), 1e-30)
    error = np.abs(actual - expected).max() / scale if actual.size else 0.0
    assert np.all(np.isfinite(actual)), "non-finite output"
    assert error <= TOLERANCE[dtype], f"max error {error:.3g} (normalised by max|V|) above {TOLERANCE[dtype]} for {dtype}"
