"""vkattn.flash_attn_func and vkattn.flash_attn_varlen_func against the float64 reference."""

import numpy as np
import pytest

import reference
import vkattn


def bshd(rng, batch, seq, heads, dim, dtype=np.float32):
    return rng.standard_normal((batch, seq, heads, dim)).astype(dtype)


def to_bhsd(x):
    return x.transpose(0, 2, 1, 3)


@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.float16, "f16")])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_q,seq_k", [(7, 13), (13, 7), (1, 9)])
def test_flash_attn_func(context, rng, dtype, name, causal, seq_q, seq_k):
    q, k, v = bshd(rng, 2, seq_q, 4, 8, dtype), bshd(rng, 2, seq_k, 2, 8, dtype), bshd(rng, 2, seq_k, 2, 8, dtype)
    out = vkattn.flash_attn_func(q, k, v, causal=causal, context=context)
    assert out.shape == (2, seq_q, 4, 8) and out.dtype == dtype
    expected, _ = reference.attention(to_bhsd(q), to_bhsd(k), to_bhsd(v), causal="bottom-right" if causal else None)
    reference.assert_close(to_bhsd(out), expected, v, name)


def test_flash_attn_func_options_and_probs(context, rng):
    q, k, v = bshd(rng, 1, 6, 2, 8), bshd(rng, 1, 10, 2, 8), bshd(rng, 1, 10, 2, 8)
    slopes = np.array([0.25, 0.5], dtype=np.float32)
    kwargs = dict(softmax_scale=0.4, window_size=(3, 2), softcap=3.0, alibi_slopes=slopes)
    out, lse, probs = vkattn.flash_attn_func(q, k, v, return_attn_probs=True, context=context, **kwargs)
    ref = dict(scale=0.4, window=(3, 2), softcap=3.0, alibi=slopes)
    expected, expected_lse = reference.attention(to_bhsd(q), to_bhsd(k), to_bhsd(v), **ref)
    reference.assert_close(to_bhsd(out), expected, v, "f32")
    assert lse.shape == (1, 2, 6) and probs.shape == (1, 2, 6, 10)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(probs, reference.weights(to_bhsd(q), to_bhsd(k), **ref), atol=1e-6)
    # (-1, -1) and softcap 0 are FlashAttention's "none".
    plain = vkattn.flash_attn_func(q, k, v, window_size=(-1, -1), softcap=0.0, context=context)
    reference.assert_close(to_bhsd(plain), reference.attention(to_bhsd(q), to_bhsd(k), to_bhsd(v))[0], v, "f32")


def test_flash_attn_func_torch_bf16(context, rng):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(bshd(rng, 2, s, 2, 16)).bfloat16() for s in (5, 8, 8))
    out = vkattn.flash_attn_func(q, k, v, causal=True, context=context)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 5, 2, 16)
    expected, _ = reference.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal="bottom-right")
    reference.assert_close(out.transpose(1, 2), expected, v, "bf16")


def packed_sequences(rng, lengths_q, lengths_k, heads, kv_heads, dim):
    cu_q = np.concatenate([[0], np.cumsum(lengths_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lengths_k)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], heads, dim)).astype(np.float32)
    k = rng.standard_normal((cu_k[-1], kv_heads, dim)).astype(np.float32)
    v = rng.standard_normal((cu_k[-1], kv_heads, dim)).astype(np.float32)
    return q, k, v, cu_q, cu_k


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_varlen_func(context, rng, causal):
    lengths_q, lengths_k = [3, 0, 7, 1], [5, 4, 7, 0]
    q, k, v, cu_q, cu_k = packed_sequences(rng, lengths_q, lengths_k, 4, 2, 8)
    out, lse, probs = vkattn.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal, return_attn_probs=True, context=context
    )
    assert out.shape == q.shape and lse.shape == (4, len(q)) and probs.shape == (4, len(q), len(k))
    for b in range(len(lengths_q)):
        rows, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if lengths_q[b] == 0:
            continue
        one = lambda x, s: x[None, s].transpose(0, 2, 1, 3)  # noqa: E731  (one sequence as (1, H, S, D))
        expected, expected_lse = reference.attention(
            one(q, rows), one(k, keys), one(v, keys), causal="bottom-right" if causal else None
        )
        reference.assert_close(out[rows].transpose(1, 0, 2)[None], expected, v, "f32")
        np.testing.assert_allclose(lse[:, rows], expected_lse[0], rtol=1e-5, atol=1e-5)
        outside = np.ones(len(k), dtype=bool)
        outside[keys] = False
        assert np.all(probs[:, rows][:, :, outside] == 0)


def test_varlen_torch_offsets(context, rng):
    torch = pytest.importorskip("torch")
    q, k, v, cu_q, cu_k = packed_sequences(rng, [2, 5], [4, 3], 2, 2, 8)
    tq, tk, tv = (torch.from_numpy(x).half() for x in (q, k, v))
    out = vkattn.flash_attn_varlen_func(tq, tk, tv, torch.from_numpy(cu_q), torch.from_numpy(cu_k), 5, 4, context=context)
    assert out.dtype == torch.float16 and out.shape == tq.shape
    first, _ = reference.attention(tq[None, :2].transpose(1, 2), tk[None, :4].transpose(1, 2), tv[None, :4].transpose(1, 2))
    reference.assert_close(out[None, :2].transpose(1, 2), first, tv, "f16")
