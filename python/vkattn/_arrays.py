"""NumPy arrays and torch CPU tensors in, NumPy views that the extension module reads in place out.

The module takes arrays whose strides vkattn's layouts can say (non-negative, whole elements, the
last dimension contiguous). Any other view — a transpose that moves the last axis, a Fortran-ordered
array, a negative step — is copied here to C order, so it is never misread. Outputs are allocated
here as the caller's kind (NumPy or torch) and dtype, and written by the module in place.
"""

import sys

import numpy as np

from ._device_array import DeviceArray, empty, vk_dtype
from ._errors import invalid

# vkattn's dtype names of the storage types a tensor may have.
_NUMPY_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
# A strided view whose memory span is more than this many times its elements is copied rather than
# uploaded whole (a slice every 100th row would otherwise send 100x its bytes to the device).
_MAX_SPAN_RATIO = 4


def _torch():
    """The torch module when the caller has imported it (vkattn never imports torch itself)."""
    return sys.modules.get("torch")


def is_torch_tensor(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_dtypes(torch):
    return {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


class HostTensor:
    """One input tensor: `array` is a NumPy view of its memory (a bf16 tensor's as int16), `dtype` its
    vkattn dtype name ("f32", "f16", "bf16") and `kind` "numpy" or "torch"."""

    def __init__(self, array, dtype, kind):
        self.array = array
        self.dtype = dtype
        self.kind = kind

    @property
    def shape(self):
        return self.array.shape


def host_tensor(name, x):
    """`x` (a NumPy array of float32 or float16, or a torch CPU tensor of float32, float16 or
    bfloat16) as a HostTensor; a DeviceArray as one of kind "device" (`array` the DeviceArray);
    TypeError for anything else."""
    if isinstance(x, DeviceArray):
        return HostTensor(x, vk_dtype(x), "device")
    if isinstance(x, np.ndarray):
        dtype = _NUMPY_DTYPES.get(x.dtype)
        if dtype is None:
            raise TypeError(f"{name}: NumPy dtype {x.dtype} is not supported (float32 or float16)")
        return HostTensor(x, dtype, "numpy")
    if is_torch_tensor(x):
        torch = _torch()
        if x.device.type != "cpu":
            raise TypeError(f"{name}: a tensor on {x.device} (vkattn takes CPU tensors; move it with .cpu())")
        dtype = _torch_dtypes(torch).get(x.dtype)
        if dtype is None:
            raise TypeError(f"{name}: torch dtype {x.dtype} is not supported (float32, float16 or bfloat16)")
        x = x.detach()
        # NumPy has no bfloat16: its bits travel as int16, and the module is told the dtype.
        array = x.view(torch.int16).numpy() if dtype == "bf16" else x.numpy()
        return HostTensor(array, dtype, "torch")
    raise TypeError(f"{name}: expected a NumPy array or a torch tensor, got {type(x).__name__}")


def same_kind_and_dtype(tensors):
    """Q, K and V must be of one kind and one dtype (TypeError otherwise)."""
    first_name, first = tensors[0]
    for name, t in tensors[1:]:
        if t.kind != first.kind:
            raise TypeError(f"{name} is a {t.kind} array but {first_name} is a {first.kind} array")
        if t.dtype != first.dtype:
            raise TypeError(f"{name}.dtype ({t.dtype}) must equal {first_name}.dtype ({first.dtype})")


def layout_ready(array):
    """`array` itself when vkattn can read it in place, else a C-ordered copy (a DeviceArray as it is:
    the module says what it cannot read)."""
    if isinstance(array, DeviceArray) or array.size == 0:
        return array
    itemsize = array.itemsize
    span = 1
    for size, stride in zip(array.shape, array.strides):
        if size > 1:
            if stride < 0 or stride % itemsize:
                return np.ascontiguousarray(array)
            span += (size - 1) * (stride // itemsize)
    if array.shape[-1] > 1 and array.strides[-1] != itemsize:
        return np.ascontiguousarray(array)
    if span > _MAX_SPAN_RATIO * array.size:
        return np.ascontiguousarray(array)
    return array


def new_output(kind, dtype, shape, context=None):
    """A new output of `kind` and vkattn dtype `dtype` ("f32", "f16", "bf16"): (what the caller gets,
    the NumPy view or DeviceArray (on `context`) the module writes)."""
    if kind == "device":
        array = empty(shape, dtype, context)
        return array, array
    if kind == "torch":
        torch = _torch()
        torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        tensor = torch.empty(shape, dtype=torch_dtype)
        return tensor, (tensor.view(torch.int16).numpy() if dtype == "bf16" else tensor.numpy())
    array = np.empty(shape, dtype={"f32": np.float32, "f16": np.float16}[dtype])
    return array, array


def float32_values(name, x):
    """A per-head tensor (ALiBi slopes, sinks) as a C-contiguous float32 NumPy array."""
    if is_torch_tensor(x):
        torch = _torch()
        if x.device.type != "cpu":
            raise TypeError(f"{name}: a tensor on {x.device} (vkattn takes CPU tensors)")
        return np.ascontiguousarray(x.detach().to(torch.float32).numpy())
    if isinstance(x, (np.ndarray, list, tuple)):
        array = np.asarray(x)
        if array.dtype.kind not in "fiu":
            raise TypeError(f"{name}: expected numbers, got dtype {array.dtype}")
        return np.ascontiguousarray(array, dtype=np.float32)
    raise TypeError(f"{name}: expected a NumPy array, a torch tensor or a list, got {type(x).__name__}")


def mask_array(mask, batch, heads, seq_q, seq_k):
    """An attention mask (bool: True = attend; float: added to the scores) broadcast to
    (batch | 1, heads | 1, seq_q, seq_k) as vkattn takes it, without copying where NumPy's broadcast
    suffices (vkattn reads broadcast rows with stride 0)."""
    if is_torch_tensor(mask):
        torch = _torch()
        if mask.device.type != "cpu":
            raise TypeError(f"attn_mask: a tensor on {mask.device} (vkattn takes CPU tensors)")
        mask = mask.detach()
        if mask.dtype in (torch.bfloat16, torch.float64):
            mask = mask.to(torch.float32)  # bf16 values are exact in f32
        if mask.dtype not in (torch.bool, torch.float32, torch.float16):
            raise TypeError(f"attn_mask: torch dtype {mask.dtype} is not supported (bool or a float type)")
        mask = mask.numpy()
    elif isinstance(mask, np.ndarray):
        if mask.dtype == np.float64:
            mask = mask.astype(np.float32)
        if mask.dtype not in (np.bool_, np.float32, np.float16):
            raise TypeError(f"attn_mask: NumPy dtype {mask.dtype} is not supported (bool or a float type)")
    else:
        raise TypeError(f"attn_mask: expected a NumPy array or a torch tensor, got {type(mask).__name__}")
    if mask.ndim > 4 or mask.ndim == 0:
        raise invalid(f"attn_mask: expected 1 to 4 dimensions, got shape {mask.shape}")
    mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    target = (batch if mask.shape[0] != 1 else 1, heads if mask.shape[1] != 1 else 1, seq_q, seq_k)
    try:
        mask = np.broadcast_to(mask, target)
    except ValueError:
        raise invalid(
            f"attn_mask: shape {mask.shape} does not broadcast to (batch, heads, seq_q, seq_k) = "
            f"({batch}, {heads}, {seq_q}, {seq_k})"
        ) from None
    if mask.size and (mask.shape[3] > 1 and mask.strides[3] != mask.itemsize or min(mask.strides) < 0):
        mask = np.ascontiguousarray(mask)
    return mask
