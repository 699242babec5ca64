"""vkattn.flash_attn_with_kvcache: FlashAttention's decoding call, over a dense or a paged KV cache,
appending new tokens to the cache in place first.

Both cache forms run as the library's paged call (vkattn/paged_attention.hpp) with its append: a
dense cache (batch, seq_cache, kv_heads, dim) is a paged one of one page per sequence (page_size =
seq_cache) under the identity block table, which is exactly its memory layout.
"""

import numbers

import numpy as np

from . import _vkattn
from ._arrays import float32_values, host_tensor, is_torch_tensor, layout_ready, new_output, same_kind_and_dtype
from ._device_array import call_context
from ._errors import invalid
from ._flash import _options

_INT32 = np.iinfo(np.int32)
_identity_tables = {}  # batch -> the read-only identity block table of a dense cache (built once)


def _identity_table(batch):
    """(batch, 1) int32 [[0], [1], ...]: a dense cache's sequence b is page b."""
    table = _identity_tables.get(batch)
    if table is None:
        table = np.arange(batch, dtype=np.int32).reshape(batch, 1)
        table.flags.writeable = False
        if len(_identity_tables) >= 64:
            _identity_tables.clear()
        _identity_tables[batch] = table
    return table


def _int32_array(name, x, ndim):
    """An integer NumPy array, torch CPU tensor or list as a C-contiguous int32 NumPy array of `ndim`
    dimensions."""
    if is_torch_tensor(x):
        if x.device.type != "cpu":
            raise TypeError(f"{name}: a tensor on {x.device} (vkattn takes CPU tensors)")
        x = x.detach().numpy()
    elif isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: expected a NumPy array, a torch tensor or a list, got {type(x).__name__}")
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integers, got dtype {x.dtype}")
    if x.ndim != ndim:
        raise invalid(f"{name}: expected {ndim} dimension{'s' if ndim > 1 else ''}, got shape {x.shape}")
    if x.dtype == np.int32 and x.flags.c_contiguous:
        return x  # the decode loop's case: no range scan, no copy
    if x.size and (x.min() < _INT32.min or x.max() > _INT32.max):
        raise invalid(f"{name}: values beyond int32")
    return np.ascontiguousarray(x, dtype=np.int32)


_options_seen = {}  # (causal, window_size, softcap, softmax_scale) -> the module's options, checked once


def _decode_options(causal, window_size, softcap, softmax_scale):
    """The module's keyword options, checked as flash_attn_func's (no dropout when decoding). A decode
    loop passes the same ones every step: those of the plain types (a bool, a tuple of two ints,
    floats) are checked once and looked up after, about 1.5 us a call saved of a few tens; others
    (an int softcap, a list) are checked every call, so that True never passes for 1 nor 0 for 0.0."""
    plain = (
        type(causal) is bool
        and type(window_size) is tuple
        and len(window_size) == 2
        and type(window_size[0]) is int
        and type(window_size[1]) is int
        and type(softcap) is float
        and (softmax_scale is None or type(softmax_scale) is float)
    )
    key = (causal, window_size, softcap, softmax_scale) if plain else None
    options = _options_seen.get(key) if plain else None
    if options is None:
        options = _options(causal, window_size, softcap, softmax_scale, 0.0)
        del options["dropout_p"], options["dropout_seed"]
        if plain:
            if len(_options_seen) >= 64:
                _options_seen.clear()
            _options_seen[key] = options
    return options


def _cache_lengths(cache_seqlens, batch, capacity, appending):
    """cache_seqlens as int32 (batch): an int for every sequence, or one per sequence; None is a full
    cache (FlashAttention's default), which leaves no room to append."""
    if cache_seqlens is None:
        if appending:
            raise invalid("cache_seqlens: required when k and v are appended (where the new tokens go)")
        return np.full(batch, capacity, dtype=np.int32)
    if isinstance(cache_seqlens, numbers.Integral) and not isinstance(cache_seqlens, bool):
        if not _INT32.min <= cache_seqlens <= _INT32.max:
            raise invalid(f"cache_seqlens: {cache_seqlens} is beyond int32")
        return np.full(batch, cache_seqlens, dtype=np.int32)
    return _int32_array("cache_seqlens", cache_seqlens, 1)


