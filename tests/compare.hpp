// Comparing a device result with the fp64 reference (conform/compare.hpp), failing the current
// doctest test on a mismatch.
#pragma once

#include <cstdint>
#include <span>

#include <vkattn/vkattn.hpp>

#include "conform/compare.hpp"

namespace vkattn::test {

using conform::Tolerance;
using conform::tolerance_for;

// conform::compare_outputs; FAILs the current test (FAIL_CHECK, listing the first mismatches) and
// returns false on a mismatch.
bool compare_with_reference(const reference::Outputs& ref, std::span<const float> gpu_out,
                            std::span<const float> gpu_lse, double v_scale, DType dtype,
                            std::span<const int64_t> rows = {});

// conform::compare_weights; FAILs the current test and returns false on a mismatch.
bool compare_weights_with_reference(const reference::Outputs& ref, std::span<const float> gpu_weights, DType dtype,
                                    std::span<const int64_t> rows = {});

}  // namespace vkattn::test
