"""An independent fp64 NumPy reference of torch.nn.MultiheadAttention(batch_first=True), as vkattn
defines it (the contract: docs/semantics.md), for checking `vkattn mha` with code that shares nothing with the library:

    Q = query·Wqᵀ + bq,  K = key·Wkᵀ + bk,  V = value·Wvᵀ + bv          (heads split: E/H features each)
    A[b,h] = softmax(Q[b,h]·K[b,g(h)]ᵀ / sqrt(E/H) + attn_mask, masked) · V[b,g(h)]
    out = merge_heads(A)·Woᵀ + bo

with g(h) = h // (H // kv_heads) (vkattn's grouped-query extension; kv_heads = H is torch's layer);
key_padding_mask nonzero = ignore the key; a bool attn_mask True = not allowed (torch's layer), a
float one added (-inf masks); causal top-left (j <= i) or bottom-right (j <= i + Sk - Sq).
Where vkattn differs from torch on purpose: a query row with every key masked gives an attention
output of 0 (so the layer output is out_proj.bias) and all-zero weights, where torch gives NaN.

vkattn's score modifiers (docs/semantics.md, "Score modifiers"), which torch's layer lacks: with the diagonal
offset off = 0 (top-left) or Sk - Sq (bottom-right; causal's alignment when causal is set, else
`align`, default bottom-right), the score s = scale·q·k becomes c·tanh(s/c) (softcap c), then
s - slope[h]·|i + off - j| (state_dict 'alibi_slopes'), then s + attn_mask; a window (L, R) hides
keys outside i + off - L <= j <= i + off + R (-1: that side unbounded); the sink logit of head h
(state_dict 'sinks') joins each row's softmax denominator as e^sink, with no value.
"""
import numpy as np