def _host_cache(name, tensor, appending):
    """A host cache's NumPy view, as the module reads it: C-contiguous. The appended rows are written
    into the caller's memory, so a cache that is not C-contiguous can be copied only when nothing is
    appended."""
    array = tensor.array
    if array.flags.c_contiguous:
        return array
    if appending:
        raise invalid(f"{name}: a cache that k and v append to must be C-contiguous (strides {array.strides})")
    return np.ascontiguousarray(array)


def _prefix_view_dim(k_array, v_array):
    """The columns V reads when v_cache is a view of the first columns of k_cache's rows (host arrays
    sharing memory: multi-head latent attention's one cache, e.g. k_cache[..., :512]), else None."""
    if not (isinstance(k_array, np.ndarray) and isinstance(v_array, np.ndarray)):
        return None
    if k_array.ndim != 4 or v_array.ndim != 4 or v_array.shape[:3] != k_array.shape[:3]:
        return None
    same_start = v_array.__array_interface__["data"][0] == k_array.__array_interface__["data"][0]
    if not same_start or v_array.strides != k_array.strides or v_array.shape[3] > k_array.shape[3]:
        return None
    return v_array.shape[3]


def _given_output(out, tq, shape):
    """The array the module writes for a caller's `out`: q's kind and dtype, the output's shape."""
    given = host_tensor("out", out)
    same_kind_and_dtype([("q", tq), ("out", given)])
    if tuple(given.shape) != shape:
        raise invalid(f"out: expected shape {shape}, got {tuple(given.shape)}")
    return given.array


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    cache_seqlens=None,
    block_table=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    return_softmax_lse=False,
    *,
    head_dim_v=None,
    cascade=None,
    out=None,
    context=None,
):
    """FlashAttention's flash_attn_with_kvcache: attention of new queries over a KV cache, the new
    keys and values (k, v) written into the cache first.

    q (B, Sq, H, D). The cache, dense: k_cache (B, S_cache, G, D), v_cache (B, S_cache, G, Dv); or
    paged when block_table (B, max_blocks) int32 is given: (num_blocks, page_size, G, D) and
    (num_blocks, page_size, G, Dv), token t of sequence b being row t % page_size of block
    block_table[b, t // page_size]. H % G == 0 (GQA/MQA).
    cache_seqlens: (B,) int32 or an int, each sequence's tokens in the cache before the call; None:
    the cache is full (S_cache, or max_blocks * page_size).
    k (B, S_new, G, D), v (B, S_new, G, Dv), optional: written into the caches in place, at tokens
    cache_seqlens[b] .. cache_seqlens[b] + S_new - 1 (their blocks must be in the table), before
    attending; the keys of sequence b are then its first cache_seqlens[b] + S_new tokens.
    causal: bottom-right aligned (the last query sees every key). window_size, softcap, alibi_slopes,
    softmax_scale: as flash_attn_func's.
    Returns out (B, Sq, H, Dv), or (out, softmax_lse float32 (B, H, Sq)) with return_softmax_lse.

    q, the caches, k and v: NumPy arrays (float32, float16) or torch CPU tensors (float32, float16,
    bfloat16) of one dtype, or all DeviceArrays (vkattn.asarray): then the caches are appended to on
    the device and the results are DeviceArrays. Host caches must be C-contiguous when appended to
    (the new rows are copied back into them). The block table and cache_seqlens are host values,
    checked before anything is written: a sequence's length in [0, capacity - S_new], the blocks it
    uses in [0, num_blocks), no appended row shared (vkattn.Error otherwise).
    One cache for K and V (multi-head latent attention, DeepSeek's MLA: K rows of 576, V their first
    512), vkattn's addition: v_cache=None with head_dim_v=Dv, or v_cache a view of k_cache's first
    Dv columns (k_cache[..., :Dv] of a host cache). The cache is then bound and read once, V being
    the first head_dim_v columns of its rows, and k alone is appended (v must be None).
    cascade: a prefix every sequence's block table shares (the same whole pages at the start, a
    prompt the batch shares) read once for the batch, each sequence's own pages apart, the two
    merged (vkattn's addition; the same answers). It needs one query a sequence (Sq = 1) and options
    that let every query see the whole prefix (no window, ALiBi, ...). None: where that pays, a KV
    head having at most 16 query heads; True: whenever the tables share such a prefix (vkattn.Error
    where the call does not allow it); False: never.
    out: where to write the output instead of a new tensor (vkattn's addition): of q's kind and
    dtype, shape (B, Sq, H, Dv); a decode loop that passes the same one each step allocates nothing.
    context: the vkattn.Context to run on (default: the DeviceArrays', else vkattn.default_context()).
    """
    if v_cache is None:
        if head_dim_v is None:
            raise invalid("v_cache: None needs head_dim_v (V is then the first head_dim_v columns of k_cache's rows)")
    elif head_dim_v is not None:
        raise invalid("head_dim_v: given only with v_cache=None (else V's columns are v_cache's)")
    named = [("q", q), ("k_cache", k_cache)] + ([] if v_cache is None else [("v_cache", v_cache)])
    named += [(name, x) for name, x in (("k", k), ("v", v)) if x is not None]
    tensors = dict((name, host_tensor(name, x)) for name, x in named)
    same_kind_and_dtype(list(tensors.items()))
    shapes = {}  # read once: a DeviceArray's shape is a new tuple each time
    for name, t in tensors.items():
        shape = t.shape
        if len(shape) != 4:
            raise invalid(f"{name}: expected 4 dimensions, got shape {shape}")
        shapes[name] = shape
    tq, tk_cache = tensors["q"], tensors["k_cache"]
    if v_cache is not None and v is None and tq.kind != "device":
        head_dim_v = _prefix_view_dim(tk_cache.array, tensors["v_cache"].array)
    views_k = head_dim_v is not None
    if views_k:
        if v is not None:
            raise invalid("v: V is a view of k_cache's rows, so k alone is appended (v must be None)")
        if isinstance(head_dim_v, bool) or not isinstance(head_dim_v, numbers.Integral):
            raise TypeError(f"head_dim_v: expected an int, got {type(head_dim_v).__name__}")
    elif (k is None) != (v is None):
        raise invalid("k, v: give both or neither")
    appending = k is not None
    if cascade is not None and not isinstance(cascade, bool):
        raise TypeError(f"cascade: expected None, True or False, got {type(cascade).__name__}")
    options = _decode_options(causal, window_size, softcap, softmax_scale)
    ctx = call_context(context, (q, k_cache, v_cache))

    batch, seq_q, heads, _ = shapes["q"]
    cache_shape = shapes["k_cache"]
    dim_v = int(head_dim_v) if views_k else shapes["v_cache"][3]
    if block_table is None:
        if cache_shape[0] != batch:
            raise invalid(
                f"k_cache: a dense cache has one row per sequence: shape {cache_shape} for q's batch {batch}"
            )
        table = _identity_table(batch)  # page b is sequence b's whole cache
    else:
        table = _int32_array("block_table", block_table, 2)
    lengths = _cache_lengths(cache_seqlens, batch, table.shape[1] * cache_shape[1], appending)

    if tq.kind == "device":
        caches = (tk_cache.array, None if views_k else tensors["v_cache"].array)
    else:
        caches = (
            _host_cache("k_cache", tk_cache, appending),
            None if views_k else _host_cache("v_cache", tensors["v_cache"], appending),
        )
    if out is None:
        out, out_view = new_output(tq.kind, tq.dtype, (batch, seq_q, heads, dim_v), ctx)
    else:
        out_view = _given_output(out, tq, (batch, seq_q, heads, dim_v))
    lse = lse_view = None
    if return_softmax_lse:
        lse, lse_view = new_output(tq.kind, "f32", (batch, heads, seq_q), ctx)
    # q, out, k and v go as they are, (batch, seq, heads, dim): the module reads them so.
    _vkattn.kvcache_attention(
        ctx,
        layout_ready(tq.array),
        caches[0],
        caches[1],
        out_view,
        tq.dtype,
        table,
        lengths,
        k_new=layout_ready(tensors["k"].array) if appending else None,
        v_new=layout_ready(tensors["v"].array) if appending and not views_k else None,
        lse=lse_view,
        alibi=None if alibi_slopes is None else float32_values("alibi_slopes", alibi_slopes),
        dim_v=dim_v if views_k else 0,
        cascade=cascade,
        **options,
    )
    return (out, lse) if return_softmax_lse else out
