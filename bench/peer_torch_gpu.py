"""bench/compare.py's `torch-gpu[:BACKEND]` program: PyTorch's scaled_dot_product_attention on CUDA.

    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b torch-gpu:flash --b torch-gpu:math decode-gpu

Not a script: compare.py makes a TorchGpu per torch-gpu program and asks it to run one case at a time.
Each program allows one backend alone (flash, the default; efficient, cudnn or math), as
torch.nn.attention.sdpa_kernel (newer 2.x) or torch.backends.cuda.sdp_kernel (2.0 and 2.1) select it;
give --b once per backend to see several. Needs torch >= 2.0 with CUDA, imported only when a case runs.

Timing: CUDA events around each call, the median of the timed runs after the warm-ups; before each run
a 256 MiB buffer is zeroed, which evicts the L2 cache (as vkattn's input rotation does) and keeps the
GPU busy while the call is enqueued, so host launch overhead is not counted (vkattn's GPU timestamps do
not count it either). Counts: --warmup/--iters exactly when given alone, else at most those (default
10 and 50) within --budget seconds per case (default 2; vkattn bench's --budget rule). FLOPs: vkattn's convention (benchlib.attention_flops).

A shape torch cannot run this way (GQA before torch 2.5's enable_gqa, bottom-right causal with seq_q !=
seq_k without causal_lower_right, flash or cuDNN with f32) is refused with torch's reason.
"""
import inspect
import statistics
import warnings

import benchlib as bl

KIND = "torch-gpu"
BACKENDS = ("flash", "efficient", "cudnn", "math")
# torch's names for the backends: the SDPBackend member (torch.nn.attention.sdpa_kernel, newer 2.x) and
# the flag of torch.backends.cuda.sdp_kernel (2.0 and the 2.x before sdpa_kernel).
SDP_BACKEND = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
               "math": "MATH"}
SDP_FLAG = {"flash": "enable_flash", "efficient": "enable_mem_efficient", "cudnn": "enable_cudnn",
            "math": "enable_math"}
FLUSH_BYTES = 256 << 20
DEFAULT_WARMUP, DEFAULT_ITERS, DEFAULT_BUDGET_S = 10, 50, 2.0


def plan_torch_call(shape, enable_gqa, lower_right):
    """How torch runs a shape: {is_causal, lower_right, enable_gqa, note}, or the reason it cannot.

    enable_gqa: torch's SDPA takes enable_gqa (2.5+); lower_right: torch.nn.attention.bias has
    causal_lower_right (newer 2.x).
    """
    plan = {"is_causal": False, "lower_right": False, "enable_gqa": False, "note": None}
    if shape["heads"] != shape["kv_heads"]:
        if not enable_gqa:
            return (f"GQA ({shape['heads']} heads, {shape['kv_heads']} KV heads) needs enable_gqa (torch >= 2.5); "
                    "not timed with K/V expanded by repeat_interleave, which moves more memory")
        plan["enable_gqa"] = True
    sq, sk = shape["seq_q"], shape["seq_k"]
    if shape["causal"] == "top-left" or (shape["causal"] == "bottom-right" and sq == sk):
        plan["is_causal"] = True  # torch's is_causal is top-left aligned; the same as bottom-right when Sq == Sk
    elif shape["causal"] == "bottom-right":
        if sq == 1:
            plan["note"] = "is_causal=False: one query row aligned bottom-right sees every key"
        elif lower_right:
            plan["lower_right"] = True
            plan["note"] = "attn_mask=causal_lower_right(seq_q, seq_k)"
        else:
            return ("bottom-right causal with seq_q != seq_k needs torch.nn.attention.bias.causal_lower_right "
                    "(a newer torch)")
    return plan


