"""The multi-head layer's backward under torch.autograd: when the layer's query, key or value is a
torch tensor that requires grad, or its parameters are torch tensors that require grad (a state_dict
loaded from a module's named_parameters()), vkattn.MultiheadAttention runs as a
torch.autograd.Function whose backward is the library's (PreparedMhaBackward: the forward again,
keeping its intermediates, then every gradient with the device's GEMMs and attention's backward). The weights it returns, the masks and the scale get no gradient."""

import numpy as np

from ._arrays import _torch, is_torch_tensor


def needs_layer_grad(query, key, value, parameters):
    """Whether a call must build an autograd graph: grad mode on, and an input or a kept parameter is a
    torch tensor that requires grad."""
    torch = _torch()
    if torch is None or not torch.is_grad_enabled():
        return False
    return any(is_torch_tensor(t) and t.requires_grad for t in (query, key, value, *parameters.values()))


def _batch_first(layer, x, unbatched):
    """An input as the layer's (batch, seq, feature) float32 tensor, by differentiable torch ops."""
    x = _torch().as_tensor(x).float()
    if unbatched:
        return x[None]
    return x if layer.batch_first else x.transpose(0, 1)


def _parameter_gradient(name, grads):
    """The gradient of state_dict entry `name` from the library's (the projections separate)."""
    if name == "in_proj_weight":
        return np.concatenate([grads["q_proj_weight"], grads["k_proj_weight"], grads["v_proj_weight"]])
    return grads[name]


def layer_with_grad(layer, arrays, query, key, value, self_attention, unbatched, need_weights):
    """(out, per-head weights or None) in the layer's (batch, seq, E) layout, out with a grad_fn (the
    caller puts it in its own layout with torch ops, which autograd follows)."""
    names = list(layer._parameters)
    parameters = [layer._parameters[n] if is_torch_tensor(layer._parameters[n]) else None for n in names]
    inputs = [_batch_first(layer, query, unbatched)]
    inputs += [None, None] if self_attention else [_batch_first(layer, key, unbatched),
                                                   _batch_first(layer, value, unbatched)]
    out, weights = _function().apply(layer, arrays, names, need_weights, *inputs, *parameters)
    return out.to(query.dtype), (weights if need_weights else None)


_FUNCTION = None


def _function():
    """The torch.autograd.Function, made on first use (vkattn never imports torch itself)."""
    global _FUNCTION
    if _FUNCTION is not None:
        return _FUNCTION
    torch = _torch()

    class MultiheadAttentionFunction(torch.autograd.Function):
        @staticmethod
        def forward(fctx, layer, arrays, names, need_weights, query, key, value, *parameters):
            out, weights, load = layer._run_forward(arrays, need_weights)
            fctx.layer, fctx.arrays, fctx.names, fctx.load = layer, arrays, names, load
            fctx.dtypes = [None if p is None else p.dtype for p in parameters]
            weights = torch.from_numpy(weights) if weights is not None else torch.empty(0)
            fctx.mark_non_differentiable(weights)
            return torch.from_numpy(out), weights

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(fctx, grad_out, _):
            grad_out = np.ascontiguousarray(grad_out.float().numpy())
            grads = fctx.layer._run_backward(fctx.arrays, grad_out, fctx.load)
            inputs = [torch.from_numpy(grads["query"])]
            inputs += [torch.from_numpy(grads[n]) if n in grads else None for n in ("key", "value")]
            parameters = [None if dtype is None else torch.from_numpy(_parameter_gradient(n, grads)).to(dtype)
                          for n, dtype in zip(fctx.names, fctx.dtypes)]
            return (None, None, None, None, *inputs, *parameters)

    _FUNCTION = MultiheadAttentionFunction
    return _FUNCTION
