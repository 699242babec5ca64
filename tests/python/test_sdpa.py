"""vkattn.scaled_dot_product_attention against the float64 reference and torch's own call."""

import numpy as np
import pytest

import reference
import vkattn

torch = pytest.importorskip("torch")

NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16}
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def random(rng, shape, dtype, kind="numpy"):
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == "torch":
        return torch.from_numpy(x).to(TORCH_DTYPES[dtype])
    return x.astype(NUMPY_DTYPES[dtype])


def qkv(rng, batch, heads, kv_heads, seq_q, seq_k, dim, dtype="f32", kind="numpy", dim_v=None):
    return (
        random(rng, (batch, heads, seq_q, dim), dtype, kind),
        random(rng, (batch, kv_heads, seq_k, dim), dtype, kind),
        random(rng, (batch, kv_heads, seq_k, dim_v or dim), dtype, kind),
    )


@pytest.mark.parametrize(
    "kind,dtype", [("numpy", "f32"), ("numpy", "f16"), ("torch", "f32"), ("torch", "f16"), ("torch", "bf16")]
)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1, 8), (2, 3, 3, 7, 13, 8), (1, 2, 2, 17, 5, 24)])
def test_dtypes_and_odd_sizes(context, rng, kind, dtype, shape):
    q, k, v = qkv(rng, *shape, dtype=dtype, kind=kind)
    out = vkattn.scaled_dot_product_attention(q, k, v, context=context)
    assert type(out) is type(q) and out.dtype == q.dtype and tuple(out.shape) == tuple(q.shape)
    expected, _ = reference.attention(q, k, v)
    reference.assert_close(out, expected, v, dtype)


@pytest.mark.parametrize("causal", ["top-left", "bottom-right"])
@pytest.mark.parametrize("seq_q,seq_k", [(7, 13), (13, 7), (9, 9)])
def test_causal_alignments(context, rng, causal, seq_q, seq_k):
    q, k, v = qkv(rng, 1, 2, 2, seq_q, seq_k, 8)
    out, lse = vkattn.scaled_dot_product_attention(q, k, v, causal=causal, return_lse=True, context=context)
    expected, expected_lse = reference.attention(q, k, v, causal=causal)
    reference.assert_close(out, expected, v, "f32")
    # Rows that see no key (bottom-right with seq_q > seq_k): 0 and -inf, never NaN.
    assert np.array_equal(np.isinf(lse), np.isinf(expected_lse))
    finite = np.isfinite(expected_lse)
    np.testing.assert_allclose(lse[finite], expected_lse[finite], rtol=1e-5, atol=1e-5)


def test_is_causal_is_top_left(context, rng):
    q, k, v = qkv(rng, 1, 1, 1, 5, 11, 8)
    a = vkattn.scaled_dot_product_attention(q, k, v, is_causal=True, context=context)
    b = vkattn.scaled_dot_product_attention(q, k, v, causal="top-left", context=context)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("mask_shape", [(7, 13), (2, 1, 7, 13), (1, 3, 7, 13), (2, 1, 1, 13), (13,)])
def test_bool_masks_broadcast(context, rng, mask_shape):
    q, k, v = qkv(rng, 2, 3, 3, 7, 13, 8)
    mask = rng.random(mask_shape) < 0.6
    out = vkattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=context)
    expected, _ = reference.attention(q, k, v, mask=mask)
    reference.assert_close(out, expected, v, "f32")


def test_fully_masked_rows_give_zero(context, rng):
    q, k, v = qkv(rng, 1, 2, 2, 4, 6, 8)
    mask = np.ones((4, 6), dtype=bool)
    mask[1] = False
    float_mask = np.where(mask, 0.0, -np.inf).astype(np.float32)
    for m in (mask, float_mask):
        out, lse = vkattn.scaled_dot_product_attention(q, k, v, attn_mask=m, return_lse=True, context=context)
        assert np.all(out[:, :, 1] == 0) and np.all(lse[:, :, 1] == -np.inf)
        expected, _ = reference.attention(q, k, v, mask=m)
        reference.assert_close(out, expected, v, "f32")


