"""Textbook attention in float64 torch, differentiable: the yardstick of vkattn's gradients
(tests/python/test_autograd.py). Written from the formula of docs/semantics.md as reference.py is, with
vkattn's conventions: a row whose keys are all masked gives 0, and no step ever makes a NaN (torch's
own softmax of an all -inf row would, and its gradient with it)."""

import torch


def attention(q, k, v, *, mask=None, scale=None, causal=None, window=None, softcap=None, alibi=None, sinks=None,
              dropout=None):
    """q (B, H, Sq, D), k (B, G, Sk, D), v (B, G, Sk, Dv) float64 tensors (H % G == 0). mask: bool
    (True = attend) or float (added); causal None, "top-left" or "bottom-right" (the window and ALiBi
    align like it, else bottom-right); sinks (H) logits; dropout: a (B, H, Sq, Sk) factor Z applied
    to the weights. Returns out (B, H, Sq, Dv)."""
    batch, heads, seq_q, dim = q.shape
    seq_k = k.shape[2]
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = dim ** -0.5 if scale is None else scale
    s = scale * q @ k.transpose(-1, -2)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    off = seq_k - seq_q if (causal or "bottom-right") == "bottom-right" else 0
    i = torch.arange(seq_q)[:, None]
    j = torch.arange(seq_k)[None, :]
    if alibi is not None:
        s = s - alibi.to(torch.float64)[..., None, None] * (i + off - j).abs()
    visible = torch.ones(batch, heads, seq_q, seq_k, dtype=torch.bool)
    if mask is not None:
        if mask.dtype == torch.bool:
            visible = visible & mask
        else:
            s = s + mask.to(torch.float64)
    if causal is not None:
        visible = visible & (j <= i + off)
    if window is not None:
        left, right = window
        if left >= 0:
            visible = visible & (j >= i + off - left)
        if right >= 0:
            visible = visible & (j <= i + off + right)
    # The row maximum only shifts the exponent (softmax does not depend on it): no gradient needed.
    row_max = torch.where(visible, s, torch.tensor(-torch.inf, dtype=s.dtype)).amax(-1, keepdim=True).detach()
    if sinks is not None:
        row_max = torch.maximum(row_max, sinks.detach().to(torch.float64)[:, None, None])
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.where(visible, torch.exp(torch.where(visible, s, torch.zeros_like(s)) - row_max), torch.zeros_like(s))
    denominator = e.sum(-1, keepdim=True)
    if sinks is not None:
        denominator = denominator + torch.exp(sinks.to(torch.float64)[:, None, None] - row_max)
    p = e / torch.where(denominator > 0, denominator, torch.ones_like(denominator))
    if dropout is not None:
        p = p * dropout
    return p @ v
