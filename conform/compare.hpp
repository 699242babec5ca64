// Comparing a device result with the fp64 reference under the tolerances of docs/testing.md, "Precision and the tolerances the tests use". Returns
// what it found rather than failing anything: the doctest suites turn a mismatch into a test
// failure, `vkattn conform` into a row of its report.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <vkattn/vkattn.hpp>

namespace vkattn::conform {

struct Tolerance {
  double out;  // max-abs error of O, divided by max|V|; of P, absolute
  double lse;  // abs error of LSE, divided by max(1, |lse|)
};
Tolerance tolerance_for(DType dtype);

struct Comparison {
  uint64_t mismatches = 0;
  // The largest finite error as a fraction of its tolerance (1.0 = exactly at the limit).
  double worst = 0.0;
  std::string text;  // empty when there is no mismatch; else a summary and the first mismatches
  bool ok() const { return mismatches == 0; }
};

// Compares O (dense (B, H, Sq, Dv), already decoded to f32) and, when `gpu_lse` is not empty, LSE
// (dense (B, H, Sq)) with the reference, over every row or only `rows`. Rules:
//   * error normalised by `v_scale` (max|V| of the inputs, at least 1e-30) within tolerance_for(dtype);
//   * NaN where the reference has none fails, and NaN where it has one is required (propagation);
//   * infinities must match exactly;
//   * a fully masked row (reference LSE -inf) must be exactly 0, with LSE exactly -inf.
Comparison compare_outputs(const reference::Outputs& ref, std::span<const float> gpu_out,
                           std::span<const float> gpu_lse, double v_scale, DType dtype,
                           std::span<const int64_t> rows = {});

// Compares the weights P (dense (B, H, Sq, Sk) f32) with the reference's (computed with
// Inputs::weights) over every row or only `rows`: absolute error within tolerance_for(dtype).out
// (P is in [0, 1]); exactly 0 where the reference is exactly 0 (masked keys, fully masked rows);
// NaN exactly where the reference has NaN.
Comparison compare_weights(const reference::Outputs& ref, std::span<const float> gpu_weights, DType dtype,
                           std::span<const int64_t> rows = {});

// The same rules for weights given as a dense (batch, heads, seq_q, seq_k) array: the multi-head
// layer's (conform/layer_case.hpp), where heads is 1 when they are averaged.
struct WeightsShape {
  int64_t batch = 0, heads = 0, seq_q = 0, seq_k = 0;
};
Comparison compare_weights(std::span<const double> ref_weights, const WeightsShape& shape,
                           std::span<const float> gpu_weights, DType dtype, std::span<const int64_t> rows = {});

}  // namespace vkattn::conform
