// The score rule of the kernels (shaders/score.glsl; docs/semantics.md, "Scores beyond the f32 range"), for
// the fp64 references: scale * (q . k) beyond the f32 range saturates to +-FLT_MAX, and so does
// that plus a finite float-mask bias. In double, finite f32 inputs never overflow, so an infinity
// here comes from an Inf input and, like NaN, propagates untouched.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace vkattn::detail {

inline double saturate_to_f32_range(double x) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (std::isinf(x) || std::isnan(x)) return x;
  return x > kMax ? kMax : x < -kMax ? -kMax : x;
}

// A score plus a bias (ALiBi's, a float mask's), saturating; an infinite score (an Inf input) or bias
// (+inf; -inf masks, and is handled before this) propagates.
inline double add_bias(double score, double bias) {
  if (std::isinf(score) || std::isinf(bias)) return score + bias;
  return saturate_to_f32_range(score + bias);
}

// ALiBi's bias -slope * |distance| of a finite or non-finite f32 slope: like a product of finite
// inputs in the kernels, it saturates to +-FLT_MAX beyond the f32 range (a finite slope never gives an
// infinite bias, which would turn the row's softmax into NaN); NaN and +-inf slopes propagate.
inline double alibi_bias(double slope, int64_t distance) {
  const double bias = -slope * static_cast<double>(distance < 0 ? -distance : distance);
  return std::isinf(slope) ? bias : saturate_to_f32_range(bias);
}

// The biased score of a visible key (a -inf bias masks it, and is handled before this).
inline double score(double scale, double dot, double bias) {
  return add_bias(saturate_to_f32_range(scale * dot), bias);
}

}  // namespace vkattn::detail
