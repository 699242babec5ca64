# Type stubs of the vkattn package (the functions' docstrings say what they compute).
from typing import Any, Dict, Literal, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

# A NumPy array (float32, float16), a torch CPU tensor (float32, float16, bfloat16) or a DeviceArray; typed loosely
# so that torch need not be installed to type-check a caller.
Tensor = Any
Causal = Literal["none", "top-left", "bottom-right"]
Offsets = Union[np.ndarray, Sequence[int], Any]

__version__: str

class Error(ValueError):
    code: str
    vk_result: str

class DeviceError(Error, RuntimeError): ...

class Context:
    def __init__(self, device: Union[None, int, str] = ...) -> None: ...
    @property
    def device(self) -> dict: ...
    @property
    def device_name(self) -> str: ...
    def plan_cache_info(self) -> dict: ...
    def clear_plan_cache(self) -> None: ...
    def memory_stats(self) -> dict: ...

class DeviceArray:
    """A tensor in device memory on one Context (vkattn.asarray); the calls read and write it in place."""
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> Literal["float32", "float16", "bfloat16"]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...  # in elements
    @property
    def nbytes(self) -> int: ...
    @property
    def context(self) -> Context: ...
    def numpy(self) -> np.ndarray: ...
    def __array__(self, dtype: Any = ..., copy: Any = ...) -> np.ndarray: ...
    def transpose(self, *axes: int) -> DeviceArray: ...
    def __len__(self) -> int: ...

DType = Union[str, np.dtype, type, Any]

def asarray(x: Any, dtype: Optional[DType] = ..., *, context: Optional[Context] = ...) -> DeviceArray: ...
def flash_attn_with_kvcache(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Optional[Tensor],
    k: Optional[Tensor] = ...,
    v: Optional[Tensor] = ...,
    cache_seqlens: Union[None, int, Offsets] = ...,
    block_table: Optional[Offsets] = ...,
    softmax_scale: Optional[float] = ...,
    causal: bool = ...,
    window_size: Tuple[int, int] = ...,
    softcap: float = ...,
    alibi_slopes: Optional[Tensor] = ...,
    return_softmax_lse: bool = ...,
    *,
    head_dim_v: Optional[int] = ...,
    cascade: Optional[bool] = ...,
    out: Optional[Tensor] = ...,
    context: Optional[Context] = ...,
) -> Any: ...
def devices() -> list: ...
def default_context() -> Context: ...
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = ...,
    dropout_p: float = ...,
    is_causal: bool = ...,
    scale: Optional[float] = ...,
    enable_gqa: bool = ...,
    *,
    causal: Optional[Causal] = ...,
    window: Optional[Tuple[int, int]] = ...,
    softcap: Optional[float] = ...,
    alibi_slopes: Optional[Tensor] = ...,
    sinks: Optional[Tensor] = ...,
    return_lse: bool = ...,
    context: Optional[Context] = ...,
) -> Any: ...
def flash_attn_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    dropout_p: float = ...,
    softmax_scale: Optional[float] = ...,
    causal: bool = ...,
    window_size: Tuple[int, int] = ...,
    softcap: float = ...,
    alibi_slopes: Optional[Tensor] = ...,
    deterministic: bool = ...,
    return_attn_probs: bool = ...,
    *,
    context: Optional[Context] = ...,
) -> Any: ...
def flash_attn_varlen_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Offsets,
    cu_seqlens_k: Offsets,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = ...,
    softmax_scale: Optional[float] = ...,
    causal: bool = ...,
    window_size: Tuple[int, int] = ...,
    softcap: float = ...,
    alibi_slopes: Optional[Tensor] = ...,
    deterministic: bool = ...,
    return_attn_probs: bool = ...,
    *,
    context: Optional[Context] = ...,
) -> Any: ...

class MultiheadAttention:
    embed_dim: int
    num_heads: int
    kdim: int
    vdim: int
    bias: bool
    batch_first: bool
    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = ...,
        kdim: Optional[int] = ...,
        vdim: Optional[int] = ...,
        batch_first: bool = ...,
        *,
        context: Optional[Context] = ...,
    ) -> None: ...
    @property
    def head_dim(self) -> int: ...
    def state_dict(self) -> Dict[str, np.ndarray]: ...
    def load_state_dict(self, state_dict: Mapping[str, Tensor]) -> None: ...
    def __call__(
        self,
        query: Tensor,
        key: Optional[Tensor] = ...,
        value: Optional[Tensor] = ...,
        key_padding_mask: Optional[Tensor] = ...,
        need_weights: bool = ...,
        attn_mask: Optional[Tensor] = ...,
        average_attn_weights: bool = ...,
        is_causal: bool = ...,
    ) -> Tuple[Any, Optional[Any]]: ...
    forward = __call__
