#include "dtype_overflow.hpp"

#include <cmath>
#include <cstdio>
#include <cstdint>

#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn::cli {
namespace {

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

}  // namespace

void check_fits_dtype(std::span<const float> values, DType dtype, const std::string& what) {
  if (dtype == DType::f32) return;
  uint64_t overflowing = 0;
  float largest = 0.0f;
  for (const float x : values) {
    if (!std::isfinite(x) || std::isfinite(round_to(dtype, x))) continue;
    ++overflowing;
    largest = std::fmax(largest, std::fabs(x));
  }
  if (overflowing == 0) return;
  // The largest finite value of the dtype: the bits just below its infinity.
  const float max_finite = dtype == DType::f16 ? f16_bits_to_f32(0x7bff) : bf16_bits_to_f32(0x7f7f);
  throw Error(what + ": " + std::to_string(overflowing) + (overflowing == 1 ? " value overflows " : " values overflow ") +
              to_string(dtype) + " (largest magnitude " + number(largest) + " > " + number(max_finite) +
              "); scale the inputs or compute in a wider dtype");
}

void check_q8_0_v_fits_output(std::span<const float> dequantized_v, DType out_dtype, const std::string& what) {
  check_fits_dtype(dequantized_v, out_dtype, what + " as q8_0 blocks");
}

}  // namespace vkattn::cli
