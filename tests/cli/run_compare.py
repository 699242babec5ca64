"""What check_run.py's checks of `vkattn run` share: the tolerances of O and LSE, and compare (the
max error of an output against its reference, inf where non-finite values disagree)."""
import numpy as np

TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}  # docs/testing.md, "Precision and the tolerances the tests use", normalised by max|V|
LSE_TOLERANCE = 1e-4  # |LSE - ref| <= tol * (1 + |ref|): f32 arithmetic on the same rounded inputs


def compare(got, want, scale):
    """Max |got - want| / scale over finite reference values; inf when non-finite values disagree
    (NaN where the reference has a number, a different infinity, or a number where it has NaN)."""
    got = got.astype(np.float64)
    finite = np.isfinite(want)
    nan_want = np.isnan(want)
    if (np.isnan(got) != nan_want).any():
        return np.inf
    inf_want = np.isinf(want)
    if (got[inf_want] != want[inf_want]).any():
        return np.inf
    if not np.isfinite(got[finite]).all():
        return np.inf
    if not finite.any():
        return 0.0
    return float(np.max(np.abs(got[finite] - want[finite])) / scale)
