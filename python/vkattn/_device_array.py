"""vkattn.asarray and DeviceArray: tensors kept in device memory between calls.

A call given DeviceArrays reads them where they are and returns DeviceArrays, so a decode loop
uploads its new tokens only, not its whole KV cache, each step. The rule for mixing: Q, K and V
(and a KV call's caches and new tokens) are all DeviceArrays or all host tensors (TypeError
otherwise), so that where a result lives never depends on which argument came first. The small
arguments (masks, ALiBi slopes, offsets, block tables, cache lengths) stay host arrays either way and
travel with each call.
"""

import sys

import numpy as np

from . import _vkattn
from ._context import resolve

DeviceArray = _vkattn.DeviceArray

# dtype spellings asarray takes, each to vkattn's name.
_DTYPE_NAMES = {
    "float32": "f32", "f32": "f32", "float": "f32",
    "float16": "f16", "f16": "f16", "half": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
}  # fmt: skip
_VK_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}  # DeviceArray.dtype -> vkattn's name


def is_device_array(x):
    return isinstance(x, DeviceArray)


def vk_dtype(array):
    """A DeviceArray's dtype as vkattn's name ("f32", "f16", "bf16")."""
    return _VK_DTYPES[array.dtype]


def _dtype_name(dtype):
    """vkattn's name of a dtype given as a string, a NumPy dtype or type, or a torch dtype."""
    if isinstance(dtype, str):
        key = dtype
    elif type(dtype).__module__ == "torch":
        key = str(dtype).replace("torch.", "")
    else:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"dtype: expected float32, float16 or bfloat16, got {dtype!r}") from None
    name = _DTYPE_NAMES.get(key)
    if name is None:
        raise TypeError(f"dtype: expected float32, float16 or bfloat16, got {dtype!r}")
    return name


def _bfloat16_bits(values):
    """float32 values rounded to the nearest bfloat16 (ties to even), as uint16 bits; NaN stays NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def _host_storage(x, dtype):
    """`x` as a C-contiguous NumPy array of vkattn dtype `dtype`'s storage type (bfloat16's bits as
    16-bit integers), and that dtype; `dtype` None keeps x's own (float32, float16, bfloat16)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise TypeError(f"x: a tensor on {x.device} (vkattn takes CPU tensors; move it with .cpu())")
        x = x.detach()
        if dtype is None:
            dtype = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}.get(x.dtype)
            if dtype is None:
                raise TypeError(f"x: torch dtype {x.dtype} is not supported (float32, float16 or bfloat16; or pass dtype=)")
        x = x.to({"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]).contiguous()
        return (x.view(torch.int16).numpy() if dtype == "bf16" else x.numpy()), dtype
    if isinstance(x, DeviceArray):
        x = x.numpy()
    array = np.asarray(x)
    if dtype is None:
        dtype = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}.get(array.dtype)
        if dtype is None:
            raise TypeError(f"x: NumPy dtype {array.dtype} is not supported (float32 or float16; or pass dtype=)")
    if array.dtype.kind not in "fiub":
        raise TypeError(f"x: expected numbers, got dtype {array.dtype}")
    if dtype == "bf16":
        return _bfloat16_bits(array), dtype
    return np.ascontiguousarray(array, dtype={"f32": np.float32, "f16": np.float16}[dtype]), dtype


def asarray(x, dtype=None, *, context=None):
    """`x` in device memory: a DeviceArray on `context` (default: x's own when x is a DeviceArray,
    else vkattn.default_context()).

    x: a NumPy array, a torch CPU tensor, a DeviceArray, or anything numpy.asarray takes. dtype:
    "float32", "float16" or "bfloat16" (also "f32", "f16", "bf16", NumPy and torch dtypes); None keeps
    x's dtype, which must then be one of those (float64 is a TypeError: say dtype=). A DeviceArray
    already of that dtype and Context is returned as it is; otherwise the values are copied (through
    the host when x is a DeviceArray). The result is C-ordered.
    """
    if isinstance(x, DeviceArray):
        same_dtype = dtype is None or _dtype_name(dtype) == vk_dtype(x)
        if same_dtype and (context is None or context is x.context):
            return x
        if context is None:
            context = x.context
        if dtype is None:
            dtype = x.dtype
    array, name = _host_storage(x, None if dtype is None else _dtype_name(dtype))
    return _vkattn.upload(resolve(context), array, name)


def empty(shape, dtype, context):
    """A new DeviceArray of vkattn dtype `dtype` ("f32", "f16", "bf16"), contents undefined."""
    return _vkattn.empty(context, [int(s) for s in shape], dtype)


def call_context(context, tensors):
    """The Context a call runs on: `context`, else the first DeviceArray's, else the default. (A
    DeviceArray of another Context is refused by the module, naming the argument.)"""
    if context is None:
        for t in tensors:
            if isinstance(t, DeviceArray):
                return t.context
    return resolve(context)


def with_leading_axis(x):
    """x[None] for a NumPy array or a DeviceArray: a new first axis of size 1, no copy."""
    if isinstance(x, DeviceArray):
        return x._strided((1,) + x.shape, (0,) + x.strides, x._offset)
    return x[None]