@pytest.mark.parametrize("mask_dtype", [np.float32, np.float16, np.float64])
def test_float_masks_are_added(context, rng, mask_dtype):
    q, k, v = qkv(rng, 1, 2, 2, 7, 13, 8)
    mask = rng.standard_normal((1, 2, 7, 13)).astype(mask_dtype)
    out = vkattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=context)
    expected, _ = reference.attention(q, k, v, mask=mask.astype(np.float32))
    reference.assert_close(out, expected, v, "f32")


def test_torch_float_and_bool_masks_match_torch(context, rng):
    q, k, v = qkv(rng, 2, 2, 2, 9, 11, 16, kind="torch")
    for mask in (torch.from_numpy(rng.random((9, 11)) < 0.7), torch.randn(2, 1, 9, 11)):
        mask[..., 0] = True if mask.dtype == torch.bool else mask[..., 0]  # no fully masked row (torch: NaN)
        out = vkattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=context)
        expected, _ = torch.nn.functional._scaled_dot_product_attention(q, k, v, mask, 0.0, False, False)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_torch(context, rng, is_causal):
    q, k, v = qkv(rng, 2, 3, 3, 12, 12, 24, kind="torch")
    out = vkattn.scaled_dot_product_attention(q, k, v, is_causal=is_causal, context=context)
    expected, _ = torch.nn.functional._scaled_dot_product_attention(q, k, v, None, 0.0, False, is_causal)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_types_match_torch_in_f32(context, rng, dtype):
    q, k, v = qkv(rng, 1, 4, 2, 10, 14, 8, dtype=dtype, kind="torch")
    out = vkattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, context=context)
    kr, vr = (x.float().repeat_interleave(2, dim=1) for x in (k, v))
    expected, _ = torch.nn.functional._scaled_dot_product_attention(q.float(), kr, vr, None, 0.0, False, False)
    assert out.dtype == q.dtype
    reference.assert_close(out, expected.double().numpy(), v, dtype)


def test_gqa(context, rng):
    q, k, v = qkv(rng, 2, 6, 2, 5, 9, 8)
    out = vkattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, context=context)
    expected, _ = reference.attention(q, k, v)
    reference.assert_close(out, expected, v, "f32")


def test_scale_and_dim_v(context, rng):
    q, k, v = qkv(rng, 1, 2, 2, 6, 10, 8, dim_v=24)
    out = vkattn.scaled_dot_product_attention(q, k, v, scale=0.3, context=context)
    assert out.shape == (1, 2, 6, 24)
    expected, _ = reference.attention(q, k, v, scale=0.3)
    reference.assert_close(out, expected, v, "f32")


def test_score_modifiers(context, rng):
    q, k, v = qkv(rng, 2, 2, 2, 6, 11, 8)
    slopes = np.array([0.5, 0.125], dtype=np.float32)
    sinks = np.array([0.3, -1.0], dtype=np.float32)
    for kwargs in (
        {"window": (3, 1)},
        {"window": (2, -1), "causal": "top-left"},
        {"softcap": 2.0},
        {"alibi_slopes": slopes},
        {"alibi_slopes": np.stack([slopes, 2 * slopes])},
        {"sinks": sinks},
        {"alibi_slopes": slopes, "causal": "bottom-right", "softcap": 5.0, "sinks": sinks},
    ):
        out, lse = vkattn.scaled_dot_product_attention(q, k, v, return_lse=True, context=context, **kwargs)
        expected, expected_lse = reference.attention(
            q,
            k,
            v,
            causal=kwargs.get("causal"),
            window=kwargs.get("window"),
            softcap=kwargs.get("softcap"),
            alibi=kwargs.get("alibi_slopes"),
            sinks=kwargs.get("sinks"),
        )
        reference.assert_close(out, expected, v, "f32")
        np.testing.assert_allclose(lse, expected_lse, rtol=1e-5, atol=1e-5, err_msg=str(kwargs))


