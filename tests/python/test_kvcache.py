"""vkattn.flash_attn_with_kvcache against a float64 reference: dense and paged caches, appends (one
crossing a page edge), GQA, odd sizes, f32 and f16, host and device caches, and the caches holding
the appended rows afterwards."""

import numpy as np
import pytest

import reference
import vkattn

BATCH, HEADS, KV_HEADS, DIM = 2, 4, 2, 24


def cache_tokens(cache, table, b, count):
    """Sequence b's first `count` tokens (count, kv_heads, dim) of a paged cache."""
    page_size = cache.shape[1]
    return np.stack([cache[table[b, t // page_size], t % page_size] for t in range(count)]).reshape(
        count, *cache.shape[2:]
    )


def expected_attention(q, k_cache, v_cache, table, lengths, **options):
    """(out (B, Sq, H, Dv), lse (B, H, Sq)): each sequence a dense problem over its tokens, causal
    bottom-right."""
    outs, lses = [], []
    for b in range(q.shape[0]):
        k = cache_tokens(k_cache, table, b, lengths[b])[None].transpose(0, 2, 1, 3)
        v = cache_tokens(v_cache, table, b, lengths[b])[None].transpose(0, 2, 1, 3)
        out, lse = reference.attention(q[b : b + 1].transpose(0, 2, 1, 3), k, v, **options)
        outs.append(out.transpose(0, 2, 1, 3)[0])
        lses.append(lse[0])
    return np.stack(outs), np.stack(lses)


def make_cache(rng, form, dtype, capacity_pages=3, page_size=5):
    """Caches, the block table the reference reads them through (identity for dense), and the
    table to pass (None for dense)."""
    if form == "dense":
        shape = (BATCH, capacity_pages * page_size, KV_HEADS, DIM)
        table = np.arange(BATCH, dtype=np.int32)[:, None]
        passed = None
    else:
        num_blocks = BATCH * capacity_pages + 1  # one block no sequence uses
        shape = (num_blocks, page_size, KV_HEADS, DIM)
        table = rng.permutation(num_blocks)[: BATCH * capacity_pages].reshape(BATCH, capacity_pages).astype(np.int32)
        passed = table
    k_cache = rng.standard_normal(shape).astype(dtype)
    v_cache = rng.standard_normal(shape).astype(dtype)
    return k_cache, v_cache, table, passed


@pytest.mark.parametrize("form", ["dense", "paged"])
@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.float16, "f16")])
@pytest.mark.parametrize("on_device", [False, True])
@pytest.mark.parametrize("seq_q,seq_new", [(1, 1), (3, 3), (2, 0)])
def test_kvcache(context, rng, form, dtype, name, on_device, seq_q, seq_new):
    k_cache, v_cache, table, passed_table = make_cache(rng, form, dtype)
    lengths = np.array([4, 9], dtype=np.int32)  # 4 + 3 crosses the page edge at 5, 9 + 1 reaches 10
    q = rng.standard_normal((BATCH, seq_q, HEADS, DIM)).astype(dtype)
    k = rng.standard_normal((BATCH, seq_new, KV_HEADS, DIM)).astype(dtype) if seq_new else None
    v = rng.standard_normal((BATCH, seq_new, KV_HEADS, DIM)).astype(dtype) if seq_new else None

    # What the caches hold after the append, and the attention over them.
    k_after, v_after = k_cache.copy(), v_cache.copy()
    page_size = k_cache.shape[1]
    for b in range(BATCH):
        for s in range(seq_new):
            t = lengths[b] + s
            k_after[table[b, t // page_size], t % page_size] = k[b, s]
            v_after[table[b, t // page_size], t % page_size] = v[b, s]
    expected, expected_lse = expected_attention(q, k_after, v_after, table, lengths + seq_new, causal="bottom-right")

    args = (q, k_cache, v_cache, k, v)
    if on_device:
        args = tuple(None if x is None else vkattn.asarray(x, context=context) for x in args)
    out, lse = vkattn.flash_attn_with_kvcache(
        *args, cache_seqlens=lengths, block_table=passed_table, causal=True, return_softmax_lse=True, context=context
    )
    if on_device:
        assert isinstance(out, vkattn.DeviceArray) and isinstance(lse, vkattn.DeviceArray)
        caches = (args[1].numpy(), args[2].numpy())
        out, lse = out.numpy(), lse.numpy()
    else:
        caches = (k_cache, v_cache)  # the caller's arrays, appended to in place
    assert out.shape == (BATCH, seq_q, HEADS, DIM) and out.dtype == dtype and lse.shape == (BATCH, HEADS, seq_q)
    reference.assert_close(out, expected, v_after, name)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-3 if name == "f16" else 1e-5, atol=1e-3)
    np.testing.assert_array_equal(caches[0], k_after)
    np.testing.assert_array_equal(caches[1], v_after)


@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.float16, "f16")])
@pytest.mark.parametrize("window", [(-1, -1), (6, 0)])
def test_kvcache_shared_prefix(context, rng, dtype, name, window):
    """Three sequences whose block tables start with the same two pages (a prompt they share): the
    call reads them once for the batch (cascade) where its options allow, and without the cascade
    under a window; the same answers either way."""
    page_size, shared, own = 5, 2, 2
    num_blocks = shared + 3 * own + 1
    order = rng.permutation(num_blocks).astype(np.int32)
    table = np.stack([np.concatenate([order[:shared], order[shared + own * b : shared + own * (b + 1)]]) for b in range(3)])
    k_cache = rng.standard_normal((num_blocks, page_size, KV_HEADS, DIM)).astype(dtype)
    v_cache = rng.standard_normal((num_blocks, page_size, KV_HEADS, DIM)).astype(dtype)
    lengths = np.array([10, 13, 17], dtype=np.int32)  # the prefix alone, then one and two pages of their own
    q = rng.standard_normal((3, 1, HEADS, DIM)).astype(dtype)
    k = rng.standard_normal((3, 1, KV_HEADS, DIM)).astype(dtype)
    v = rng.standard_normal((3, 1, KV_HEADS, DIM)).astype(dtype)
    k_after, v_after = k_cache.copy(), v_cache.copy()
    for b in range(3):
        t = lengths[b]
        k_after[table[b, t // page_size], t % page_size] = k[b, 0]
        v_after[table[b, t // page_size], t % page_size] = v[b, 0]
    options = {"window": window} if window != (-1, -1) else {}
    expected, expected_lse = expected_attention(q, k_after, v_after, table, lengths + 1, causal="bottom-right", **options)
    out, lse = vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lengths, block_table=table,
                                              causal=True, window_size=window, return_softmax_lse=True, context=context)
    reference.assert_close(out, expected, v_after, name)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-3 if name == "f16" else 1e-5, atol=1e-3)
    np.testing.assert_array_equal(k_cache, k_after)


@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.float16, "f16")])
def test_kvcache_latent_cache(context, rng, dtype, name):
    """Multi-head latent attention's one cache (DeepSeek's MLA, here 96/64 wide): V is the first 64
    columns of K's rows, given as a view of the host cache (k_cache[..., :64]) or as v_cache=None with
    head_dim_v on the device; k alone is appended. Three sequences share their first page (the
    cascade runs too); the same answers as the reference over separate copies of the rows."""
    dim, dim_v, heads, page_size = 96, 64, 8, 4
    num_blocks = 8
    table = np.array([[5, 2, 7], [5, 0, 3], [5, 6, 1]], dtype=np.int32)  # page 5 shared
    lengths = np.array([4, 6, 9], dtype=np.int32)
    cache = rng.standard_normal((num_blocks, page_size, 1, dim)).astype(dtype)
    q = rng.standard_normal((3, 1, heads, dim)).astype(dtype)
    k = rng.standard_normal((3, 1, 1, dim)).astype(dtype)
    after = cache.copy()
    for b in range(3):
        t = lengths[b]
        after[table[b, t // page_size], t % page_size] = k[b, 0]
    expected, expected_lse = expected_attention(q, after, after[..., :dim_v], table, lengths + 1, causal="bottom-right")
    device_cache = vkattn.asarray(cache, context=context)

    out, lse = vkattn.flash_attn_with_kvcache(q, cache, cache[..., :dim_v], k, cache_seqlens=lengths, block_table=table,
                                              causal=True, return_softmax_lse=True, context=context)
    assert out.shape == (3, 1, heads, dim_v)
    reference.assert_close(out, expected, after[..., :dim_v], name)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-3 if name == "f16" else 1e-5, atol=1e-3)
    np.testing.assert_array_equal(cache, after)  # the view's rows are K's, appended once

    on_device = vkattn.flash_attn_with_kvcache(
        vkattn.asarray(q, context=context), device_cache, None, vkattn.asarray(k, context=context),
        cache_seqlens=lengths, block_table=table, causal=True, head_dim_v=dim_v,
    )
    np.testing.assert_array_equal(on_device.numpy(), out)
    np.testing.assert_array_equal(device_cache.numpy(), after)

    with pytest.raises(vkattn.Error, match="head_dim_v"):
        vkattn.flash_attn_with_kvcache(q, cache, None, cache_seqlens=lengths, block_table=table, context=context)
    with pytest.raises(vkattn.Error, match="head_dim_v: given only"):
        vkattn.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=lengths, block_table=table, head_dim_v=dim_v,
                                       context=context)
    with pytest.raises(vkattn.Error, match="head_dim_v: 97"):
        vkattn.flash_attn_with_kvcache(q, cache, None, cache_seqlens=lengths, block_table=table, head_dim_v=dim + 1,
                                       context=context)
    with pytest.raises(vkattn.Error, match="k alone is appended"):
        vkattn.flash_attn_with_kvcache(q, cache, None, k, k, cache_seqlens=lengths, block_table=table,
                                       head_dim_v=dim_v, context=context)
    np.testing.assert_array_equal(cache, after)


