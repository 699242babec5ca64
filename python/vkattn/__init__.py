"""vkattn: scaled dot-product attention on any Vulkan device (GPUs, and lavapipe on the CPU).

    import numpy as np, vkattn
    q = np.random.randn(2, 8, 128, 64).astype(np.float32)   # (batch, heads, seq, dim)
    out = vkattn.scaled_dot_product_attention(q, q, q, is_causal=True)

The functions take NumPy arrays (float32, float16) and torch CPU tensors (float32, float16,
bfloat16) with any strides, and return the same kind and dtype; torch tensors that require grad
get vkattn's backward pass through torch.autograd. They upload to the device, run and
download, planning each new combination of shapes, dtypes and options once per Context.

    scaled_dot_product_attention  PyTorch's call, (batch, heads, seq, dim)
    flash_attn_func               FlashAttention's call, (batch, seq, heads, dim)
    flash_attn_varlen_func        FlashAttention's packed variable-length call
    flash_attn_with_kvcache       FlashAttention's decoding call over a dense or paged KV cache
    asarray, DeviceArray          tensors kept in device memory between calls
    MultiheadAttention            torch.nn.MultiheadAttention on vkattn's multi-head layer
    Context, default_context      the device the calls run on
    devices                       the Vulkan devices vkattn sees
    Error, DeviceError            what the calls raise (ValueError; device failures also RuntimeError)

The semantics are the C++ library's: docs/semantics.md in the vkattn repository; docs/python.md
describes this package.
"""

from ._vkattn import Context, DeviceError, Error, __version__, devices
from ._context import default_context
from ._device_array import DeviceArray, asarray
from ._kvcache import flash_attn_with_kvcache
from ._flash import flash_attn_func, flash_attn_varlen_func
from ._mha import MultiheadAttention
from ._sdpa import scaled_dot_product_attention

__all__ = [
    "Context",
    "DeviceArray",
    "DeviceError",
    "Error",
    "MultiheadAttention",
    "__version__",
    "asarray",
    "default_context",
    "devices",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "scaled_dot_product_attention",
]