def test_strided_views_are_read_in_place_or_copied(context, rng):
    base_q, k, v = qkv(rng, 2, 3, 3, 14, 9, 8)
    expected_for = {}
    views = {
        "every other row": base_q[:, :, ::2],
        "rows from the fourth": base_q[:, :, 3:],
        "BSHD memory": np.ascontiguousarray(base_q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3),
        "Fortran order": np.asfortranarray(base_q),
        "last two axes swapped in memory": np.ascontiguousarray(base_q.swapaxes(2, 3)).swapaxes(2, 3),
        "reversed rows": base_q[:, :, ::-1],
        "reversed dim": base_q[..., ::-1],
    }
    for name, q in views.items():
        out = vkattn.scaled_dot_product_attention(q, k, v, context=context)
        expected_for[name], _ = reference.attention(q, k, v)
        reference.assert_close(out, expected_for[name], v, "f32")
    # Broadcast K and V (stride 0 over heads), as np.broadcast_to makes them.
    k1, v1 = np.broadcast_to(k[:, :1], k.shape), np.broadcast_to(v[:, :1], v.shape)
    out = vkattn.scaled_dot_product_attention(base_q, k1, v1, context=context)
    reference.assert_close(out, reference.attention(base_q, k1, v1)[0], v1, "f32")


def test_strided_torch_tensors(context, rng):
    q, k, v = qkv(rng, 2, 9, 3, 5, 7, 8, kind="torch")
    views = [q.transpose(1, 2).contiguous().transpose(1, 2), q[:, ::3], q.transpose(2, 3).contiguous().transpose(2, 3)]
    for view in views:
        for dtype in (torch.float32, torch.bfloat16):
            x = view.to(dtype) if dtype != torch.float32 else view
            kx, vx = k[:, :3].to(dtype), v[:, :3].to(dtype)
            out = vkattn.scaled_dot_product_attention(x, kx, vx, enable_gqa=x.shape[1] != 3, context=context)
            expected, _ = reference.attention(x, kx, vx)
            reference.assert_close(out, expected, vx, "f32" if dtype == torch.float32 else "bf16")


def test_dropout(context, rng):
    # Uniform weights over 64 keys of value 1: each output is (kept keys) / (64 (1 - p)).
    q = np.zeros((2, 2, 16, 8), dtype=np.float32)
    k = rng.standard_normal((2, 2, 64, 8)).astype(np.float32)
    v = np.ones((2, 2, 64, 8), dtype=np.float32)
    out = vkattn.scaled_dot_product_attention(q, k, v, dropout_p=0.5, context=context)
    kept = out[..., 0] * 64 * 0.5
    assert np.allclose(kept, np.round(kept), atol=1e-3)
    assert abs(out.mean() - 1.0) < 0.1 and np.all(out >= 0)
    assert np.array_equal(vkattn.scaled_dot_product_attention(q, k, v, dropout_p=0.0, context=context), np.ones_like(out))


def test_requires_grad_and_default_context(rng):
    q, k, v = qkv(rng, 1, 1, 1, 3, 3, 8, kind="torch")
    q.requires_grad_(True)
    out = vkattn.scaled_dot_product_attention(q, k, v)
    assert out.requires_grad  # vkattn's backward: test_autograd.py
    reference.assert_close(out, reference.attention(q, k, v)[0], v, "f32")


def test_mask_with_causal(context, rng):
    q, k, v = qkv(rng, 1, 2, 2, 6, 9, 8)
    mask = rng.random((6, 9)) < 0.7
    out = vkattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True, context=context)
    expected, _ = reference.attention(q, k, v, mask=mask, causal="top-left")
    reference.assert_close(out, expected, v, "f32")
