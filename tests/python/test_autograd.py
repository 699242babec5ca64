"""vkattn's backward under torch.autograd (vkattn/_autograd.py): the gradients of
scaled_dot_product_attention, flash_attn_func and flash_attn_varlen_func against torch autograd through
float64 textbook attention (torch_reference.py), and a small model that trains with vkattn inside."""

import numpy as np
import pytest

import reference
import vkattn

torch = pytest.importorskip("torch")
import torch_reference  # noqa: E402  (imports torch)

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# Bounds on max|vkattn - reference| / max|reference| of the output and each gradient: f32 from the
# library's f32 accumulation; f16 and bf16 from rounding Q, K, V, O and dO to them (a few units of
# their last place, summed over a row).
TOLERANCE = {"f32": 2e-5, "f16": 4e-3, "bf16": 3e-2}


def leaves(generator, shapes, dtype):
    """Random tensors of `dtype` that require grad, and their float64 copies that do too."""
    tensors = [torch.randn(shape, generator=generator).to(TORCH_DTYPES[dtype]).requires_grad_() for shape in shapes]
    return tensors, [t.detach().double().requires_grad_() for t in tensors]


def assert_close(actual, expected, dtype, what):
    assert actual is not None, f"{what}: no gradient"
    actual, expected = actual.detach().double(), expected.detach()
    assert torch.isfinite(actual).all(), f"{what}: not finite"
    scale = max(expected.abs().max().item(), 1e-6)
    error = (actual - expected).abs().max().item() / scale
    assert error <= TOLERANCE[dtype], f"{what}: max error {error:.3g} (relative to max|reference|) for {dtype}"


def check_gradients(call, expected_call, shapes, dtype="f32", seed=0):
    """Runs `call` on tensors of `shapes` and `expected_call` on their float64 copies, back-propagates
    the same random dO through both, and compares the outputs and every input's gradient."""
    generator = torch.Generator().manual_seed(seed)
    tensors, doubles = leaves(generator, shapes, dtype)
    out = call(*tensors)
    assert out.grad_fn is not None and out.dtype == tensors[0].dtype
    grad_out = torch.randn(out.shape, generator=generator).to(out.dtype)
    out.backward(grad_out)
    expected = expected_call(*doubles)
    expected.backward(grad_out.double())
    assert_close(out, expected, dtype, "out")
    for index, (t, d) in enumerate(zip(tensors, doubles)):
        assert t.grad.dtype == t.dtype and t.grad.shape == t.shape
        assert_close(t.grad, d.grad, dtype, f"gradient of input {index}")


def sdpa_shapes(batch, heads, kv_heads, seq_q, seq_k, dim, dim_v=None):
    return [(batch, heads, seq_q, dim), (batch, kv_heads, seq_k, dim), (batch, kv_heads, seq_k, dim_v or dim)]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_dense(context, dtype):
    check_gradients(
        lambda q, k, v: vkattn.scaled_dot_product_attention(q, k, v, context=context),
        lambda q, k, v: torch_reference.attention(q, k, v),
        sdpa_shapes(2, 3, 3, 7, 13, 8, dim_v=5),
        dtype,
    )


def test_gqa_sums_the_group(context):
    check_gradients(
        lambda q, k, v: vkattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=0.3, context=context),
        lambda q, k, v: torch_reference.attention(q, k, v, scale=0.3),
        sdpa_shapes(1, 4, 2, 5, 9, 8),
    )


@pytest.mark.parametrize("causal", ["top-left", "bottom-right"])
@pytest.mark.parametrize("seq_q,seq_k", [(5, 11), (11, 5)])
def test_causal(context, causal, seq_q, seq_k):
    # bottom-right with seq_q > seq_k has rows that see no key: 0 output, 0 gradient, never NaN.
    check_gradients(
        lambda q, k, v: vkattn.scaled_dot_product_attention(q, k, v, causal=causal, context=context),
        lambda q, k, v: torch_reference.attention(q, k, v, causal=causal),
        sdpa_shapes(1, 2, 2, seq_q, seq_k, 8),
    )


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks(context, kind):
    generator = torch.Generator().manual_seed(5)
    mask = torch.rand(2, 1, 6, 10, generator=generator) < 0.7
    if kind == "float":
        mask = torch.where(mask, torch.randn(2, 1, 6, 10, generator=generator), torch.tensor(-torch.inf))
    check_gradients(
        lambda q, k, v: vkattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, context=context),
        lambda q, k, v: torch_reference.attention(q, k, v, mask=mask),
        sdpa_shapes(2, 2, 2, 6, 10, 8),
    )


