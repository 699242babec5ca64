"""vkattn.asarray and DeviceArray: the round trip, views, and every call on DeviceArrays giving what
the same call on host arrays gives, without leaving the device."""

import numpy as np
import pytest

import reference
import vkattn


def test_round_trip_and_attributes(context, rng):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    d = vkattn.asarray(x, context=context)
    assert isinstance(d, vkattn.DeviceArray)
    assert d.shape == (2, 3, 5, 7) and d.dtype == "float32" and d.ndim == 4 and d.size == x.size
    assert d.strides == (105, 35, 7, 1) and d.nbytes == x.nbytes and len(d) == 2
    assert d.context is context
    assert "DeviceArray(shape=(2, 3, 5, 7), dtype=float32" in repr(d)
    np.testing.assert_array_equal(d.numpy(), x)
    np.testing.assert_array_equal(np.asarray(d), x)
    # A transposed view shares the memory and reads back as NumPy's transpose.
    np.testing.assert_array_equal(d.transpose(0, 2, 1, 3).numpy(), x.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(d.transpose().numpy(), x.transpose())


def test_dtypes(context, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    half = vkattn.asarray(x, np.float16, context=context)
    assert half.dtype == "float16"
    np.testing.assert_array_equal(half.numpy(), x.astype(np.float16))
    # bfloat16 from float32: round to nearest even; numpy() widens it back to float32 exactly.
    bf16 = vkattn.asarray(x, "bf16", context=context)
    assert bf16.dtype == "bfloat16" and bf16.numpy().dtype == np.float32
    np.testing.assert_allclose(bf16.numpy(), x, rtol=2**-8)
    # float64 needs an explicit dtype; a list with one is fine.
    with pytest.raises(TypeError, match="float64"):
        vkattn.asarray(x.astype(np.float64), context=context)
    np.testing.assert_array_equal(vkattn.asarray([[1.5, 2.0]], "float32", context=context).numpy(), [[1.5, 2.0]])
    with pytest.raises(TypeError, match="dtype"):
        vkattn.asarray(x, "int8", context=context)
    # Already there: the same object; another dtype: a converted copy.
    assert vkattn.asarray(half) is half
    assert vkattn.asarray(half, "float32").dtype == "float32"
    empty = vkattn.asarray(np.zeros((0, 4), np.float32), context=context)
    assert empty.shape == (0, 4) and empty.numpy().shape == (0, 4)


def test_torch(context, rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.standard_normal((2, 3)).astype(np.float32)).bfloat16()
    d = vkattn.asarray(x, context=context)
    assert d.dtype == "bfloat16"
    np.testing.assert_array_equal(d.numpy(), x.float().numpy())
    assert vkattn.asarray(x.t(), context=context).shape == (3, 2)  # a non-contiguous tensor is copied


def bshd(rng, batch, seq, heads, dim, dtype=np.float32):
    return rng.standard_normal((batch, seq, heads, dim)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_flash_attn_func_on_device(context, rng, dtype):
    q, k, v = bshd(rng, 2, 5, 4, 8, dtype), bshd(rng, 2, 9, 2, 8, dtype), bshd(rng, 2, 9, 2, 8, dtype)
    host_out, host_lse, host_probs = vkattn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True, context=context)
    dq, dk, dv = (vkattn.asarray(x, context=context) for x in (q, k, v))
    out, lse, probs = vkattn.flash_attn_func(dq, dk, dv, causal=True, return_attn_probs=True)
    assert all(isinstance(x, vkattn.DeviceArray) for x in (out, lse, probs))
    assert out.shape == (2, 5, 4, 8) and out.dtype == np.dtype(dtype).name and out.context is context
    # The same plan on the same bytes: the same result, bit for bit.
    np.testing.assert_array_equal(out.numpy(), host_out)
    np.testing.assert_array_equal(lse.numpy(), host_lse)
    np.testing.assert_array_equal(probs.numpy(), host_probs)


def test_bfloat16_on_device(context, rng):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(bshd(rng, 1, s, 2, 16)).bfloat16() for s in (3, 7, 7))
    host = vkattn.flash_attn_func(q, k, v, causal=True, context=context)
    out = vkattn.flash_attn_func(*(vkattn.asarray(x, context=context) for x in (q, k, v)), causal=True)
    assert out.dtype == "bfloat16"
    np.testing.assert_array_equal(out.numpy(), host.float().numpy())


def test_sdpa_on_device(context, rng):
    q = rng.standard_normal((1, 4, 6, 16)).astype(np.float32)
    k = rng.standard_normal((1, 2, 11, 16)).astype(np.float32)
    mask = rng.random((6, 11)) > 0.3
    host, host_lse = vkattn.scaled_dot_product_attention(q, k, k, mask, enable_gqa=True, return_lse=True, context=context)
    dq, dk = vkattn.asarray(q, context=context), vkattn.asarray(k, context=context)
    # The host mask travels with the call; the tensors stay where they are.
    out, lse = vkattn.scaled_dot_product_attention(dq, dk, dk, mask, enable_gqa=True, return_lse=True)
    assert isinstance(out, vkattn.DeviceArray) and isinstance(lse, vkattn.DeviceArray)
    np.testing.assert_array_equal(out.numpy(), host)
    np.testing.assert_array_equal(lse.numpy(), host_lse)
    expected, _ = reference.attention(q, k, k, mask=mask)
    reference.assert_close(out.numpy(), expected, k, "f32")
    # A transposed DeviceArray view is read in place, as a NumPy view is.
    view = vkattn.scaled_dot_product_attention(dq.transpose(0, 2, 1, 3).transpose(0, 2, 1, 3), dk, dk, enable_gqa=True)
    reference.assert_close(view.numpy(), reference.attention(q, k, k)[0], k, "f32")


def test_varlen_on_device(context, rng):
    lengths = [3, 0, 5]
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    q = rng.standard_normal((cu[-1], 2, 8)).astype(np.float16)
    host = vkattn.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5, causal=True, context=context)
    d = vkattn.asarray(q, context=context)
    out = vkattn.flash_attn_varlen_func(d, d, d, cu, cu, 5, 5, causal=True)
    assert isinstance(out, vkattn.DeviceArray) and out.shape == q.shape
    np.testing.assert_array_equal(out.numpy(), host)