def test_decode_loop_on_device(context, rng):
    """Token after token into a device cache: each step's output equals a fresh call on the host."""
    k_cache, v_cache, table, _ = make_cache(rng, "paged", np.float16)
    dk, dv = vkattn.asarray(k_cache, context=context), vkattn.asarray(v_cache, context=context)
    lengths = np.array([0, 2], dtype=np.int32)
    for step in range(6):
        q, k, v = (rng.standard_normal((BATCH, 1, h, DIM)).astype(np.float16) for h in (HEADS, KV_HEADS, KV_HEADS))
        out = vkattn.flash_attn_with_kvcache(
            vkattn.asarray(q, context=context), dk, dv, vkattn.asarray(k, context=context),
            vkattn.asarray(v, context=context), cache_seqlens=lengths, block_table=table, causal=True,
        )
        host = vkattn.flash_attn_with_kvcache(
            q, k_cache, v_cache, k, v, cache_seqlens=lengths, block_table=table, causal=True, context=context
        )
        np.testing.assert_array_equal(out.numpy(), host)
        # out=: the same result written into the caller's array, which is returned.
        given = vkattn.asarray(np.zeros_like(q), context=context)
        assert vkattn.flash_attn_with_kvcache(
            vkattn.asarray(q, context=context), dk, dv, cache_seqlens=lengths + 1, block_table=table, causal=True,
            out=given,
        ) is given
        np.testing.assert_array_equal(given.numpy(), host)
        lengths = lengths + 1
    np.testing.assert_array_equal(dk.numpy(), k_cache)


