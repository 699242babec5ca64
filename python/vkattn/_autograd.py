"""vkattn's backward pass under torch.autograd.

When a torch tensor given to scaled_dot_product_attention, flash_attn_func or
flash_attn_varlen_func requires grad (Q, K, V, or the sinks) and grad mode is on, the call runs as a
torch.autograd.Function: its forward is the same vkattn call, asked for the log-sum-exp too, and its
backward is vkattn's (PreparedAttentionBackward): dQ, dK, dV (a GQA group's dK and dV summed by the
library) and d(sinks), from the forward's inputs, O and LSE, which the Function keeps. With dropout
the backward regenerates the forward's mask from the forward's seed (vkattn's dropout is a counter
based generator, so the mask is never stored). Masks, ALiBi slopes and the scale get no gradient, and
neither do the LSE and the weights a call returns (they are marked non-differentiable). Without a
tensor that requires grad, none of this runs and a call costs what it did.
"""

from . import _vkattn
from ._arrays import _torch, float32_values, is_torch_tensor


def needs_grad(*tensors):
    """Whether a call with these arguments must build an autograd graph: grad mode is on and one of
    them is a torch tensor that requires grad."""
    torch = _torch()
    if torch is None or not torch.is_grad_enabled():
        return False
    return any(is_torch_tensor(t) and t.requires_grad for t in tensors)


def _numpy(tensor):
    """A contiguous CPU tensor's memory as NumPy (a bf16 tensor's bits as int16, as the module takes it)."""
    torch = _torch()
    return tensor.view(torch.int16).numpy() if tensor.dtype == torch.bfloat16 else tensor.numpy()


# How each call's tensors, in their caller's layout, are seen as the (batch, heads, seq, dim) arrays
# the module reads: PyTorch's are that layout; FlashAttention's (batch, seq, heads, dim) are a
# transposed view; a packed (total, heads, dim) tensor is a (1, heads, total, dim) view.
_VIEWS = {
    "bhsd": lambda a: a,
    "bshd": lambda a: a.transpose(0, 2, 1, 3),
    "packed": lambda a: a[None].transpose(0, 2, 1, 3),
}


class AttentionCall:
    """One attention call's arguments besides Q, K, V, in the module's form, kept for its backward.

    layout: "bhsd", "bshd" or "packed" (then `packed` is (cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    max_seqlen_k) as the module takes them). mask: the module's mask array (dense calls). alibi,
    sinks: the caller's per-head tensors. weights: also return the softmax weights. options: scale,
    causal, window, softcap, dropout_p, dropout_seed as the module takes them.
    """

    def __init__(self, context, dtype, layout, *, mask=None, alibi=None, sinks=None, packed=None, weights=False,
                 **options):
        self.context = context
        self.dtype = dtype
        self.layout = layout
        self.view = _VIEWS[layout]
        self.mask = mask
        self.alibi = None if alibi is None else float32_values("alibi_slopes", alibi)
        self.sinks = None if sinks is None else float32_values("sinks", sinks)
        self.packed = packed
        self.weights = weights
        self.options = options

    def apply(self, query, key, value, sinks):
        """(out, lse) or, with weights, (out, lse, weights): torch tensors, out with a grad_fn."""
        return _Attention.apply(self, query, key, value, sinks if is_torch_tensor(sinks) else None)

    def lse_shape(self, q):
        if self.layout == "bhsd":
            return q.shape[:3]
        if self.layout == "bshd":
            return (q.shape[0], q.shape[2], q.shape[1])
        return (q.shape[1], q.shape[0])

    def weights_shape(self, q, k):
        if self.layout == "bhsd":
            return (*q.shape[:3], k.shape[2])
        if self.layout == "bshd":
            return (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
        return (q.shape[1], q.shape[0], k.shape[0])

    def _per_head(self):
        return {"alibi": self.alibi, "sinks": self.sinks, **self.options}

    def forward(self, q, k, v, out, lse, weights):
        """Runs the forward on contiguous tensors, writing out, lse and weights (or None)."""
        arrays = [self.view(_numpy(t)) for t in (q, k, v, out)]
        outputs = {"lse": lse.numpy(), "weights": None if weights is None else weights.numpy()}
        if self.packed is None:
            _vkattn.attention(self.context, *arrays, self.dtype, mask=self.mask, **outputs, **self._per_head())
        else:
            _vkattn.varlen_attention(self.context, *arrays, self.dtype, *self.packed, **outputs, **self._per_head())

    def backward(self, q, k, v, out, lse, grad_out, grad_q, grad_k, grad_v, grad_sinks):
        """Runs vkattn's backward on contiguous tensors, writing the gradients."""
        arrays = [self.view(_numpy(t)) for t in (q, k, v, out)]
        arrays.append(lse.numpy())
        arrays += [self.view(_numpy(t)) for t in (grad_out, grad_q, grad_k, grad_v)]
        sinks = {"grad_sinks": None if grad_sinks is None else grad_sinks.numpy()}
        if self.packed is None:
            _vkattn.attention_backward(self.context, *arrays, self.dtype, mask=self.mask, **sinks, **self._per_head())
        else:
            _vkattn.varlen_attention_backward(self.context, *arrays, self.dtype, *self.packed, **sinks,
                                              **self._per_head())


def _function_class():
    """The torch.autograd.Function, defined on first use: vkattn never imports torch itself."""
    torch = _torch()

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(fctx, call, query, key, value, sinks):
            # Contiguous copies where the caller's views are not: the gradients are written at
            # these tensors' layouts, which are then plain ones.
            q, k, v = (t.detach().contiguous() for t in (query, key, value))
            out = torch.empty((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)
            lse = torch.empty(call.lse_shape(q), dtype=torch.float32)
            weights = torch.empty(call.weights_shape(q, k), dtype=torch.float32) if call.weights else None
            call.forward(q, k, v, out, lse, weights)
            fctx.call = call
            fctx.sinks_dtype = None if sinks is None else sinks.dtype
            fctx.save_for_backward(q, k, v, out, lse)
            if weights is None:
                fctx.mark_non_differentiable(lse)
                return out, lse
            fctx.mark_non_differentiable(lse, weights)  # one call: each replaces the last one's marks
            return out, lse, weights

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(fctx, grad_out, *_):  # the LSE's and weights' gradients: not differentiable
            q, k, v, out, lse = fctx.saved_tensors
            call = fctx.call
            grad_out = grad_out.to(out.dtype).contiguous()
            grad_q, grad_k, grad_v = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            grad_sinks = None if call.sinks is None else torch.empty(call.sinks.shape, dtype=torch.float32)
            call.backward(q, k, v, out, lse, grad_out, grad_q, grad_k, grad_v, grad_sinks)
            if fctx.sinks_dtype is not None:
                grad_sinks = grad_sinks.to(fctx.sinks_dtype)
            else:
                grad_sinks = None
            return None, grad_q, grad_k, grad_v, grad_sinks

    return Attention


class _LazyFunction:
    """_Attention.apply, with the Function class made when torch is first needed."""

    _cls = None

    def apply(self, *args):
        if _LazyFunction._cls is None:
            _LazyFunction._cls = _function_class()
        return _LazyFunction._cls.apply(*args)


_Attention = _LazyFunction()
