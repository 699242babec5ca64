"""vkattn.MultiheadAttention: torch.nn.MultiheadAttention's interface on vkattn's multi-head layer
(the C++ MultiHeadAttention, float32): the input projections, attention and the output projection
run on the Vulkan device. It takes nn.MultiheadAttention's state_dict, NumPy arrays or torch CPU
tensors, and (with torch tensors that require grad) runs the layer's backward on the device too
(_mha_autograd.py)."""

import numbers
import threading

import numpy as np

from . import _vkattn
from ._arrays import _torch, is_torch_tensor
from ._context import resolve
from ._errors import invalid
from ._mha_autograd import needs_layer_grad, layer_with_grad

# The state_dict's entries, in nn.MultiheadAttention's names: with kdim == vdim == embed_dim the
# projections are stacked in in_proj_weight (torch's _qkv_same_embed_dim), else they are separate.
_PACKED = ("in_proj_weight",)
_SEPARATE = ("q_proj_weight", "k_proj_weight", "v_proj_weight")
_BIASES = ("in_proj_bias", "out_proj.bias")


def _size(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if value <= 0:
        raise invalid(f"{name}: expected a positive size, got {value}")
    return int(value)


def _float32(name, x):
    """A state_dict entry or an input as a C-contiguous float32 NumPy array (a copy of a tensor)."""
    if is_torch_tensor(x):
        if x.device.type != "cpu":
            raise TypeError(f"{name}: a tensor on {x.device} (vkattn takes CPU tensors)")
        if not x.dtype.is_floating_point:
            raise TypeError(f"{name}: expected floating-point values, got {x.dtype}")
        return np.ascontiguousarray(x.detach().to(_torch().float32).numpy())
    if isinstance(x, np.ndarray):
        if x.dtype.kind != "f":
            raise TypeError(f"{name}: expected floating-point values, got dtype {x.dtype}")
        return np.ascontiguousarray(x, dtype=np.float32)
    raise TypeError(f"{name}: expected a NumPy array or a torch tensor, got {type(x).__name__}")


class MultiheadAttention:
    """torch.nn.MultiheadAttention on a Vulkan device: out = merge_heads(attention(x·Wqᵀ + bq,
    key·Wkᵀ + bk, value·Wvᵀ + bv))·Woᵀ + bo, float32.

    MultiheadAttention(embed_dim, num_heads, bias=True, kdim=None, vdim=None, batch_first=True, *,
    context=None): the sizes as PyTorch's (embed_dim % num_heads == 0; kdim and vdim the features of
    key and value, default embed_dim). batch_first=True (the default, unlike PyTorch's) takes
    (batch, seq, feature) inputs, False (seq, batch, feature). The weights start as PyTorch's do
    (Xavier-uniform projections, zero biases); load_state_dict(module.state_dict()) takes a
    PyTorch layer's. context: the vkattn.Context to run on (default: vkattn.default_context()).

    Differences from PyTorch: a query whose keys are all masked gives out_proj.bias (PyTorch: NaN);
    key_padding_mask is bool only; no add_bias_kv,
    add_zero_attn or dropout.
    """

    def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, batch_first=True, *, context=None):
        self.embed_dim = _size("embed_dim", embed_dim)
        self.num_heads = _size("num_heads", num_heads)
        self.kdim = self.embed_dim if kdim is None else _size("kdim", kdim)
        self.vdim = self.embed_dim if vdim is None else _size("vdim", vdim)
        for name, flag in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name}: expected a bool, got {type(flag).__name__}")
        self.bias = bias
        self.batch_first = batch_first
        self._context = resolve(context)
        # The layer's calls run one at a time: a call uploads the kept parameters' current values,
        # which another thread's call would otherwise read half-written.
        self._lock = threading.Lock()
        self._loads = 0  # load_state_dict calls: a backward must see its forward's weights
        self._parameters = self._initial_parameters()
        self._layer = _vkattn.MhaLayer(self._context, *self._sizes(), **self._weight_arrays())

    @property
    def head_dim(self):
        return self.embed_dim // self.num_heads

    def _packed(self):
        return self.kdim == self.embed_dim and self.vdim == self.embed_dim

    def _shapes(self):
        """Each state_dict entry's shape, in nn.MultiheadAttention's names."""
        e = self.embed_dim
        shapes = {"in_proj_weight": (3 * e, e)} if self._packed() else {
            "q_proj_weight": (e, e), "k_proj_weight": (e, self.kdim), "v_proj_weight": (e, self.vdim)}
        if self.bias:
            shapes["in_proj_bias"] = (3 * e,)
        shapes["out_proj.weight"] = (e, e)
        if self.bias:
            shapes["out_proj.bias"] = (e,)
        return shapes

    def _initial_parameters(self):
        rng = np.random.default_rng()
        parameters = {}
        for name, shape in self._shapes().items():
            if name.endswith("bias"):
                parameters[name] = np.zeros(shape, dtype=np.float32)
            elif name == "out_proj.weight":  # nn.Linear's default: U(-1/sqrt(in), 1/sqrt(in))
                bound = 1.0 / np.sqrt(shape[1])
                parameters[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
            else:  # Xavier-uniform, as nn.MultiheadAttention._reset_parameters (packed: over the stack)
                bound = np.sqrt(6.0 / (shape[0] + shape[1]))
                parameters[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
        return parameters

    def _sizes(self):
        return self.embed_dim, self.num_heads, self.kdim, self.vdim, self.bias

    def _weight_arrays(self):
        """The parameters as the module's layer takes them: float32, the projections separate."""
        p = {name: _float32(name, value) for name, value in self._parameters.items()}
        if self._packed():
            e = self.embed_dim
            q, k, v = p["in_proj_weight"][:e], p["in_proj_weight"][e:2 * e], p["in_proj_weight"][2 * e:]
        else:
            q, k, v = p["q_proj_weight"], p["k_proj_weight"], p["v_proj_weight"]
        return {"q_proj_weight": q, "k_proj_weight": k, "v_proj_weight": v, "in_proj_bias": p.get("in_proj_bias"),
                "out_proj_weight": p["out_proj.weight"], "out_proj_bias": p.get("out_proj.bias")}

    def state_dict(self):
        """The parameters in nn.MultiheadAttention's names, as float32 NumPy arrays (copies)."""
        return {name: _float32(name, value).copy() for name, value in self._parameters.items()}

    def load_state_dict(self, state_dict):
        """Takes nn.MultiheadAttention's state_dict (torch tensors or NumPy arrays), every entry of
        this layer's sizes (vkattn.Error naming a missing, unexpected or wrongly shaped one).

        Values are copied, except torch tensors that require grad (a module's parameters, e.g.
        dict(module.named_parameters())): those are kept, every call reads their current values,
        and backward accumulates their gradients into their .grad, as the module's own would."""
        if not hasattr(state_dict, "items"):
            raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
        shapes = self._shapes()
        for name in state_dict:
            if name not in shapes:
                raise invalid(f"state_dict: unexpected entry {name!r} (this layer has {', '.join(shapes)})")
        parameters = {}
        for name, shape in shapes.items():
            if name not in state_dict:
                raise invalid(f"state_dict: missing entry {name!r}")
            value = state_dict[name]
            values = _float32(f"state_dict[{name!r}]", value)  # its kind and dtype checked
            if values.shape != shape:
                raise invalid(f"state_dict[{name!r}]: expected shape {shape}, got {values.shape}")
            keep = is_torch_tensor(value) and value.requires_grad
            parameters[name] = value if keep else values.copy()
        with self._lock:
            self._parameters = parameters
            self._layer.set_weights(*self._sizes(), **self._weight_arrays())
            self._loads += 1

    def __call__(self, query, key=None, value=None, key_padding_mask=None, need_weights=True, attn_mask=None,
                 average_attn_weights=True, is_causal=False):
        """(out, weights) as nn.MultiheadAttention's forward returns them.

        query (batch, seq_q, E) (batch_first=False: (seq_q, batch, E); unbatched: (seq_q, E)); key
        (.., seq_k, kdim) and value (.., seq_k, vdim), default query (self-attention). NumPy arrays
        or torch CPU tensors of a float dtype, computed in float32; out is of query's kind and dtype.
        key_padding_mask: bool (batch, seq_k), True = ignore that key. attn_mask: (seq_q, seq_k) or
        (batch * num_heads, seq_q, seq_k), bool (True = NOT allowed, PyTorch's convention here) or
        float (added to the scores).
        need_weights: also return the softmax weights, float32 (batch, seq_q, seq_k) averaged over
        heads, or (batch, num_heads, seq_q, seq_k) with average_attn_weights=False; else None.
        is_causal: top-left causal masking (key j visible to query i when j <= i).
        """
        for name, flag in (("need_weights", need_weights), ("average_attn_weights", average_attn_weights),
                           ("is_causal", is_causal)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name}: expected a bool, got {type(flag).__name__}")
        if not (is_torch_tensor(query) or isinstance(query, np.ndarray)):
            raise TypeError(f"query: expected a NumPy array or a torch tensor, got {type(query).__name__}")
        kind = "torch" if is_torch_tensor(query) else "numpy"
        self_attention = (key is None and value is None) or (key is query and value is query)
        if key is None and value is None:
            key = value = query
        if key is None or value is None:
            raise invalid("key and value: give both or neither")
        unbatched = len(query.shape) == 2
        if len(query.shape) not in (2, 3):
            raise invalid(f"query: expected 2 or 3 dimensions, got shape {tuple(query.shape)}")

        def batch_first(name, x):  # an input as the layer's (batch, seq, feature) float32 array
            array = _float32(name, x)
            if array.ndim != len(query.shape):
                raise invalid(f"{name}: expected {len(query.shape)} dimensions as query, got shape {array.shape}")
            if unbatched:
                return array[None]
            return array if self.batch_first else np.ascontiguousarray(array.transpose(1, 0, 2))

        q = batch_first("query", query)
        k, v = (q, q) if self_attention else (batch_first("key", key), batch_first("value", value))
        self._check_features(q, k, v)
        arrays = {"query": q, "key": None if self_attention else k, "value": None if self_attention else v,
                  "mask": self._mask(key_padding_mask, attn_mask, q.shape[0], q.shape[1], k.shape[1], unbatched),
                  "causal": "top-left" if is_causal else "none"}
        if kind == "torch" and needs_layer_grad(query, key, value, self._parameters):
            out, weights = layer_with_grad(self, arrays, query, key, value, self_attention, unbatched, need_weights)
        else:
            out, weights, _ = self._run_forward(arrays, need_weights)
            if kind == "torch":
                torch = _torch()
                out = torch.from_numpy(out).to(query.dtype)
                weights = None if weights is None else torch.from_numpy(weights)
            else:
                out = out.astype(query.dtype, copy=False)
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)  # over the heads, in float32 as PyTorch averages
        if unbatched:
            return out[0], None if weights is None else weights[0]
        if not self.batch_first:
            out = out.transpose(0, 1) if kind == "torch" else out.transpose(1, 0, 2)
        return out, weights

    forward = __call__

    def _refresh_kept_parameters(self):
        if any(is_torch_tensor(p) for p in self._parameters.values()):
            self._layer.set_weights(*self._sizes(), **self._weight_arrays())  # their current values

    def _run_forward(self, arrays, need_weights):
        """(out, per-head weights or None, the load it ran with) from the module's layer."""
        with self._lock:
            self._refresh_kept_parameters()
            return (*self._layer.forward(**arrays, need_weights=need_weights), self._loads)

    def _run_backward(self, arrays, grad_out, load):
        """Every gradient of a call that ran with weights `load` (its forward's)."""
        with self._lock:
            if load != self._loads:
                raise RuntimeError("vkattn.MultiheadAttention: load_state_dict was called between a forward and "
                                   "its backward; the backward needs the forward's weights")
            self._refresh_kept_parameters()
            return self._layer.backward(**arrays, grad_out=grad_out)

    def _check_features(self, q, k, v):
        """The inputs' feature sizes and the key's and value's batch and length must be the layer's."""
        for name, array, features in (("query", q, self.embed_dim), ("key", k, self.kdim), ("value", v, self.vdim)):
            if array.shape[2] != features:
                raise invalid(f"{name}: expected {features} features (the last dimension), got shape {array.shape}")
        if k.shape[:2] != v.shape[:2] or k.shape[0] != q.shape[0]:
            raise invalid(f"key and value: expected batch {q.shape[0]} and one length, got shapes {k.shape} and "
                          f"{v.shape}")

    def _mask(self, key_padding_mask, attn_mask, batch, seq_q, seq_k, unbatched):
        """key_padding_mask and attn_mask merged into the one mask the layer takes: additive float32
        (batch | 1, num_heads | 1, seq_q, seq_k), -inf where a key is masked; None without either."""
        merged = None
        if key_padding_mask is not None:
            padding = _mask_values("key_padding_mask", key_padding_mask, bool_only=True)
            if padding.shape != ((seq_k,) if unbatched else (batch, seq_k)):
                raise invalid(f"key_padding_mask: expected shape (batch, seq_k) = ({batch}, {seq_k}), got "
                              f"{padding.shape}")
            merged = padding.reshape(batch, 1, 1, seq_k)
        if attn_mask is not None:
            mask = _mask_values("attn_mask", attn_mask, bool_only=False)
            heads = self.num_heads
            if mask.shape == (seq_q, seq_k):
                mask = mask[None, None]
            elif mask.shape == (batch * heads, seq_q, seq_k) or (unbatched and mask.shape == (heads, seq_q, seq_k)):
                mask = mask.reshape(batch, heads, seq_q, seq_k)
            else:
                raise invalid(f"attn_mask: expected shape (seq_q, seq_k) = ({seq_q}, {seq_k}) or (batch * num_heads, "
                              f"seq_q, seq_k) = ({batch * heads}, {seq_q}, {seq_k}), got {mask.shape}")
            merged = mask if merged is None else merged + mask
        if merged is None:
            return None
        # Rows broadcast over queries (key padding alone) are read with stride 0, not copied.
        merged = np.ascontiguousarray(merged, dtype=np.float32)
        return np.broadcast_to(merged, (*merged.shape[:2], seq_q, seq_k))


def _mask_values(name, mask, bool_only):
    """A mask as additive float32 values: bool True (PyTorch's "not allowed" for this layer) is -inf."""
    array = mask.detach().numpy() if is_torch_tensor(mask) else np.asarray(mask)
    if array.dtype == np.bool_:
        return np.where(array, -np.inf, 0.0).astype(np.float32)
    if bool_only or array.dtype.kind != "f":
        expected = "bool" if bool_only else "bool or float"
        raise TypeError(f"{name}: expected {expected} values, got dtype {array.dtype}")
    return array.astype(np.float32)