def test_options_int_lengths_and_full_cache(context, rng):
    k_cache, v_cache, table, _ = make_cache(rng, "dense", np.float32)
    q = rng.standard_normal((BATCH, 2, HEADS, DIM)).astype(np.float32)
    slopes = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    kwargs = dict(softmax_scale=0.3, window_size=(4, 0), softcap=2.0, alibi_slopes=slopes)
    out = vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=7, context=context, **kwargs)
    ref = dict(scale=0.3, window=(4, 0), softcap=2.0, alibi=slopes)
    expected, _ = expected_attention(q, k_cache, v_cache, table, [7, 7], **ref)
    reference.assert_close(out, expected, v_cache, "f32")
    # No cache_seqlens: the whole cache.
    full = vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, context=context)
    reference.assert_close(full, expected_attention(q, k_cache, v_cache, table, [15, 15])[0], v_cache, "f32")


def test_torch_caches_appended_in_place(context, rng):
    torch = pytest.importorskip("torch")
    k_cache, v_cache, table, _ = make_cache(rng, "paged", np.float32)
    tk, tv = torch.from_numpy(k_cache).bfloat16(), torch.from_numpy(v_cache).bfloat16()
    q = torch.randn(BATCH, 1, HEADS, DIM).bfloat16()
    k, v = torch.randn(BATCH, 1, KV_HEADS, DIM).bfloat16(), torch.randn(BATCH, 1, KV_HEADS, DIM).bfloat16()
    out = vkattn.flash_attn_with_kvcache(q, tk, tv, k, v, cache_seqlens=torch.tensor([5, 0], dtype=torch.int32),
                                         block_table=torch.from_numpy(table), causal=True, context=context)
    assert out.dtype == torch.bfloat16 and out.shape == (BATCH, 1, HEADS, DIM)
    assert torch.equal(tk[table[0, 1], 0], k[0, 0]) and torch.equal(tv[table[1, 0], 0], v[1, 0])