def test_window_softcap_alibi(context):
    slopes = torch.tensor([0.25, 0.5])
    options = dict(window=(3, 2), softcap=2.0)
    check_gradients(
        lambda q, k, v: vkattn.scaled_dot_product_attention(q, k, v, alibi_slopes=slopes, context=context, **options),
        lambda q, k, v: torch_reference.attention(q, k, v, alibi=slopes, **options),
        sdpa_shapes(1, 2, 2, 7, 12, 8),
    )


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_sinks_get_a_gradient(context, dtype):
    shapes = sdpa_shapes(2, 3, 3, 6, 9, 8) + [(3,)]
    check_gradients(
        lambda q, k, v, sinks: vkattn.scaled_dot_product_attention(q, k, v, sinks=sinks, is_causal=True,
                                                                   context=context),
        lambda q, k, v, sinks: torch_reference.attention(q, k, v, sinks=sinks, causal="top-left"),
        shapes,
        dtype,
    )


def test_sinks_alone_require_grad(context):
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    sinks = torch.zeros(2, requires_grad=True)
    vkattn.scaled_dot_product_attention(q, k, v, sinks=sinks, context=context).sum().backward()
    expected = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    torch_reference.attention(q.double(), k.double(), v.double(), sinks=expected).sum().backward()
    assert_close(sinks.grad, expected.grad, "f32", "sinks")


def test_strided_inputs(context):
    # Q, K and V as views of one (B, S, 3, H, D) tensor, transposed: the gradient flows back into it.
    generator = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 7, 3, 2, 8, generator=generator, requires_grad=True)
    qkv64 = qkv.detach().double().requires_grad_()
    out = vkattn.scaled_dot_product_attention(*(t.transpose(1, 2) for t in qkv.unbind(2)), context=context)
    expected = torch_reference.attention(*(t.transpose(1, 2) for t in qkv64.unbind(2)))
    grad_out = torch.randn(out.shape, generator=generator)
    out.backward(grad_out)
    expected.backward(grad_out.double())
    assert_close(qkv.grad, qkv64.grad, "f32", "qkv")


def test_lse_has_no_gradient(context):
    q, k, v = (torch.randn(1, 2, 4, 8, requires_grad=True) for _ in range(3))
    out, lse = vkattn.scaled_dot_product_attention(q, k, v, return_lse=True, context=context)
    assert out.grad_fn is not None and not lse.requires_grad
    expected, expected_lse = reference.attention(q, k, v)
    np.testing.assert_allclose(lse.numpy(), expected_lse, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert q.grad is not None


def test_no_graph_without_requires_grad(context):
    q = torch.randn(1, 2, 4, 8)
    assert vkattn.scaled_dot_product_attention(q, q, q, context=context).grad_fn is None
    leaf = q.clone().requires_grad_()
    with torch.no_grad():
        assert vkattn.scaled_dot_product_attention(leaf, leaf, leaf, context=context).grad_fn is None


def bshd(t):
    return t.transpose(1, 2)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_flash_attn_func(context, dtype):
    shapes = [(2, 6, 4, 8), (2, 10, 2, 8), (2, 10, 2, 8)]  # (batch, seq, heads, dim), GQA
    check_gradients(
        lambda q, k, v: vkattn.flash_attn_func(q, k, v, causal=True, softcap=3.0, context=context),
        lambda q, k, v: bshd(torch_reference.attention(bshd(q), bshd(k), bshd(v), causal="bottom-right",
                                                       softcap=3.0)),
        shapes,
        dtype,
    )


def test_flash_attn_func_with_probs(context):
    q, k, v = (torch.randn(1, 5, 2, 8, requires_grad=True) for _ in range(3))
    out, lse, probs = vkattn.flash_attn_func(q, k, v, return_attn_probs=True, context=context)
    assert out.grad_fn is not None and not lse.requires_grad and not probs.requires_grad
    assert probs.shape == (1, 2, 5, 5)
    out.sum().backward()
    assert k.grad is not None


def test_flash_attn_varlen_func(context):
    lengths_q, lengths_k = [3, 5, 1], [4, 2, 6]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lengths_q)]), dtype=torch.int32)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lengths_k)]), dtype=torch.int32)

    def expected(q, k, v):  # each sequence as its own dense call, bottom-right causal
        parts = []
        for b in range(3):
            qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
            one = torch_reference.attention(q[None, qs].transpose(1, 2), k[None, ks].transpose(1, 2),
                                            v[None, ks].transpose(1, 2), causal="bottom-right")
            parts.append(one.transpose(1, 2)[0])
        return torch.cat(parts)

    check_gradients(
        lambda q, k, v: vkattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 6, causal=True, context=context),
        expected,
        [(9, 4, 8), (12, 2, 8), (12, 2, 8)],
    )