def state_dict(rng, embed, heads, kv_heads=None, kdim=None, vdim=None, bias=True):
    """Random weights named and shaped as torch's state_dict: the packed in_proj_weight when
    kdim == vdim == embed and kv_heads == heads, else q/k/v_proj_weight."""
    kv_heads = kv_heads or heads
    kdim = kdim or embed
    vdim = vdim or embed
    kvd = kv_heads * (embed // heads)

    def uniform(*shape, fan_in):
        return rng.uniform(-1.0, 1.0, shape).astype(np.float32) / np.float32(np.sqrt(fan_in))

    d = {}
    if kdim == vdim == embed and kv_heads == heads:
        d["in_proj_weight"] = uniform(3 * embed, embed, fan_in=embed)
    else:
        d["q_proj_weight"] = uniform(embed, embed, fan_in=embed)
        d["k_proj_weight"] = uniform(kvd, kdim, fan_in=kdim)
        d["v_proj_weight"] = uniform(kvd, vdim, fan_in=vdim)
    d["out_proj.weight"] = uniform(embed, embed, fan_in=embed)
    if bias:
        d["in_proj_bias"] = rng.uniform(-0.5, 0.5, embed + 2 * kvd).astype(np.float32)
        d["out_proj.bias"] = rng.uniform(-0.5, 0.5, embed).astype(np.float32)
    return d


def split_weights(d, embed, heads, kv_heads):
    """(Wq, Wk, Wv, bq, bk, bv, Wo, bo) in float64 from a state_dict (biases None when absent)."""
    kvd = kv_heads * (embed // heads)
    if "in_proj_weight" in d:
        w = d["in_proj_weight"].astype(np.float64)
        wq, wk, wv = w[:embed], w[embed:2 * embed], w[2 * embed:]
    else:
        wq, wk, wv = (d[n].astype(np.float64) for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"))
    if "in_proj_bias" in d:
        b = d["in_proj_bias"].astype(np.float64)
        bq, bk, bv = b[:embed], b[embed:embed + kvd], b[embed + kvd:]
        bo = d["out_proj.bias"].astype(np.float64)
    else:
        bq = bk = bv = bo = None
    return wq, wk, wv, bq, bk, bv, d["out_proj.weight"].astype(np.float64), bo


def linear(x, w, b):
    y = x @ w.T
    return y if b is None else y + b


def _forward(d, query, key, value, *, heads, kv_heads=None, causal="none", key_padding_mask=None,
             attn_mask=None, window=None, align=None, softcap=None):
    """The forward's intermediates, float64, as a dict (multi_head_attention and its backward)."""
    self_attention = key is None
    query = np.asarray(query, np.float64)
    key = query if key is None else np.asarray(key, np.float64)
    value = query if value is None else np.asarray(value, np.float64)
    embed = d["out_proj.weight"].shape[0]
    kv_heads = kv_heads or heads
    head_dim = embed // heads
    batch, seq_q, _ = query.shape
    seq_k = key.shape[1]
    wq, wk, wv, bq, bk, bv, wo, bo = split_weights(d, embed, heads, kv_heads)

    q = linear(query, wq, bq).reshape(batch, seq_q, heads, head_dim).transpose(0, 2, 1, 3)
    k = linear(key, wk, bk).reshape(batch, seq_k, kv_heads, head_dim).transpose(0, 2, 1, 3)
    v = linear(value, wv, bv).reshape(batch, seq_k, kv_heads, head_dim).transpose(0, 2, 1, 3)
    k = np.repeat(k, heads // kv_heads, axis=1)
    v = np.repeat(v, heads // kv_heads, axis=1)

    raw = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
    scores = raw
    visible = np.ones((batch, heads, seq_q, seq_k), bool)
    i = np.arange(seq_q)[:, None]
    j = np.arange(seq_k)[None, :]
    if causal == "top-left":
        visible &= j <= i
    elif causal == "bottom-right":
        visible &= j <= i + seq_k - seq_q
    top_left = causal == "top-left" or (causal == "none" and align == "top-left")
    off = 0 if top_left else seq_k - seq_q
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)
    if "alibi_slopes" in d:
        slopes = d["alibi_slopes"].astype(np.float64)
        scores = scores - slopes[None, :, None, None] * np.abs(i + off - j)[None, None]
    if window is not None:
        left, right = window
        if left >= 0:
            visible &= j >= i + off - left
        if right >= 0:
            visible &= j <= i + off + right
    if key_padding_mask is not None:
        visible &= ~np.asarray(key_padding_mask, bool)[:, None, None, :]
    if attn_mask is not None:
        attn_mask = np.asarray(attn_mask)
        if attn_mask.dtype == np.bool_:
            visible &= ~attn_mask
        else:
            scores = scores + attn_mask.astype(np.float64)
    scores = np.where(visible, scores, -np.inf)

    row_max = scores.max(axis=-1, keepdims=True)
    empty = row_max == -np.inf
    sink = None
    if "sinks" in d:
        sink = d["sinks"].astype(np.float64)[None, :, None, None]
        row_max = np.maximum(row_max, sink)
    p = np.exp(scores - np.where(empty, 0.0, row_max))
    denominator = p.sum(axis=-1, keepdims=True)
    if sink is not None:
        denominator = denominator + np.exp(sink - row_max)
    p = np.where(empty, 0.0, p / np.where(empty, 1.0, denominator))
    attn = (p @ v).transpose(0, 2, 1, 3).reshape(batch, seq_q, embed)
    sink_p = None if sink is None else np.where(empty, 0.0, np.exp(sink - row_max) / np.where(empty, 1.0, denominator))
    return dict(query=query, key=key, value=value, self_attention=self_attention, q=q, k=k, v=v, raw=raw, p=p,
                sink_p=sink_p, attn=attn, out=linear(attn, wo, bo), weights=(wq, wk, wv, bq, bk, bv, wo, bo),
                heads=heads, kv_heads=kv_heads, head_dim=head_dim, softcap=softcap)


def multi_head_attention(d, query, key, value, **options):
    """Returns (out (B,Sq,E), weights (B,H,Sq,Sk)) in float64. key/value None: self-attention. Options:
    heads, kv_heads, causal, key_padding_mask, attn_mask, window, align, softcap."""
    f = _forward(d, query, key, value, **options)
    return f["out"], f["p"]


def multi_head_attention_backward(d, query, key, value, grad_out, **options):
    """The gradients of sum(grad_out * out), float64: {state_dict name: its gradient} (in_proj_weight
    when d has it, else q/k/v_proj_weight; the biases when d has them; sinks when d has them; no
    alibi_slopes), plus "query" and, for cross-attention, "key" and "value" (self-attention: the
    whole input's gradient is "query's")."""
    f = _forward(d, query, key, value, **options)
    wq, wk, wv, bq, bk, bv, wo, bo = f["weights"]
    heads, kv_heads, head_dim = f["heads"], f["kv_heads"], f["head_dim"]
    group = heads // kv_heads
    dy = np.asarray(grad_out, np.float64)
    batch, seq_q, embed = dy.shape
    g = {"out_proj.weight": np.einsum("bso,bsc->oc", dy, f["attn"])}
    if bo is not None:
        g["out_proj.bias"] = dy.sum(axis=(0, 1))
    da = (dy @ wo).reshape(batch, seq_q, heads, head_dim).transpose(0, 2, 1, 3)
    p, v, k, q = f["p"], f["v"], f["k"], f["q"]
    dp = da @ v.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ da
    row = (p * dp).sum(axis=-1, keepdims=True)
    ds = p * (dp - row)
    if f["sink_p"] is not None:  # the sink's weight has no value: d/dsink = -p_sink * sum_j p_j dp_j
        g["sinks"] = (-f["sink_p"] * row).sum(axis=(0, 2, 3))
    if f["softcap"] is not None:
        ds = ds * (1.0 - np.tanh(f["raw"] / f["softcap"]) ** 2)
    ds = ds / np.sqrt(head_dim)
    dq = ds @ k
    dk = ds.transpose(0, 1, 3, 2) @ q

    def merge(x, n):  # (B, n·group, S, D) summed over each KV head's group -> (B, S, n·D)
        x = x.reshape(batch, n, x.shape[1] // n, x.shape[2], head_dim).sum(axis=2)
        return x.transpose(0, 2, 1, 3).reshape(batch, x.shape[2], n * head_dim)

    d_q, d_k, d_v = merge(dq, heads), merge(dk, kv_heads), merge(dv, kv_heads)
    grads = []
    for dx, x, w in ((d_q, f["query"], wq), (d_k, f["key"], wk), (d_v, f["value"], wv)):
        grads.append((np.einsum("bso,bsf->of", dx, x), dx.sum(axis=(0, 1)), dx @ w))
    if "in_proj_weight" in d:
        g["in_proj_weight"] = np.concatenate([gw for gw, _, _ in grads])
    else:
        g["q_proj_weight"], g["k_proj_weight"], g["v_proj_weight"] = (gw for gw, _, _ in grads)
    if bq is not None:
        g["in_proj_bias"] = np.concatenate([gb for _, gb, _ in grads])
    if f["self_attention"]:
        g["query"] = grads[0][2] + grads[1][2] + grads[2][2]
    else:
        g["query"], g["key"], g["value"] = (gx for _, _, gx in grads)
    return g