def test_errors(context, rng):
    k_cache, v_cache, table, _ = make_cache(rng, "paged", np.float32)
    q = rng.standard_normal((BATCH, 1, HEADS, DIM)).astype(np.float32)
    k = rng.standard_normal((BATCH, 1, KV_HEADS, DIM)).astype(np.float32)
    before = k_cache.copy()
    # A length that leaves no room for the append: refused before anything is written.
    with pytest.raises(vkattn.Error, match="cache_lens"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, k, cache_seqlens=[15, 0], block_table=table,
                                       context=context)
    with pytest.raises(vkattn.Error, match="block_table"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, k, cache_seqlens=[0, 0], block_table=table + 100,
                                       context=context)
    np.testing.assert_array_equal(k_cache, before)
    with pytest.raises(vkattn.Error, match="k, v"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, cache_seqlens=0, block_table=table, context=context)
    with pytest.raises(vkattn.Error, match="cache_seqlens: required"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, k, block_table=table, context=context)
    with pytest.raises(vkattn.Error, match="C-contiguous"):
        strided = np.zeros((7, 10, KV_HEADS, DIM), np.float32)[:, ::2]
        vkattn.flash_attn_with_kvcache(q, strided, strided, k, k, cache_seqlens=0, block_table=table, context=context)
    with pytest.raises(TypeError, match="int"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=0, block_table=table.astype(np.float32),
                                       context=context)
    with pytest.raises(TypeError, match="device array"):
        vkattn.flash_attn_with_kvcache(vkattn.asarray(q, context=context), k_cache, v_cache, cache_seqlens=0,
                                       block_table=table)
    with pytest.raises(vkattn.Error, match="out: expected shape"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=0, block_table=table, out=q[:1],
                                       context=context)
    with pytest.raises(TypeError, match="dtype"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=0, block_table=table,
                                       out=q.astype(np.float16), context=context)
    with pytest.raises(vkattn.Error, match="dense cache"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=0, context=context)


