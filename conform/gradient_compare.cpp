#include "conform/gradient_compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace vkattn::conform {

double gradient_tolerance(DType dtype) { return dtype == DType::f32 ? 2e-4 : dtype == DType::f16 ? 1e-2 : 6e-2; }

Comparison compare_gradient(const std::string& what, std::span<const float> got, std::span<const double> want, DType dtype) {
  Comparison result;
  if (got.size() != want.size()) {
    result.mismatches = 1;
    result.text = what + " has " + std::to_string(got.size()) + " values, the reference " + std::to_string(want.size());
    return result;
  }
  double scale = 0.0;
  for (const double w : want) scale = std::max(scale, std::abs(w));
  scale = std::max(scale, 1e-3);
  const double tolerance = gradient_tolerance(dtype);
  double worst_error = 0.0;
  std::size_t worst = 0, bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double e = std::isnan(got[i]) ? INFINITY : std::abs(double(got[i]) - want[i]);
    if (!(e <= tolerance * scale)) ++bad;
    if (e > worst_error) worst_error = e, worst = i;
  }
  if (std::isfinite(worst_error)) result.worst = worst_error / scale / tolerance;
  if (bad == 0) return result;
  result.mismatches = bad;
  char text[256];
  std::snprintf(text, sizeof text, "%zu of %zu values beyond %.3g of max|%s| %.6g: the worst at %zu, got %.9g, want %.9g",
                bad, want.size(), tolerance, what.c_str(), scale, worst, double(got[worst]), want[worst]);
  result.text = what + ": " + text;
  return result;
}

}  // namespace vkattn::conform
