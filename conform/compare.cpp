#include "conform/compare.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

namespace vkattn::conform {

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return {1e-5, 1e-4};
    case DType::f16:
      return {2e-3, 1e-2};
    case DType::bf16:
      return {1.6e-2, 1e-2};
  }
  return {0.0, 0.0};
}

namespace {

// Collects the first few mismatches for the report and counts the rest.
class Mismatches {
 public:
  void add(const std::string& where, double expected, double got, const std::string& why) {
    if (count_++ < kShown) {
      std::ostringstream s;
      s.precision(9);
      s << "  " << where << ": expected " << expected << ", got " << got << " (" << why << ")\n";
      text_ += s.str();
    }
  }
  uint64_t count() const { return count_; }
  const std::string& text() const { return text_; }

 private:
  static constexpr uint64_t kShown = 10;  // enough to see the pattern, short enough to read
  uint64_t count_ = 0;
  std::string text_;
};

std::string at(int64_t b, int64_t h, int64_t i, int64_t d = -1) {
  std::ostringstream s;
  s << (d < 0 ? "lse[" : "out[") << b << "," << h << "," << i;
  if (d >= 0) s << "," << d;
  s << "]";
  return s.str();
}

std::vector<int64_t> all_rows_if_empty(std::span<const int64_t> rows, int64_t seq_q) {
  std::vector<int64_t> list(rows.begin(), rows.end());
  if (list.empty())
    for (int64_t i = 0; i < seq_q; ++i) list.push_back(i);
  return list;
}

Comparison size_mismatch(const char* what, std::size_t expected, std::size_t got) {
  Comparison c;
  c.mismatches = 1;
  c.text = std::string(what) + ": " + std::to_string(got) + " values where the reference has " + std::to_string(expected);
  return c;
}

}  // namespace

Comparison compare_outputs(const reference::Outputs& ref, std::span<const float> gpu_out,
                           std::span<const float> gpu_lse, double v_scale, DType dtype, std::span<const int64_t> rows) {
  const Tolerance tol = tolerance_for(dtype);
  const double scale = std::max(v_scale, 1e-30);
  if (gpu_out.size() != ref.out.size()) return size_mismatch("out", ref.out.size(), gpu_out.size());
  if (!gpu_lse.empty() && gpu_lse.size() != ref.lse.size()) return size_mismatch("lse", ref.lse.size(), gpu_lse.size());
  const std::vector<int64_t> row_list = all_rows_if_empty(rows, ref.seq_q);

  Mismatches bad;
  double max_err = 0.0, max_lse_err = 0.0;
  for (int64_t b = 0; b < ref.batch; ++b) {
    for (int64_t h = 0; h < ref.heads; ++h) {
      for (const int64_t i : row_list) {
        const std::size_t row = static_cast<std::size_t>((b * ref.heads + h) * ref.seq_q + i);
        const double ref_lse = ref.lse[row];
        const bool fully_masked = ref_lse == -INFINITY;
        for (int64_t d = 0; d < ref.dim_v; ++d) {
          const double e = ref.out[row * static_cast<std::size_t>(ref.dim_v) + static_cast<std::size_t>(d)];
          const double g = gpu_out[row * static_cast<std::size_t>(ref.dim_v) + static_cast<std::size_t>(d)];
          if (std::isnan(e)) {
            if (!std::isnan(g)) bad.add(at(b, h, i, d), e, g, "NaN must propagate");
          } else if (std::isnan(g)) {
            bad.add(at(b, h, i, d), e, g, "NaN where the reference has none");
          } else if (std::isinf(e) || std::isinf(g)) {
            if (e != g) bad.add(at(b, h, i, d), e, g, "infinities must match");
          } else if (fully_masked) {
            if (g != 0.0) bad.add(at(b, h, i, d), e, g, "a fully masked row must be exactly 0");
          } else {
            const double err = std::abs(g - e) / scale;
            max_err = std::max(max_err, err);
            if (err > tol.out) bad.add(at(b, h, i, d), e, g, "error " + std::to_string(err) + " / max|V|");
          }
        }
        if (gpu_lse.empty()) continue;
        const double g = gpu_lse[row];
        if (std::isnan(ref_lse)) {
          if (!std::isnan(g)) bad.add(at(b, h, i), ref_lse, g, "NaN must propagate");
        } else if (std::isnan(g)) {
          bad.add(at(b, h, i), ref_lse, g, "NaN where the reference has none");
        } else if (std::isinf(ref_lse) || std::isinf(g)) {
          if (ref_lse != g) bad.add(at(b, h, i), ref_lse, g, "infinities must match");
        } else {
          const double err = std::abs(g - ref_lse) / std::max(1.0, std::abs(ref_lse));
          max_lse_err = std::max(max_lse_err, err);
          if (err > tol.lse) bad.add(at(b, h, i), ref_lse, g, "relative error " + std::to_string(err));
        }
      }
    }
  }
  Comparison result;
  result.mismatches = bad.count();
  result.worst = std::max(max_err / tol.out, max_lse_err / tol.lse);
  if (bad.count()) {
    std::ostringstream s;
    s << bad.count() << " mismatches (" << to_string(dtype) << ": tolerance " << tol.out << " of max|V| = " << scale
      << ", lse " << tol.lse << "; max error seen " << max_err << ", lse " << max_lse_err << "):\n"
      << bad.text();
    result.text = s.str();
  }
  return result;
}

