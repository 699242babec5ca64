// Comparing the backward pass's gradients with the fp64 reference's (vkattn/backward_reference.hpp):
// the rule and the per-dtype tolerances that tests/backward.cpp and the catalog's backward section
// (conform/backward_case.hpp) share.
#pragma once

#include <span>
#include <string>

#include <vkattn/vkattn.hpp>

#include "conform/compare.hpp"

namespace vkattn::conform {

// The largest error a gradient may have, as a fraction of the largest |reference value| (with a floor
// of 1e-3, so that an all-zero gradient compares absolutely): f32 2e-4, f16 1e-2, bf16 6e-2. A
// gradient sums over a whole row or column of the scores, each of whose terms carries the rounding of
// the dtype's Q, K, V, O and dO, so these are wider than the forward's (compare.hpp).
double gradient_tolerance(DType dtype);

// Compares `got` (decoded to f32) with `want` element by element under gradient_tolerance(dtype): a
// NaN where the reference has a number fails (a poisoned element left unwritten). `what` names the
// gradient in the text ("dq"). worst is the normalised error over the tolerance.
Comparison compare_gradient(const std::string& what, std::span<const float> got, std::span<const double> want, DType dtype);

}  // namespace vkattn::conform
