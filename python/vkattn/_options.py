"""The options shared by the attention functions, checked and put in the form the module takes."""

import numbers
import os

from ._errors import invalid

_CAUSAL_NAMES = ("none", "top-left", "bottom-right")


def causal_name(causal):
    """None or one of "none", "top-left", "bottom-right" (TypeError for another type, vkattn.Error
    for another string)."""
    if causal is None:
        return "none"
    if not isinstance(causal, str):
        raise TypeError(f"causal: expected None or one of {_CAUSAL_NAMES}, got {type(causal).__name__}")
    if causal not in _CAUSAL_NAMES:
        raise invalid(f"causal: expected one of {_CAUSAL_NAMES}, got {causal!r}")
    return causal


def optional_float(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a number or None, got {type(value).__name__}")
    return float(value)


def window_pair(window):
    """None, or (left, right) ints (-1: unbounded on that side)."""
    if window is None:
        return None
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise TypeError(f"window: expected None or a (left, right) pair, got {window!r}")
    left, right = window
    for side in (left, right):
        if isinstance(side, bool) or not isinstance(side, numbers.Integral):
            raise TypeError(f"window: expected integers, got {window!r}")
    return (int(left), int(right))


def dropout(dropout_p):
    """(p, seed): vkattn's dropout is Philox keyed by a seed, a fresh one each call (as PyTorch draws
    a new mask each call); p = 0 is no dropout."""
    p = optional_float("dropout_p", dropout_p)
    if p is None:
        raise TypeError("dropout_p: expected a number")
    if not 0.0 <= p < 1.0:
        raise invalid(f"dropout: p must be in [0, 1), got {p}")
    return p, (int.from_bytes(os.urandom(8), "little") if p > 0.0 else 0)
