"""The optional Python dependencies of the bench/ scripts (PyTorch, matplotlib), imported on demand.

Neither is a dependency of vkattn. A script that needs one calls the function here when it needs it,
so that its other modes still run without it, and a missing or unfit one is reported as one line
(MissingDependency's message) instead of a traceback.
"""
import re


class MissingDependency(Exception):
    """A dependency is missing or unfit; the message says which and how to get it."""


def version_tuple(text):
    """(major, minor, patch) of a version string such as '2.5.1+cu124' or '1.13.0a0'; missing parts are 0."""
    numbers = [int(n) for n in re.findall(r"\d+", str(text).split("+")[0])[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


def import_torch(min_version=None, need_cuda=False, purpose=None):
    """Returns the torch module, or raises MissingDependency.

    min_version: (major, minor) the caller needs; purpose: what needs it, for the message.
    need_cuda: torch must see a CUDA device (a CPU-only build or no driver is refused).
    """
    try:
        import torch  # noqa: PLC0415 (lazy on purpose)
    except ImportError as e:
        raise MissingDependency(f"PyTorch is not installed ({e}); install it with pip (pip install torch) "
                                "or Debian's python3-torch") from None
    version = getattr(torch, "__version__", "unknown")
    if min_version is not None and version_tuple(version)[:len(min_version)] < tuple(min_version):
        needed = ".".join(str(n) for n in min_version)
        why = f": {purpose} needs torch >= {needed}" if purpose else f"; torch >= {needed} is needed"
        raise MissingDependency(f"torch {version} is too old{why} (pip install 'torch>={needed}'; "
                                "Debian bookworm's python3-torch is 1.13)")
    if need_cuda:
        cuda = getattr(torch, "cuda", None)
        if cuda is None or not cuda.is_available():
            built = getattr(getattr(torch, "version", None), "cuda", None)
            why = "no CUDA device or driver is visible" if built else "it is a CPU-only build"
            raise MissingDependency(f"torch {version} cannot use CUDA here ({why}; torch.cuda.is_available() is False)")
    return torch


def import_pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend, or raises MissingDependency."""
    try:
        import matplotlib  # noqa: PLC0415 (lazy on purpose)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as e:
        raise MissingDependency(f"matplotlib is not installed ({e}); Debian: apt-get install python3-matplotlib, "
                                "or pip install matplotlib") from None
    return plt
