"""bench/compare.py's `torch-cpu[:THREADS]` program: PyTorch on the CPU, the textbook attention in float32.

    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b torch-cpu issue12
    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b torch-cpu:1 --rounds 5 decode-cpu

Not a script: compare.py makes a TorchCpu per torch-cpu program and asks it to run one case at a time.
It is what a CPU user has without vkattn, next to vkattn on the same machine (lavapipe): the attention
as a model's eager code writes it, S = (scale·Q)·Kᵀ, the causal mask filled with -inf, softmax over the
keys, P·V; for GQA the K/V heads are repeated first (repeat_interleave, inside the timed call, as
transformers' repeat_kv does). It needs no scaled_dot_product_attention, so Debian bookworm's torch
1.13 (python3-torch) will do. torch computes in float32 whatever the case's dtype (which applies to
vkattn's storage). torch.set_num_threads is THREADS, default the cores this process may use.

Timing: a monotonic clock around each call, the median of the timed runs after the warm-ups, on random
float32 inputs; counts: --warmup/--iters exactly when given alone, else at most those (default 3 and
10, vkattn bench's) within --budget seconds per case (default 5, vkattn bench's --budget rule).
Takes plain dense cases (compare.dense_shape); FLOPs by vkattn's convention (benchlib.attention_flops).

Backward (a case with --backward, or compare.py --backward, beside `vkattn bench --backward`): the same
textbook attention with autograd on Q, K and V, and O.backward(dO) for a random dO; each timed call is
the backward alone, its forward run just before it, untimed (and the gradients cleared); FLOPs 2.5x the
forward's (benchlib.BACKWARD_FLOP_FACTOR), as vkattn counts its backward.
"""
import os
import re
import statistics
import time

import benchlib as bl

KIND = "torch-cpu"
DEFAULT_WARMUP, DEFAULT_ITERS, DEFAULT_BUDGET_S = 3, 10, 5.0
METHOD = ("textbook attention in float32: S = (scale*Q) @ K^T, masked_fill(-inf) for causal, softmax(dim=-1), "
          "P @ V; GQA: K and V heads repeat_interleave'd inside the timed call; torch.inference_mode")
METHOD_BACKWARD = ("torch.autograd of the textbook attention in float32 (S = (scale*Q) @ K^T, masked_fill(-inf) for "
                   "causal, softmax(dim=-1), P @ V; GQA: repeat_interleave'd K and V): O.backward(dO) for dQ, dK, dV, "
                   "timed alone, the forward run untimed before each call")


def cpu_threads():
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def loaded_blas():
    """The BLAS libraries this process has mapped (Linux), resolved: which one torch's matmul uses."""
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path).lower()
                if path.startswith("/") and ("blas" in name or "mkl" in name or "blis" in name):
                    real = os.path.realpath(path)
                    if real not in found:
                        found.append(real)
    except OSError:
        pass
    return found


def causal_mask(torch, seq_q, seq_k, causal):
    """Boolean (seq_q, seq_k), True where a key is hidden: key j > i + off (off = seq_k - seq_q bottom-right)."""
    if causal == "none":
        return None
    off = seq_k - seq_q if causal == "bottom-right" else 0
    rows = torch.arange(seq_q).unsqueeze(1)
    cols = torch.arange(seq_k).unsqueeze(0)
    return cols > rows + off