def test_mixing_and_errors(context, rng):
    q = bshd(rng, 1, 3, 2, 8)
    d = vkattn.asarray(q, context=context)
    # Host and device tensors in one call: a TypeError, whichever comes first.
    with pytest.raises(TypeError, match="device array"):
        vkattn.flash_attn_func(d, q, q)
    with pytest.raises(TypeError, match="device array"):
        vkattn.flash_attn_func(q, d, d)
    with pytest.raises(TypeError, match="dtype"):
        vkattn.flash_attn_func(d, vkattn.asarray(q, "float16", context=context), d)
    with pytest.raises(vkattn.Error, match="4 dimensions"):
        vkattn.flash_attn_func(vkattn.asarray(q[0], context=context), d, d)
    # A DeviceArray of another Context than the call's: vkattn.Error naming the argument.
    other = vkattn.Context()
    with pytest.raises(vkattn.Error, match="query: a DeviceArray of another Context"):
        vkattn.flash_attn_func(d, d, d, context=other)
    with pytest.raises(vkattn.Error, match="transpose"):
        d.transpose(0, 0, 1, 2)


def test_outputs_reuse_only_dropped_buffers(context, rng):
    """A new output takes the Buffer of a dropped one (RecycledBuffers), never of a live one."""
    q1, q2 = bshd(rng, 1, 4, 2, 8), bshd(rng, 1, 4, 2, 8)
    d1, d2 = vkattn.asarray(q1, context=context), vkattn.asarray(q2, context=context)
    first = vkattn.flash_attn_func(d1, d1, d1)
    kept = first.numpy()
    second = vkattn.flash_attn_func(d2, d2, d2)  # `first` is alive: its Buffer is not reused
    np.testing.assert_array_equal(first.numpy(), kept)
    del first
    for _ in range(3):  # dropped outputs come back as new ones: the values are each call's own
        again = vkattn.flash_attn_func(d1, d1, d1)
        np.testing.assert_array_equal(again.numpy(), kept)
        np.testing.assert_array_equal(second.numpy(), vkattn.flash_attn_func(q2, q2, q2, context=context))
