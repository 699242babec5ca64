"""An independent fp64 NumPy reference of attention's backward pass (docs/semantics.md, "Backward"),
derived from sdpa_reference.py's forward and sharing no code with the library.

For the loss L = sum(dO * O), with P the softmax weights of the forward (0 at masked keys and in a
fully masked row), s_raw = scale * q.k and the sink logit sigma_h of head h:

    D_i   = sum_d dO_id O_id
    dV_j  = sum_i P_ij dO_i
    dP_ij = dO_i . V_j
    dS_ij = P_ij (dP_ij - D_i) * (1 - tanh^2(s_raw_ij / c))      (the factor only with softcap c)
    dQ_i  = scale * sum_j dS_ij K_j
    dK_j  = scale * sum_i dS_ij Q_i
    dsigma_h = -sum_{b,i} exp(sigma_h - LSE_bhi) D_bhi

dK and dV of a KV head sum over the query heads of its group (GQA); ALiBi slopes, masks and the
scale get no gradient. A masked key gets nothing from a row, and contributes nothing to it: K and V
values that are not finite are allowed only at keys no row sees (they are read as 0 here; a visible
NaN is outside what this reference covers).

    sdpa_backward(q, k, v, dout, **forward options)           dense (B,H,Sq,D) / (B,G,Sk,D) / (B,G,Sk,Dv)
    varlen_backward(q, k, v, dout, cu_q, cu_k, **options)     packed (total, heads, dim), one dense call
                                                              per sequence, as the library's contract says
"""
import numpy as np

import sdpa_reference


def live_scores(q, k, *, causal="none", mask=None, kv_lengths=None, window=None, align=None):
    """(B, H, Sq, Sk) bool: the (row, key) pairs whose score enters the softmax: visible by the masks,
    and not -inf through a float mask."""
    batch, heads, seq_q, _ = q.shape
    seq_k = k.shape[2]
    bool_mask = mask if mask is not None and mask.dtype == np.bool_ else None
    live = sdpa_reference.visibility(batch, heads, seq_q, seq_k, causal, kv_lengths, bool_mask, window, align)
    if mask is not None and mask.dtype != np.bool_:
        live &= np.broadcast_to(sdpa_reference.as_4d(mask.astype(np.float64)), live.shape) != -np.inf
    return live


