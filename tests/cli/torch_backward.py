"""Attention's gradients by torch.autograd in float64, on a textbook attention written in torch ops
(no code shared with vkattn or with sdpa_backward.py): scores = scale * Q K^T (K and V repeated over
each GQA group with repeat_interleave, so autograd sums dK and dV over the group); softcap
c * tanh(scores / c); ALiBi -slope * |i + off - j| added; the float mask added; causal, the sliding
window, key lengths, the boolean mask and a float mask's -inf entries as masked_fill(-inf); sinks as
one more column of the scores, softmax over the row, the column dropped; a fully masked row's
weights set to 0; O = P V; then O.backward(dO).

available() says whether torch can be imported; torch_backward() needs it. K and V values that are
not finite must be replaced (by 0) before the call where no row sees them: autograd multiplies a
masked key's zero gradient by its NaN.
"""
import numpy as np

try:
    import torch
except ImportError:  # the callers skip what needs torch
    torch = None


def available():
    return torch is not None


def torch_backward(q, k, v, dout, *, causal="none", scale=None, mask=None, kv_lengths=None, window=None,
                   align=None, softcap=None, alibi=None, sinks=None):
    """Returns {dq, dk, dv, dsinks (None without sinks), out} as float64 numpy arrays; q (B,H,Sq,D),
    k (B,G,Sk,D), v (B,G,Sk,Dv), dout (B,H,Sq,Dv); the options as sdpa_reference.attention's."""
    batch, heads, seq_q, dim = q.shape
    kv_heads, seq_k = k.shape[1], k.shape[2]
    leaf = lambda x: torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)  # noqa: E731
    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    scale = float(np.float32(1.0 / np.sqrt(dim) if scale is None else scale))
    kk = tk.repeat_interleave(heads // kv_heads, dim=1)
    vv = tv.repeat_interleave(heads // kv_heads, dim=1)
    s = torch.matmul(tq, kk.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    off = 0 if (causal if causal != "none" else align) == "top-left" else seq_k - seq_q
    i = torch.arange(seq_q).view(seq_q, 1)
    j = torch.arange(seq_k).view(1, seq_k)
    if alibi is not None:
        slopes = torch.tensor(np.asarray(alibi, dtype=np.float64))
        slopes = slopes.view(1, heads, 1, 1) if slopes.dim() == 1 else slopes.view(batch, heads, 1, 1)
        s = s - slopes * (i + off - j).abs().to(s.dtype)
    hidden = torch.zeros(batch, heads, seq_q, seq_k, dtype=torch.bool)
    if mask is not None:
        m = torch.tensor(np.asarray(mask))
        m = m.view((1, 1) + tuple(m.shape)) if m.dim() == 2 else m
        if m.dtype == torch.bool:
            hidden |= ~m
        else:
            m = m.to(torch.float64)
            hidden |= m == float("-inf")
            s = s + torch.where(m == float("-inf"), torch.zeros_like(m), m)
    if causal == "top-left":
        hidden |= j > i
    elif causal == "bottom-right":
        hidden |= j > i + (seq_k - seq_q)
    if window is not None:
        left, right = window
        if left >= 0:
            hidden |= j < i + off - left
        if right >= 0:
            hidden |= j > i + off + right
    if kv_lengths is not None:
        hidden |= j.view(1, 1, 1, seq_k) >= torch.tensor(list(kv_lengths)).view(batch, 1, 1, 1)
    s = s.masked_fill(hidden, float("-inf"))
    ts = None
    if sinks is not None:
        ts = leaf(sinks)
        logits = torch.cat([s, ts.view(1, heads, 1, 1).expand(batch, heads, seq_q, 1)], dim=-1)
        p = torch.softmax(logits, dim=-1)[..., :seq_k]
    else:
        p = torch.softmax(s, dim=-1)
        empty = hidden.all(dim=-1, keepdim=True)  # NaN weights: 0 (masked_fill above stops their gradient)
        p = torch.where(empty, torch.zeros_like(p), p)
    out = torch.matmul(p, vv)
    out.backward(torch.tensor(np.asarray(dout, dtype=np.float64)))
    grads = {"dq": tq.grad, "dk": tk.grad, "dv": tv.grad, "dsinks": None if ts is None else ts.grad}
    result = {name: None if g is None else g.numpy() for name, g in grads.items()}
    result["out"] = out.detach().numpy()
    return result