def test_shared_prefix_pages(context, rng):
    """Two sequences reading one prefix page (read-only sharing, as a prefix cache does), each
    appending into its own page; an append into the shared page is refused."""
    page_size = 4
    k_cache = rng.standard_normal((5, page_size, KV_HEADS, DIM)).astype(np.float32)
    v_cache = rng.standard_normal((5, page_size, KV_HEADS, DIM)).astype(np.float32)
    table = np.array([[0, 1, 2], [0, 3, 4]], dtype=np.int32)  # page 0 shared
    lengths = np.array([5, 6], dtype=np.int32)
    q = rng.standard_normal((BATCH, 1, HEADS, DIM)).astype(np.float32)
    k = rng.standard_normal((BATCH, 1, KV_HEADS, DIM)).astype(np.float32)
    k_after = k_cache.copy()
    k_after[1, 1], k_after[3, 2] = k[0, 0], k[1, 0]
    v_after = v_cache.copy()
    v_after[1, 1], v_after[3, 2] = k[0, 0], k[1, 0]
    out = vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, k, cache_seqlens=lengths, block_table=table,
                                         causal=True, context=context)
    expected, _ = expected_attention(q, k_after, v_after, table, lengths + 1, causal="bottom-right")
    reference.assert_close(out, expected, v_after, "f32")
    np.testing.assert_array_equal(k_cache, k_after)
    # Appending at token 3 of both sequences writes page 0's last row twice: refused, nothing written.
    with pytest.raises(vkattn.Error, match="appended row must belong to its own token alone"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, k, cache_seqlens=[3, 3], block_table=table,
                                       context=context)
    np.testing.assert_array_equal(k_cache, k_after)


def test_kvcache_cascade_option(context, rng):
    """cascade=True runs the cascade where the automatic rule would not (18 query heads on one KV
    head: 18 rows a sequence, past its 16), cascade=False never: the same answers, and two plans (the
    plan cache keys on the shared prefix, so a cascade that did not run would reuse the first); the
    default then finds the plan without it. Under a window the prefix is hidden from some query:
    cascade=True is refused, nothing appended."""
    page_size, shared, own, heads = 5, 2, 2, 18
    num_blocks = shared + 3 * own
    order = rng.permutation(num_blocks).astype(np.int32)
    table = np.stack([np.concatenate([order[:shared], order[shared + own * b : shared + own * (b + 1)]]) for b in range(3)])
    k_cache = rng.standard_normal((num_blocks, page_size, 1, DIM)).astype(np.float32)
    v_cache = rng.standard_normal((num_blocks, page_size, 1, DIM)).astype(np.float32)
    lengths = np.array([20, 17, 19], dtype=np.int32)  # a 10-token prefix, then 10, 7 and 9 of their own
    q = rng.standard_normal((3, 1, heads, DIM)).astype(np.float32)
    expected, expected_lse = expected_attention(q, k_cache, v_cache, table, lengths, causal="bottom-right")
    context.clear_plan_cache()
    before = context.plan_cache_info()  # (its counts run on from earlier calls)
    for i, cascade in enumerate((False, True)):
        out, lse = vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, block_table=table,
                                                  causal=True, return_softmax_lse=True, cascade=cascade,
                                                  context=context)
        reference.assert_close(out, expected, v_cache, "f32")
        np.testing.assert_allclose(lse, expected_lse, rtol=1e-5, atol=1e-3)
        assert context.plan_cache_info()["misses"] == before["misses"] + i + 1
    vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, block_table=table, causal=True,
                                   return_softmax_lse=True, context=context)
    assert context.plan_cache_info()["hits"] == before["hits"] + 1  # the default: cascade=False's plan
    k = rng.standard_normal((3, 1, 1, DIM)).astype(np.float32)
    k_before = k_cache.copy()
    with pytest.raises(vkattn.Error, match="cascade: True"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, k, cache_seqlens=lengths - 1, block_table=table,
                                       causal=True, window_size=(6, 0), cascade=True, context=context)
    np.testing.assert_array_equal(k_cache, k_before)
    with pytest.raises(TypeError, match="cascade"):
        vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, block_table=table, cascade=1,
                                       context=context)