def sdpa_backward(q, k, v, dout, *, causal="none", scale=None, mask=None, kv_lengths=None, window=None, align=None,
                  softcap=None, alibi=None, sinks=None):
    """fp64 gradients of sum(dout * O) for the call sdpa_reference.attention(q, k, v, ...) computes.
    Inputs already rounded to the storage dtype. Returns a dict: dq, dk, dv (the shapes of q, k, v),
    dsinks ((H,), or None without sinks), and the forward's out and lse."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    dout = np.asarray(dout, dtype=np.float64)
    batch, heads, seq_q, dim = q.shape
    kv_heads, seq_k, dim_v = k.shape[1], k.shape[2], v.shape[3]
    group = heads // kv_heads
    assert dout.shape == (batch, heads, seq_q, dim_v), (dout.shape, (batch, heads, seq_q, dim_v))
    options = dict(causal=causal, mask=mask, kv_lengths=kv_lengths, window=window, align=align)
    out, lse, p = sdpa_reference.attention(q, k, v, scale=scale, weights=True, softcap=softcap, alibi=alibi,
                                           sinks=sinks, **options)
    scale = float(np.float32(1.0 / np.sqrt(dim) if scale is None else scale))  # as the forward rounds it

    live = live_scores(q, k, **options)
    # Keys no row of the group sees may hold anything (NaN, Inf): read them as 0. A non-finite value
    # that a live score reads is outside this reference.
    seen_key = live.reshape(batch, kv_heads, group, seq_q, seq_k).any(axis=(2, 3))  # (B, G, Sk)
    seen_row = live.any(axis=3)  # (B, H, Sq)
    for name, x, seen in (("k", k, seen_key), ("v", v, seen_key), ("q", q, seen_row)):
        bad = ~np.isfinite(x).all(axis=-1)
        if (bad & seen).any():
            raise ValueError(f"sdpa_backward: {name} holds a non-finite value that a visible score reads")
    k = np.where(np.isfinite(k), k, 0.0)
    v = np.where(np.isfinite(v), v, 0.0)
    q = np.where(np.isfinite(q), q, 0.0)

    kk = np.repeat(k, group, axis=1)
    vv = np.repeat(v, group, axis=1)
    d_row = np.einsum("bhid,bhid->bhi", dout, out)  # D = rowsum(dO * O): 0 in a fully masked row (O = 0)
    dp = np.einsum("bhid,bhjd->bhij", dout, vv)
    ds = np.where(live, p * (dp - d_row[..., None]), 0.0)
    if softcap is not None:
        s_raw = scale * np.einsum("bhid,bhjd->bhij", q, kk)
        ds = ds * (1.0 - np.tanh(s_raw / softcap) ** 2)
    dq = scale * np.einsum("bhij,bhjd->bhid", ds, kk)
    dk = (scale * np.einsum("bhij,bhid->bhjd", ds, q)).reshape(batch, kv_heads, group, seq_k, dim).sum(axis=2)
    dv = np.einsum("bhij,bhid->bhjd", p, dout).reshape(batch, kv_heads, group, seq_k, dim_v).sum(axis=2)
    dsinks = None
    if sinks is not None:
        sink = np.asarray(sinks, dtype=np.float64).reshape(1, heads, 1)
        p_sink = np.exp(sink - lse)  # every row has its sink: LSE is finite
        dsinks = -(p_sink * d_row).sum(axis=(0, 2))
    return {"dq": dq, "dk": dk, "dv": dv, "dsinks": dsinks, "out": out, "lse": lse}


def varlen_backward(q, k, v, dout, cu_q, cu_k, *, causal="none", scale=None, window=None, align=None, softcap=None,
                    alibi=None, sinks=None, backward=None):
    """Packed sequences: q (total_q, H, D), k (total_k, G, D), v (total_k, G, Dv), dout (total_q, H, Dv);
    sequence b is rows cu_q[b]..cu_q[b+1] against keys cu_k[b]..cu_k[b+1], each a dense call (alibi
    (B, H) takes its row b). Returns the dict of sdpa_backward in the packed layouts (out
    (total_q, H, Dv), lse (H, total_q)); dsinks sums over every sequence. `backward` is the dense
    function (default sdpa_backward; torch_backward.torch_backward takes the same arguments)."""
    backward = backward or sdpa_backward
    q, k, v, dout = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    heads = q.shape[1]
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    out = np.zeros(dout.shape)
    lse = np.full((heads, q.shape[0]), -np.inf)
    dsinks = None if sinks is None else np.zeros(heads)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if q1 == q0:
            continue
        if k1 == k0:  # no keys: O = 0 (D = 0), nothing to differentiate; LSE the sink or -inf
            if sinks is not None:
                lse[:, q0:q1] = np.asarray(sinks, dtype=np.float64)[:, None]
            continue
        slopes = alibi[b:b + 1] if alibi is not None and np.ndim(alibi) == 2 else alibi
        dense = backward(q[q0:q1].transpose(1, 0, 2)[None], k[k0:k1].transpose(1, 0, 2)[None],
                              v[k0:k1].transpose(1, 0, 2)[None], dout[q0:q1].transpose(1, 0, 2)[None],
                              causal=causal, scale=scale, window=window, align=align, softcap=softcap,
                              alibi=slopes, sinks=sinks)
        dq[q0:q1] = dense["dq"][0].transpose(1, 0, 2)
        dk[k0:k1] = dense["dk"][0].transpose(1, 0, 2)
        dv[k0:k1] = dense["dv"][0].transpose(1, 0, 2)
        out[q0:q1] = dense["out"][0].transpose(1, 0, 2)
        if "lse" in dense:
            lse[:, q0:q1] = dense["lse"][0]
        if sinks is not None:
            dsinks += dense["dsinks"]
    return {"dq": dq, "dk": dk, "dv": dv, "dsinks": dsinks, "out": out, "lse": lse}
