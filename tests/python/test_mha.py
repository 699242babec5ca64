"""vkattn.MultiheadAttention against torch.nn.MultiheadAttention loaded with the same state_dict:
outputs, weights, masks, layouts, and (through autograd) every gradient."""

import numpy as np
import pytest

import vkattn

torch = pytest.importorskip("torch")

TOLERANCE = 2e-5  # max|vkattn - torch| / max(1, max|torch|): both float32


def assert_close(actual, expected, what="out"):
    actual, expected = torch.as_tensor(actual).double(), torch.as_tensor(expected).double()
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    error = (actual - expected).abs().max().item() / max(1.0, expected.abs().max().item())
    assert error <= TOLERANCE, f"{what}: max error {error:.3g}"


def layers(context, embed_dim=16, num_heads=4, batch_first=True, **kwargs):
    """A torch layer with random weights and biases, and vkattn's with its state_dict."""
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=batch_first, **kwargs)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.1 * torch.randn(p.shape))  # non-zero biases too
    layer = vkattn.MultiheadAttention(embed_dim, num_heads, batch_first=batch_first, context=context, **kwargs)
    layer.load_state_dict(reference.state_dict())
    return reference, layer


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("average", [True, False])
def test_self_attention_and_weights(context, batch_first, average):
    reference, layer = layers(context, batch_first=batch_first)
    x = torch.randn((2, 5, 16) if batch_first else (5, 2, 16))
    out, weights = layer(x, x, x, average_attn_weights=average)
    expected, expected_weights = reference(x, x, x, average_attn_weights=average)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert_close(out, expected.detach())
    assert_close(weights, expected_weights.detach(), "weights")


def test_cross_attention_kdim_vdim_numpy(context):
    reference, layer = layers(context, kdim=6, vdim=10, bias=False)
    q, k, v = torch.randn(2, 3, 16), torch.randn(2, 7, 6), torch.randn(2, 7, 10)
    out, weights = layer(q.numpy(), k.numpy(), v.numpy(), need_weights=False)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and weights is None
    assert_close(out, reference(q, k, v, need_weights=False)[0].detach())


def test_masks_and_causal(context):
    reference, layer = layers(context)
    q, kv = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[0, 5:] = True
    padding[1, 0] = True
    float_mask = torch.randn(5, 7)
    bool_mask = torch.rand(5, 7) < 0.3
    bool_mask[:, 3] = False  # every query keeps a key
    for attn_mask in (float_mask, bool_mask):
        out, weights = layer(q, kv, kv, key_padding_mask=padding, attn_mask=attn_mask)
        expected, expected_weights = reference(q, kv, kv, key_padding_mask=padding, attn_mask=attn_mask)
        assert_close(out, expected.detach())
        assert_close(weights, expected_weights.detach(), "weights")
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)  # True = not allowed
    out, _ = layer(q, is_causal=True)
    assert_close(out, reference(q, q, q, attn_mask=causal)[0].detach())


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_per_head_masks(context, kind):
    # A 3-D attn_mask (batch * num_heads, seq_q, seq_k) with key padding, and the gradient through it.
    reference, layer = layers(context)
    generator = torch.Generator().manual_seed(4)
    mask = torch.rand(2 * 4, 5, 6, generator=generator) < 0.3  # True = not allowed
    mask[..., 2] = False
    if kind == "float":
        mask = torch.randn(2 * 4, 5, 6, generator=generator)
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    q = torch.randn(2, 5, 16, requires_grad=True)
    kv = torch.randn(2, 6, 16)
    q64 = q.detach().clone().requires_grad_()
    out, weights = layer(q, kv, kv, key_padding_mask=padding, attn_mask=mask, average_attn_weights=False)
    expected, expected_weights = reference(q64, kv, kv, key_padding_mask=padding, attn_mask=mask,
                                           average_attn_weights=False)
    assert_close(out, expected.detach())
    assert_close(weights, expected_weights.detach(), "weights")
    grad_out = torch.randn(out.shape)
    out.backward(grad_out)
    expected.backward(grad_out)
    assert_close(q.grad, q64.grad, "query")


def test_unbatched(context):
    reference, layer = layers(context)
    x = torch.randn(4, 16)
    out, weights = layer(x, x, x)
    expected, expected_weights = reference(x, x, x)
    assert_close(out, expected.detach())
    assert_close(weights, expected_weights.detach(), "weights")


