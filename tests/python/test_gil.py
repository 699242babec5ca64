"""The GIL is released while the device works: another Python thread keeps running during a call."""

import threading
import time

import numpy as np
import pytest

import vkattn


def test_other_threads_run_during_a_call(context):
    q = np.random.default_rng(3).standard_normal((1, 8, 1024, 64)).astype(np.float32)
    vkattn.scaled_dot_product_attention(q, q, q, context=context)  # plan and compile first
    done = threading.Event()
    call_seconds = []

    def call():
        start = time.perf_counter()
        vkattn.scaled_dot_product_attention(q, q, q, context=context)
        call_seconds.append(time.perf_counter() - start)
        done.set()

    worker = threading.Thread(target=call)
    worker.start()
    # With the GIL held through the call, this loop would stop for the whole of it.
    longest_gap, last = 0.0, time.perf_counter()
    while not done.is_set():
        now = time.perf_counter()
        longest_gap, last = max(longest_gap, now - last), now
    worker.join()
    if call_seconds[0] < 0.05:
        pytest.skip(f"the call took {call_seconds[0]:.3f} s: too short to tell")
    assert longest_gap < 0.5 * call_seconds[0], (longest_gap, call_seconds[0])