def test_dropout_backward_uses_the_forward_mask(context):
    # With V the identity, O is the dropped weights P∘Z themselves: Z is read off the forward's output,
    # and the reference with that Z must give vkattn's gradients (so the backward drew the same mask).
    p, seq = 0.3, 8
    generator = torch.Generator().manual_seed(11)
    q = torch.randn(1, 2, seq, 8, generator=generator, requires_grad=True)
    k = torch.randn(1, 2, seq, 8, generator=generator, requires_grad=True)
    v = torch.eye(seq).expand(1, 2, seq, seq).clone().requires_grad_()
    out = vkattn.scaled_dot_product_attention(q, k, v, dropout_p=p, context=context)
    weights = torch.from_numpy(reference.weights(q, k))
    dropout = torch.round(out.detach().double() / weights * (1 - p)) / (1 - p)
    assert ((dropout == 0) | (dropout == 1 / (1 - p))).all() and (dropout == 0).any()
    grad_out = torch.randn(out.shape, generator=generator)
    out.backward(grad_out)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    torch_reference.attention(q64, k64, v64, dropout=dropout).backward(grad_out.double())
    for name, t, d in (("q", q, q64), ("k", k, k64), ("v", v, v64)):
        assert_close(t.grad, d.grad, "f32", name)


def test_a_small_model_trains(context):
    # One self-attention layer (torch Linear projections around vkattn's attention) learns to copy the
    # token one step back: the loss falls well below its start.
    torch.manual_seed(0)
    vocab, dim, seq = 8, 16, 6
    embed = torch.nn.Embedding(vocab, dim)
    qkv = torch.nn.Linear(dim, 3 * dim)
    head = torch.nn.Linear(dim, vocab)
    position = torch.nn.Parameter(0.1 * torch.randn(seq, dim))
    parameters = [*embed.parameters(), *qkv.parameters(), *head.parameters(), position]
    optimizer = torch.optim.Adam(parameters, lr=0.03)
    tokens = torch.randint(0, vocab, (16, seq))
    targets = torch.roll(tokens, 1, dims=1)
    losses = []
    for _ in range(40):
        x = embed(tokens) + position
        q, k, v = qkv(x).view(16, seq, 3, 2, dim // 2).unbind(2)  # two heads, (batch, seq, heads, dim)
        attended = vkattn.flash_attn_func(q, k, v, causal=True, context=context).reshape(16, seq, dim)
        loss = torch.nn.functional.cross_entropy(head(attended + x)[:, 1:].reshape(-1, vocab),
                                                 targets[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_torch_sdpa_gradients(context, is_causal):
    # torch 1.13's own attention (its private _scaled_dot_product_attention) differentiated by torch.
    sdpa = getattr(torch.nn.functional, "_scaled_dot_product_attention", None)
    if sdpa is None:
        pytest.skip("this torch has no _scaled_dot_product_attention")
    generator = torch.Generator().manual_seed(7)
    tensors = [torch.randn(2, 3, 9, 16, generator=generator, requires_grad=True) for _ in range(3)]
    copies = [t.detach().clone().requires_grad_() for t in tensors]
    mask = torch.randn(2, 1, 9, 9, generator=generator)
    grad_out = torch.randn(2, 3, 9, 16, generator=generator)
    vkattn.scaled_dot_product_attention(*tensors, attn_mask=mask, is_causal=is_causal,
                                        context=context).backward(grad_out)
    # torch 1.13 refuses a mask with is_causal: fold the causal mask into the float mask.
    causal = torch.ones(9, 9).tril().log() if is_causal else 0.0
    sdpa(*copies, mask + causal, 0.0, False, False)[0].backward(grad_out)
    for t, c in zip(tensors, copies):
        torch.testing.assert_close(t.grad, c.grad, rtol=1e-4, atol=1e-4)


def test_backward_is_deterministic(context):
    generator = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(1, 4, 33, 16, generator=generator) for _ in range(3))
    grad_out = torch.randn(1, 4, 33, 16, generator=generator)
    grads = []
    for _ in range(2):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        vkattn.scaled_dot_product_attention(*leaves, is_causal=True, context=context).backward(grad_out)
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_errors_in_the_autograd_path(context):
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    with pytest.raises(vkattn.Error, match="heads"):
        vkattn.scaled_dot_product_attention(q, torch.randn(1, 3, 4, 8), torch.randn(1, 3, 4, 8), context=context)
    with pytest.raises(TypeError):
        vkattn.scaled_dot_product_attention(q, q.double(), q, context=context)
    with pytest.raises(vkattn.Error):
        vkattn.flash_attn_varlen_func(q[0].transpose(0, 1), q[0].transpose(0, 1), q[0].transpose(0, 1),
                                      [0, 3, 2], [0, 2, 4], 4, 4, context=context)
    out = vkattn.scaled_dot_product_attention(q, q, q, context=context)
    (grad_q,) = torch.autograd.grad(out.sum(), q, create_graph=True)
    with pytest.raises(RuntimeError):  # once_differentiable: no second order
        grad_q.sum().backward()


def test_varlen_dropout_backward_uses_the_forward_mask(context):
    # As the dense test: V (total_k, heads, total_k) holds each key's one-hot row, so O is P∘Z over
    # every key (0 outside the query's sequence); P comes from the same call (attn_probs, before
    # dropout), so Z = O / P where P > 0, and the reference with that Z must give the gradients.
    p, heads = 0.25, 2
    lengths_q, lengths_k = [4, 3], [5, 6]
    cu_q = np.concatenate([[0], np.cumsum(lengths_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lengths_k)]).astype(np.int32)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    generator = torch.Generator().manual_seed(13)
    q = torch.randn(total_q, heads, 8, generator=generator, requires_grad=True)
    k = torch.randn(total_k, heads, 8, generator=generator, requires_grad=True)
    v = torch.eye(total_k)[:, None, :].expand(total_k, heads, total_k).clone().requires_grad_()
    out, _, probs = vkattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), dropout_p=p,
                                                  return_attn_probs=True, context=context)
    kept = out.detach().double().transpose(0, 1)  # (heads, total_q, total_k): P∘Z
    weights = probs.double()
    dropout = torch.where(weights > 0, torch.round(kept / torch.where(weights > 0, weights, 1.0) * (1 - p)) / (1 - p),
                          torch.zeros_like(weights))
    assert ((dropout == 0) | (dropout == 1 / (1 - p))).all() and (dropout == 0).any()
    grad_out = torch.randn(out.shape, generator=generator)
    out.backward(grad_out)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    parts = []
    for b in range(2):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        z = dropout[None, :, qs, ks]
        one = torch_reference.attention(q64[None, qs].transpose(1, 2), k64[None, ks].transpose(1, 2),
                                        v64[None, ks].transpose(1, 2), dropout=z)
        parts.append(one.transpose(1, 2)[0])
    torch.cat(parts).backward(grad_out.double())
    for name, t, d in (("q", q, q64), ("k", k, k64), ("v", v, v64)):
        assert_close(t.grad, d.grad, "f32", name)
