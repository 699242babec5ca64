"""Wrong arguments raise the right exceptions, never a crash: vkattn.Error (a ValueError) for a bad
shape, length or value, TypeError for a wrong type or dtype."""

import numpy as np
import pytest

import vkattn


def arrays(*shape, dtype=np.float32):
    return np.zeros(shape, dtype=dtype)


def test_error_classes():
    assert issubclass(vkattn.Error, ValueError)
    assert issubclass(vkattn.DeviceError, vkattn.Error) and issubclass(vkattn.DeviceError, RuntimeError)


@pytest.mark.parametrize(
    "make",
    [
        lambda q: (q.tolist(), q, q),  # a list
        lambda q: (q.astype(np.float64), q, q),  # float64
        lambda q: (q.astype(np.int32), q, q),  # integers
        lambda q: (q, q.astype(np.float16), q),  # dtypes differ
        lambda q: (q, "key", q),
    ],
)
def test_type_errors(context, make):
    q = arrays(1, 2, 4, 8)
    with pytest.raises(TypeError):
        vkattn.scaled_dot_product_attention(*make(q), context=context)


def test_torch_type_errors(context):
    torch = pytest.importorskip("torch")
    t = torch.zeros(1, 2, 4, 8)
    with pytest.raises(TypeError):
        vkattn.scaled_dot_product_attention(t, t.numpy(), t, context=context)  # kinds differ
    with pytest.raises(TypeError):
        vkattn.scaled_dot_product_attention(t.double(), t.double(), t.double(), context=context)
    with pytest.raises(TypeError):
        vkattn.scaled_dot_product_attention(t, t, t, attn_mask=torch.zeros(4, 8, dtype=torch.int64), context=context)


@pytest.mark.parametrize(
    "kwargs,shapes",
    [
        ({}, [(2, 4, 8), (2, 4, 8), (2, 4, 8)]),  # 3-D
        ({}, [(1, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8)]),  # batches differ
        ({}, [(1, 2, 4, 8), (1, 2, 4, 9), (1, 2, 4, 8)]),  # head dims differ
        ({}, [(1, 2, 4, 600), (1, 2, 4, 600), (1, 2, 4, 600)]),  # head dim above 576
        ({}, [(1, 2, 4, 8), (1, 2, 5, 8), (1, 2, 4, 8)]),  # key and value lengths differ
        ({}, [(1, 4, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)]),  # GQA without enable_gqa
        ({"enable_gqa": True}, [(1, 3, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)]),  # 3 heads over 2
        ({"attn_mask": np.ones((3, 8), bool)}, [(1, 2, 4, 8)] * 3),  # mask does not broadcast
        ({"causal": "diagonal"}, [(1, 2, 4, 8)] * 3),
        ({"is_causal": True, "causal": "bottom-right"}, [(1, 2, 4, 8)] * 3),
        ({"dropout_p": 1.5}, [(1, 2, 4, 8)] * 3),
        ({"softcap": -1.0}, [(1, 2, 4, 8)] * 3),
        ({"window": (-2, 3)}, [(1, 2, 4, 8)] * 3),
        ({"alibi_slopes": np.ones(3, np.float32)}, [(1, 2, 4, 8)] * 3),
        ({"sinks": np.ones((2, 2), np.float32)}, [(1, 2, 4, 8)] * 3),
        ({"scale": float("inf")}, [(1, 2, 4, 8)] * 3),
        ({}, [(1, 2, 0, 8), (1, 2, 4, 8), (1, 2, 4, 8)]),  # an empty sequence
    ],
)
def test_value_errors(context, kwargs, shapes):
    q, k, v = (arrays(*s) for s in shapes)
    with pytest.raises(vkattn.Error) as caught:
        vkattn.scaled_dot_product_attention(q, k, v, context=context, **kwargs)
    assert isinstance(caught.value, ValueError) and caught.value.code == "invalid_argument" and str(caught.value)


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"window": 3}, TypeError),
        ({"window": (1.5, 2)}, TypeError),
        ({"causal": True}, TypeError),
        ({"scale": "big"}, TypeError),
        ({"is_causal": 1}, TypeError),
        ({"context": "gpu"}, TypeError),
    ],
)
def test_option_type_errors(context, kwargs, error):
    q = arrays(1, 2, 4, 8)
    kwargs.setdefault("context", context)
    with pytest.raises(error):
        vkattn.scaled_dot_product_attention(q, q, q, **kwargs)


def test_flash_errors(context):
    q = arrays(1, 4, 2, 8)
    with pytest.raises(vkattn.Error):
        vkattn.flash_attn_func(q[0], q[0], q[0], context=context)
    with pytest.raises(TypeError):
        vkattn.flash_attn_func(q, q, q, causal="yes", context=context)
    with pytest.raises(vkattn.Error):
        vkattn.flash_attn_func(q, q, q, window_size=(-5, 0), context=context)


@pytest.mark.parametrize(
    "cu_q,cu_k,max_q,max_k",
    [
        ([0, 3, 2, 5], [0, 2, 4, 6], 3, 2),  # decreasing
        ([0, 2, 4, 5], [0, 2, 4, 7], 2, 3),  # does not end at total_k
        ([1, 2, 4, 5], [0, 2, 4, 6], 2, 2),  # does not start at 0
        ([0, 2, 4, 5], [0, 2, 4, 6], 1, 2),  # max_seqlen_q too small
        ([0, 5], [0, 6], 5, 7),  # max_seqlen_k beyond total_k
        ([0], [0], 0, 0),  # no sequence
    ],
)
def test_varlen_value_errors(context, cu_q, cu_k, max_q, max_k):
    q, k = arrays(5, 2, 8), arrays(6, 2, 8)
    with pytest.raises(vkattn.Error):
        vkattn.flash_attn_varlen_func(q, k, k, np.array(cu_q), np.array(cu_k), max_q, max_k, context=context)


def test_varlen_type_errors(context):
    q = arrays(5, 2, 8)
    with pytest.raises(TypeError):
        vkattn.flash_attn_varlen_func(q, q, q, np.array([0.0, 5.0]), np.array([0, 5]), 5, 5, context=context)
    with pytest.raises(TypeError):
        vkattn.flash_attn_varlen_func(q, q, q, [0, 5], [0, 5], 5.0, 5, context=context)


def test_context_errors():
    with pytest.raises(TypeError):
        vkattn.Context(device=1.5)
    with pytest.raises(vkattn.Error):
        vkattn.Context(device="no such device")
    with pytest.raises(vkattn.Error):
        vkattn.Context(device=99)
