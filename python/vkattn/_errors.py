"""vkattn.Error raised from Python: the same class as the library's errors, with the same fields."""

from . import _vkattn


def invalid(message):
    """A vkattn.Error for a bad argument (code "invalid_argument"), as the library raises them."""
    error = _vkattn.Error(message)
    error.code = "invalid_argument"
    error.vk_result = ""
    return error