def textbook_attention(torch, q, k, v, scale, mask=None):
    """softmax((scale·Q)·Kᵀ [masked]) · V, K/V heads repeated to Q's (GQA). Rows with no visible key give NaN."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    s = torch.matmul(q * scale, k.transpose(-2, -1))
    if mask is not None:
        s.masked_fill_(mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def time_calls(call, warmup, iters, budget_s, counts_given, clock=time.perf_counter, setup=None):
    """Times call() as vkattn bench does: exact counts, or a probe run (the first warm-up) and the counts
    the budget allows (benchlib.run_counts). setup(), when given, runs before every call (warm-ups and
    the probe too), outside the clock. Returns (timed ms list, warm-ups run)."""
    def timed():
        if setup is not None:
            setup()
        start = clock()
        call()
        return (clock() - start) * 1e3

    if counts_given:
        for _ in range(warmup):
            timed()
        warmed = warmup
    else:
        warmup, iters = bl.run_counts(timed(), warmup, iters, budget_s)
        for _ in range(warmup):
            timed()
        warmed = warmup + 1
    ms = [timed() for _ in range(iters)]
    return ms, warmed


class TextbookTimer:
    """Times one shape at a time through textbook_attention on the CPU, in float32."""

    def __init__(self, torch, threads, warmup, iters, budget_s, counts_given, seed=1):
        self.torch = torch
        torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()
        self.warmup, self.iters, self.budget_s, self.counts_given = warmup, iters, budget_s, counts_given
        self.seed = seed

    def blas(self):
        """Which BLAS torch's matmul runs on: torch's BLAS_INFO, and the library mapped after a first matmul."""
        torch = self.torch
        with torch.inference_mode():
            torch.matmul(torch.ones(64, 64), torch.ones(64, 64))
        try:
            config = torch.__config__.show()
        except Exception:  # noqa: BLE001 (the configuration is a nicety)
            config = ""
        found = re.search(r"\bBLAS_INFO=([^,\s]+)", config)
        libraries = ", ".join(os.path.basename(p) for p in loaded_blas())
        return f"BLAS {found.group(1) if found else '?'}" + (f" ({libraries})" if libraries else "")

    def run(self, shape):
        """{ms, ms_min, iters, warmup} of one shape, or {unsupported: reason} when torch refuses or runs out of memory."""
        torch = self.torch
        b, h, g = shape["batch"], shape["heads"], shape["kv_heads"]
        try:
            gen = torch.Generator()
            gen.manual_seed(self.seed)
            q, k, v = (torch.randn(size, dtype=torch.float32, generator=gen)
                       for size in ((b, h, shape["seq_q"], shape["dim_qk"]), (b, g, shape["seq_k"], shape["dim_qk"]),
                                    (b, g, shape["seq_k"], shape["dim_v"])))
            mask = causal_mask(torch, shape["seq_q"], shape["seq_k"], shape["causal"])
            scale = 1.0 / shape["dim_qk"] ** 0.5
            if shape.get("backward"):
                dout = torch.randn((b, h, shape["seq_q"], shape["dim_v"]), dtype=torch.float32, generator=gen)
                ms, warmed = self.time_backward(q, k, v, dout, scale, mask)
            else:
                with torch.inference_mode():
                    ms, warmed = time_calls(lambda: textbook_attention(torch, q, k, v, scale, mask), self.warmup,
                                            self.iters, self.budget_s, self.counts_given)
        except (RuntimeError, MemoryError) as e:
            return {"unsupported": bl.refusal_reason(e)}
        return {"ms": statistics.median(ms), "ms_min": min(ms), "iters": len(ms), "warmup": warmed}

    def time_backward(self, q, k, v, dout, scale, mask):
        """O.backward(dO) through the textbook attention, timed alone: before each call its forward runs
        (with autograd) and the gradients of Q, K and V are cleared, outside the clock."""
        torch = self.torch
        for t in (q, k, v):
            t.requires_grad_(True)
        graph = {}

        def forward():
            for t in (q, k, v):
                t.grad = None
            graph["out"] = textbook_attention(torch, q, k, v, scale, mask)

        def backward():
            graph.pop("out").backward(dout)

        with torch.enable_grad():
            return time_calls(backward, self.warmup, self.iters, self.budget_s, self.counts_given, setup=forward)


class TorchCpu:
    """The adapter: `torch-cpu[:THREADS]` as a program of bench/compare.py."""

    def __init__(self, threads, warmup=None, iters=None, budget_s=None):
        self.threads_text = threads
        self.warmup, self.iters, self.budget_s = warmup, iters, budget_s
        self.timer = None

    def check(self):
        if self.threads_text and not (self.threads_text.isdigit() and int(self.threads_text) >= 1):
            raise bl.CaseError(f"{KIND}:{self.threads_text}: the threads are a positive integer")

    def threads(self):
        return int(self.threads_text) if self.threads_text else cpu_threads()

    def refuse(self, name, shape):
        return None  # any dense shape; torch's own refusals (out of memory) come when it runs

    def describe(self, shape):
        return f"{METHOD_BACKWARD if shape.get('backward') else METHOD}; {self.threads()} threads"

    def load(self):
        self.side()

    def side(self):
        if self.timer is None:
            from optional_deps import import_torch  # noqa: PLC0415 (torch only when a case runs)
            torch = import_torch(purpose="compare.py's torch-cpu program")
            # as vkattn bench: given counts are exact, unless a budget is given too: then they are its caps
            given = (self.warmup is not None or self.iters is not None) and self.budget_s is None
            self.timer = TextbookTimer(torch, self.threads(), DEFAULT_WARMUP if self.warmup is None else self.warmup,
                                       DEFAULT_ITERS if self.iters is None else self.iters,
                                       self.budget_s or DEFAULT_BUDGET_S, given)
        return self.timer

    def version(self):
        timer = self.side()
        return f"torch {timer.torch.__version__}, {timer.threads} threads, float32, {timer.blas()}"

    def run(self, name, shape, case_args, driver):
        """(command, result record) of one case; RuntimeError when torch refuses it."""
        record = self.side().run(shape)
        if "unsupported" in record:
            raise RuntimeError(f"{KIND} refused {name}: {record['unsupported']}")
        row = dict(shape, ms_median=record["ms"], ms_min=record["ms_min"], iters=record["iters"], status="ok",
                   tflops=bl.tflops(shape, record["ms"]),
                   kernel="textbook f32 autograd" if shape.get("backward") else "textbook f32", splits=None)
        return [KIND, *case_args], row
