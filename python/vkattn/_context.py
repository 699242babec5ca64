"""The default Context: created on first use, shared by every call that names none."""

import threading

from . import _vkattn

_default_context = None
_default_lock = threading.Lock()


def default_context():
    """The Context the calls use when given none: vkattn's choice of device, created on the first call
    (creating one opens the Vulkan device, which takes a moment) and then shared by every thread."""
    global _default_context
    with _default_lock:
        if _default_context is None:
            _default_context = _vkattn.Context()
        return _default_context


def resolve(context):
    """`context` itself, or the default Context when it is None."""
    if context is None:
        return default_context()
    if not isinstance(context, _vkattn.Context):
        raise TypeError(f"context: expected a vkattn.Context or None, got {type(context).__name__}")
    return context