Comparison compare_weights(const reference::Outputs& ref, std::span<const float> gpu_weights, DType dtype,
                           std::span<const int64_t> rows) {
  return compare_weights(ref.weights, WeightsShape{ref.batch, ref.heads, ref.seq_q, ref.seq_k}, gpu_weights, dtype, rows);
}

Comparison compare_weights(std::span<const double> ref_weights, const WeightsShape& shape,
                           std::span<const float> gpu_weights, DType dtype, std::span<const int64_t> rows) {
  const double tol = tolerance_for(dtype).out;
  if (gpu_weights.size() != ref_weights.size()) return size_mismatch("weights", ref_weights.size(), gpu_weights.size());
  const std::vector<int64_t> row_list = all_rows_if_empty(rows, shape.seq_q);
  Mismatches bad;
  double max_err = 0.0;
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t h = 0; h < shape.heads; ++h)
      for (const int64_t i : row_list)
        for (int64_t j = 0; j < shape.seq_k; ++j) {
          const std::size_t idx = static_cast<std::size_t>(((b * shape.heads + h) * shape.seq_q + i) * shape.seq_k + j);
          const double e = ref_weights[idx], g = gpu_weights[idx];
          const auto where = [&] {
            std::ostringstream s;
            s << "weights[" << b << "," << h << "," << i << "," << j << "]";
            return s.str();
          };
          if (std::isnan(e) != std::isnan(g)) {
            bad.add(where(), e, g, std::isnan(e) ? "NaN must propagate" : "NaN where the reference has none");
          } else if (std::isnan(e)) {
            continue;
          } else if (e == 0.0) {
            if (g != 0.0) bad.add(where(), e, g, "a masked key must weigh exactly 0");
          } else {
            const double err = std::abs(g - e);
            max_err = std::max(max_err, err);
            if (!(err <= tol)) bad.add(where(), e, g, "error " + std::to_string(err));
          }
        }
  Comparison result;
  result.mismatches = bad.count();
  result.worst = max_err / tol;
  if (bad.count()) {
    std::ostringstream s;
    s << bad.count() << " weight mismatches (" << to_string(dtype) << ": tolerance " << tol << "; max error seen "
      << max_err << "):\n"
      << bad.text();
    result.text = s.str();
  }
  return result;
}

}  // namespace vkattn::conform