def test_state_dict_round_trip_and_errors(context):
    reference, layer = layers(context)
    state = layer.state_dict()
    assert set(state) == set(reference.state_dict())
    np.testing.assert_array_equal(state["in_proj_weight"], reference.in_proj_weight.detach().numpy())
    with pytest.raises(vkattn.Error, match="missing entry 'out_proj.bias'"):
        layer.load_state_dict({k: v for k, v in state.items() if k != "out_proj.bias"})
    with pytest.raises(vkattn.Error, match="unexpected entry 'bias_k'"):
        layer.load_state_dict({**state, "bias_k": np.zeros((1, 1, 16))})
    with pytest.raises(vkattn.Error, match="in_proj_weight"):
        layer.load_state_dict({**state, "in_proj_weight": np.zeros((16, 16))})
    with pytest.raises(vkattn.Error):
        vkattn.MultiheadAttention(10, 4, context=context)  # 10 % 4 != 0
    with pytest.raises(TypeError):
        layer(torch.randn(1, 2, 16), key_padding_mask=torch.zeros(1, 2))
    with pytest.raises(vkattn.Error, match="query"):
        layer(torch.randn(1, 2, 8))
    with pytest.raises(TypeError, match="query"):
        layer([[1.0] * 16])
    with pytest.raises(vkattn.Error, match="attn_mask"):
        layer(torch.randn(1, 2, 16), attn_mask=torch.zeros(3, 2, 2))
    with pytest.raises(vkattn.Error, match="key_padding_mask"):
        layer(torch.randn(1, 2, 16), key_padding_mask=torch.zeros(2, 2, dtype=torch.bool))
    with pytest.raises(vkattn.Error, match="key: expected 16 features"):
        layer(torch.randn(1, 2, 16), torch.randn(1, 3, 8), torch.randn(1, 3, 16))


@pytest.mark.parametrize("self_attention", [True, False])
def test_gradients_match_torch(context, self_attention):
    reference, layer = layers(context, kdim=None if self_attention else 6, vdim=None if self_attention else 10)
    # The torch layer's own parameters, kept by the vkattn layer: both accumulate into the same .grad
    # attribute names, so the vkattn run uses a copy of the module.
    copy = torch.nn.MultiheadAttention(16, 4, batch_first=True, kdim=reference.kdim, vdim=reference.vdim)
    copy.load_state_dict(reference.state_dict())
    layer.load_state_dict(dict(copy.named_parameters()))
    q = torch.randn(2, 5, 16, requires_grad=True)
    k = q if self_attention else torch.randn(2, 7, 6, requires_grad=True)
    v = q if self_attention else torch.randn(2, 7, 10, requires_grad=True)
    padding = torch.zeros(2, k.shape[1], dtype=torch.bool)
    padding[1, -2:] = True
    grad_out = torch.randn(2, 5, 16)
    out, _ = layer(q, k, v, key_padding_mask=padding)
    out.backward(grad_out)
    vkattn_grads = {"query": q.grad.clone()}
    if not self_attention:
        vkattn_grads.update(key=k.grad.clone(), value=v.grad.clone())
        k.grad = v.grad = None
    q.grad = None
    expected, _ = reference(q, k, v, key_padding_mask=padding)
    expected.backward(grad_out)
    assert_close(out, expected.detach())
    assert_close(vkattn_grads["query"], q.grad, "query")
    if not self_attention:
        assert_close(vkattn_grads["key"], k.grad, "key")
        assert_close(vkattn_grads["value"], v.grad, "value")
    for (name, mine), (_, theirs) in zip(copy.named_parameters(), reference.named_parameters()):
        assert_close(mine.grad, theirs.grad, name)


def test_layer_trains(context):
    # The vkattn layer with a torch module's parameters, optimised by torch: the loss falls.
    torch.manual_seed(1)
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    layer = vkattn.MultiheadAttention(8, 2, context=context)
    layer.load_state_dict(dict(module.named_parameters()))
    optimizer = torch.optim.Adam(module.parameters(), lr=0.05)
    x, target = torch.randn(4, 5, 8), torch.randn(4, 5, 8)
    losses = []
    for _ in range(25):
        out, _ = layer(x, need_weights=False)
        loss = torch.nn.functional.mse_loss(out, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


def test_gradients_seq_first_with_masks(context):
    # batch_first=False, a float attn_mask and is_causal (torch: folded into the mask), inputs only.
    reference, layer = layers(context, batch_first=False)
    x = torch.randn(6, 2, 16, requires_grad=True)
    x64 = x.detach().clone().requires_grad_()
    float_mask = torch.randn(6, 6)
    out, _ = layer(x, attn_mask=float_mask, is_causal=True, need_weights=False)
    grad_out = torch.randn(out.shape)
    out.backward(grad_out)
    causal = torch.full((6, 6), -torch.inf).triu(1)
    expected, _ = reference(x64, x64, x64, attn_mask=float_mask + causal, need_weights=False)
    expected.backward(grad_out)
    assert_close(out, expected.detach())
    assert_close(x.grad, x64.grad, "x")


def test_backward_refuses_new_weights(context):
    reference, layer = layers(context)
    x = torch.randn(1, 3, 16, requires_grad=True)
    out, _ = layer(x)
    layer.load_state_dict(reference.state_dict())
    with pytest.raises(RuntimeError, match="load_state_dict"):
        out.sum().backward()


def test_threads_share_a_layer(context):
    import threading

    reference, layer = layers(context)
    inputs = [torch.randn(2, 4, 16) for _ in range(4)]
    results = [None] * 4

    def run(i):
        results[i] = layer(inputs[i], need_weights=False)[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, out in zip(inputs, results):
        assert_close(out, reference(x, x, x, need_weights=False)[0].detach())