def backend_selector(torch, backend):
    """(a function returning the context manager that allows only this backend, None) or (None, reason)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 (newer 2.x)
    except ImportError:
        sdpa_kernel = None
    if sdpa_kernel is not None:
        member = getattr(SDPBackend, SDP_BACKEND[backend], None)
        if member is None:
            return None, f"torch {torch.__version__} has no SDPBackend.{SDP_BACKEND[backend]}"
        return (lambda: sdpa_kernel(member)), None
    sdp_kernel = getattr(torch.backends.cuda, "sdp_kernel", None)
    if sdp_kernel is None:
        return None, f"torch {torch.__version__} has neither torch.nn.attention.sdpa_kernel nor torch.backends.cuda.sdp_kernel"
    params = inspect.signature(sdp_kernel).parameters
    if SDP_FLAG[backend] not in params:
        return None, f"torch {torch.__version__}: torch.backends.cuda.sdp_kernel has no {SDP_FLAG[backend]}"
    flags = {f: f == SDP_FLAG[backend] for f in SDP_FLAG.values() if f in params}
    return (lambda: sdp_kernel(**flags)), None


class SdpaTimer:
    """Times one shape at a time through scaled_dot_product_attention with one backend allowed."""

    def __init__(self, torch, backend, warmup, iters, budget_s, counts_given, seed=1):
        self.torch, self.backend = torch, backend
        self.warmup, self.iters, self.budget_s, self.counts_given = warmup, iters, budget_s, counts_given
        self.seed = seed
        self.enable_gqa = "enable_gqa" in (torch.nn.functional.scaled_dot_product_attention.__doc__ or "")
        try:
            from torch.nn.attention.bias import causal_lower_right  # noqa: PLC0415
        except ImportError:
            causal_lower_right = None
        self.causal_lower_right = causal_lower_right
        self.selector, self.missing = backend_selector(torch, backend)
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def _timed_runs(self, call, warmup, iters):
        torch = self.torch
        for _ in range(warmup):
            call()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends):
            self.flush.zero_()  # evicts L2; the GPU is busy with it while the call is enqueued
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def _time(self, call):
        call()  # first call apart: kernel selection, cuDNN graph building, lazy loading
        self.torch.cuda.synchronize()
        if self.counts_given:
            warmup, iters = self.warmup, self.iters
        else:
            warmup, iters = bl.run_counts(self._timed_runs(call, 0, 1)[0], self.warmup, self.iters, self.budget_s)
        ms = self._timed_runs(call, warmup, iters)
        return {"ms": statistics.median(ms), "ms_min": min(ms), "iters": len(ms)}

    def _inputs(self, shape):
        torch = self.torch
        dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[shape["dtype"]]
        b, h, g = shape["batch"], shape["heads"], shape["kv_heads"]
        gen = torch.Generator(device="cuda")
        gen.manual_seed(self.seed)
        return [torch.randn(size, dtype=dtype, device="cuda", generator=gen)
                for size in ((b, h, shape["seq_q"], shape["dim_qk"]), (b, g, shape["seq_k"], shape["dim_qk"]),
                             (b, g, shape["seq_k"], shape["dim_v"]))]

    def run(self, shape):
        """({ms, ms_min, iters} | {unsupported: reason}, a note on how torch was called or None)."""
        torch = self.torch
        if self.missing:
            return {"unsupported": self.missing}, None
        plan = plan_torch_call(shape, self.enable_gqa, self.causal_lower_right is not None)
        if isinstance(plan, str):
            return {"unsupported": plan}, None
        try:
            inputs = self._inputs(shape)
        except torch.cuda.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            return {"unsupported": "out of memory for the inputs: " + bl.refusal_reason(e)}, None
        kwargs = {"is_causal": plan["is_causal"]}
        if plan["lower_right"]:
            kwargs["attn_mask"] = self.causal_lower_right(shape["seq_q"], shape["seq_k"])
        if plan["enable_gqa"]:
            kwargs["enable_gqa"] = True
        sdpa = torch.nn.functional.scaled_dot_product_attention
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with torch.inference_mode(), self.selector():
                    record = self._time(lambda: sdpa(*inputs, **kwargs))
            except Exception as e:  # noqa: BLE001 (any refusal is reported as one line, with torch's reason)
                record = {"unsupported": bl.refusal_reason(e, caught)}
        inputs.clear()
        torch.cuda.empty_cache()
        return record, plan["note"]


class TorchGpu:
    """The adapter: `torch-gpu[:BACKEND]` as a program of bench/compare.py."""

    def __init__(self, backend, warmup=None, iters=None, budget_s=None):
        self.backend = backend or "flash"
        self.warmup, self.iters, self.budget_s = warmup, iters, budget_s
        self.timer = None

    def check(self):
        if self.backend not in BACKENDS:
            raise bl.CaseError(f"{KIND}:{self.backend}: the backend is one of {', '.join(BACKENDS)}")

    def refuse(self, name, shape):
        """Why this program cannot run the case before anything runs, or None (torch's refusals come later)."""
        if shape.get("backward"):
            return f"{KIND} does not time the backward pass (torch-cpu does)"
        return None

    def describe(self, shape):
        return (f"torch.nn.functional.scaled_dot_product_attention on CUDA, backend {self.backend} alone, "
                f"{shape['dtype']}, causal {shape['causal']}")

    def load(self):
        self.side()

    def side(self):
        if self.timer is None:
            from optional_deps import import_torch  # noqa: PLC0415 (torch only when a case runs)
            torch = import_torch(min_version=(2, 0), need_cuda=True, purpose="compare.py's torch-gpu program")
            # as vkattn bench: given counts are exact, unless a budget is given too: then they are its caps
            given = (self.warmup is not None or self.iters is not None) and self.budget_s is None
            self.timer = SdpaTimer(torch, self.backend, DEFAULT_WARMUP if self.warmup is None else self.warmup,
                                   self.iters or DEFAULT_ITERS, self.budget_s or DEFAULT_BUDGET_S, given)
        return self.timer

    def version(self):
        torch = self.side().torch
        return (f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}, "
                f"SDPA backend {self.backend}")

    def run(self, name, shape, case_args, driver):
        """(command, result record) of one case; RuntimeError when torch refuses it. Each call times anew."""
        record, note = self.side().run(shape)
        if "unsupported" in record:
            raise RuntimeError(f"{KIND}:{self.backend} refused {name}: {record['unsupported']}")
        row = dict(shape, ms_median=record["ms"], ms_min=record["ms_min"], iters=record["iters"], status="ok",
                   tflops=bl.tflops(shape, record["ms"]), kernel=f"sdpa {self.backend}", splits=None, torch_call=note)
        return [f"{KIND}:{self.backend}", *case_args], row
