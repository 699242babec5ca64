"""Four threads calling at once get what serial calls get, bit for bit; repeated calls reuse their plan."""

import threading

import numpy as np

import vkattn


def test_four_threads_at_once(context):
    rng = np.random.default_rng(7)
    problems = [
        tuple(rng.standard_normal((1, 2, seq, 8)).astype(np.float32) for _ in range(3)) for seq in (5, 9, 13, 17)
    ]
    serial = [vkattn.scaled_dot_product_attention(*p, is_causal=True, context=context) for p in problems]
    results = [[] for _ in problems]
    errors = []
    start = threading.Barrier(len(problems))

    def work(index):
        try:
            start.wait()
            for _ in range(5):
                results[index].append(vkattn.scaled_dot_product_attention(*problems[index], is_causal=True, context=context))
        except Exception as e:  # reported below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(problems))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for expected, outs in zip(serial, results):
        assert len(outs) == 5 and all(np.array_equal(out, expected) for out in outs)


def test_threads_share_the_default_context():
    contexts = []
    threads = [threading.Thread(target=lambda: contexts.append(vkattn.default_context())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(c is contexts[0] for c in contexts)


def test_repeated_calls_reuse_their_plan():
    context = vkattn.Context()
    q = np.ones((1, 2, 6, 8), dtype=np.float32)
    for _ in range(3):
        vkattn.scaled_dot_product_attention(q, q, q, is_causal=True, context=context)
    assert context.plan_cache_info() == {"size": 1, "capacity": 64, "hits": 2, "misses": 1}
    # Another option, dtype or shape is another plan.
    vkattn.scaled_dot_product_attention(q, q, q, context=context)
    vkattn.scaled_dot_product_attention(q.astype(np.float16), q.astype(np.float16), q.astype(np.float16), context=context)
    vkattn.scaled_dot_product_attention(q[:, :, :5], q, q, context=context)
    assert context.plan_cache_info()["misses"] == 4
    context.clear_plan_cache()
    assert context.plan_cache_info()["size"] == 0


def test_plan_cache_is_bounded():
    context = vkattn.Context()
    k = np.ones((1, 1, 3, 8), dtype=np.float32)
    for seq_q in range(1, 71):
        vkattn.scaled_dot_product_attention(np.ones((1, 1, seq_q, 8), dtype=np.float32), k, k, context=context)
    info = context.plan_cache_info()
    assert info["size"] == info["capacity"] == 64 and info["misses"] == 70


def test_devices_and_context():
    devices = vkattn.devices()
    assert devices and all(isinstance(d["name"], str) for d in devices)
    context = vkattn.Context(device=0)
    assert context.device["name"] == devices[0]["name"] == context.device_name
    assert "vkattn.Context" in repr(context)
    stats = context.memory_stats()
    assert set(stats) == {"current_bytes", "peak_bytes", "scratch_bytes", "allocations"}
    assert isinstance(vkattn.__version__, str) and vkattn.__version__.count(".") == 2
