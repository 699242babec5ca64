#include "bench_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vkattn/reference.hpp"

namespace vkattn::cli {

double check_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1e-5;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
  }
  return 0.0;
}

namespace {

// About 2 GFLOP of fp64 work: a second or two on one core.
constexpr double kBudget = 2e9;

// Flops of the reference for one query row of one batch (every head).
double row_cost(const AttentionProblem& p) {
  return 2.0 * static_cast<double>(p.heads) * static_cast<double>(p.seq_k) * static_cast<double>(p.dim_qk + p.dim_v);
}

// Every batch, or the first and the last when all of them would blow the budget (large-batch decode:
// even one query row of every batch can be a hundred GFLOP).
std::vector<int64_t> sample_batches(const AttentionProblem& p) {
  std::vector<int64_t> batches;
  if (static_cast<double>(p.batch) * 2.0 * row_cost(p) <= kBudget) {
    for (int64_t b = 0; b < p.batch; ++b) batches.push_back(b);
  } else {
    batches.push_back(0);
    if (p.batch > 1) batches.push_back(p.batch - 1);
  }
  return batches;
}

// The reference returns P for a whole batch in doubles, even for a sample of rows: beyond this it
// is not worth the host memory, and P goes unchecked.
constexpr double kWeightsBudgetBytes = 512.0 * 1024 * 1024;

// |got - want| for one element; +inf when the GPU gave a non-finite value or a masked key (want 0)
// got any weight at all.
double weight_error(double got, double want) {
  if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
  if (want == 0.0) return got == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::fabs(got - want);
}

// `layout` restricted to batch b: same strides, one batch, the offset moved to it.
TensorLayout one_batch(TensorLayout layout, int64_t b) {
  layout.offset += b * layout.stride_batch;
  layout.batch = 1;
  return layout;
}

}  // namespace

std::vector<int64_t> sample_rows(const AttentionProblem& p) {
  const double per_row = static_cast<double>(sample_batches(p).size()) * row_cost(p);
  const int64_t affordable = per_row > 0 ? static_cast<int64_t>(kBudget / per_row) : p.seq_q;
  const int64_t n = std::min<int64_t>({p.seq_q, 64, std::max<int64_t>(2, affordable)});
  std::vector<int64_t> rows;
  if (n <= 0) return rows;
  if (n == 1) return {0};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = (i * (p.seq_q - 1) + (n - 1) / 2) / (n - 1);  // rounded, first and last included
    if (rows.empty() || rows.back() != row) rows.push_back(row);
  }
  return rows;
}

CheckResult check_against_reference(const AttentionLayouts& layouts, const AttentionProblem& problem,
                                    std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                    std::span<const float> gpu_out, const Buffer* gpu_weights, std::span<const float> alibi,
                                    std::span<const float> sinks) {
  const std::vector<int64_t> rows = sample_rows(problem);
  double max_v = 0.0;
  for (float x : v)
    if (std::isfinite(x)) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
  const double norm = max_v > 0.0 ? max_v : 1.0;

  CheckResult result;
  result.tolerance = check_tolerance(problem.dtype);
  result.rows_checked = rows.size();
  const double batch_weights_bytes = 8.0 * static_cast<double>(problem.heads) * static_cast<double>(problem.seq_q) *
                                     static_cast<double>(problem.seq_k);
  result.weights_checked = gpu_weights != nullptr && batch_weights_bytes <= kWeightsBudgetBytes;
  std::vector<float> gpu_row(static_cast<std::size_t>(problem.seq_k));
  for (int64_t b : sample_batches(problem)) {
    reference::Inputs in;
    in.q_layout = one_batch(layouts.q, b);
    in.k_layout = one_batch(layouts.k, b);
    in.v_layout = one_batch(layouts.v, b);
    in.q = q;
    in.k = k;
    in.v = v;
    in.options = layouts.options;
    in.alibi_layout = layouts.alibi;
    in.alibi = alibi;
    in.sinks_layout = layouts.sinks;
    in.sinks = sinks;
    in.weights = result.weights_checked;
    const reference::Outputs ref = reference::attention(in, rows);
    for (int64_t h = 0; h < problem.heads; ++h)
      for (int64_t i : rows)
        for (int64_t d = 0; d < problem.dim_v; ++d) {
          const double want = ref.at(0, h, i, d);
          const double got =
              gpu_out[static_cast<std::size_t>(((b * problem.heads + h) * problem.seq_q + i) * problem.dim_v + d)];
          double err;
          if (std::isnan(want) || std::isinf(want)) {
            // Non-finite reference values must be matched exactly (NaN by NaN, +inf by +inf).
            err = (std::isnan(want) ? std::isnan(got) : got == want) ? 0.0 : std::numeric_limits<double>::infinity();
          } else if (!std::isfinite(got)) {
            err = std::numeric_limits<double>::infinity();
          } else {
            err = std::fabs(got - want) / norm;
          }
          result.max_err_over_max_v = std::max(result.max_err_over_max_v, err);
        }
    if (!result.weights_checked) continue;
    // One row of P at a time: the sampled rows are spread over seq_q, and P may be far larger than
    // what the host should hold for a check.
    const uint64_t row_bytes = static_cast<uint64_t>(problem.seq_k) * sizeof(float);
    for (int64_t h = 0; h < problem.heads; ++h)
      for (int64_t i : rows) {
        if (row_bytes == 0) continue;
        const uint64_t row = static_cast<uint64_t>((b * problem.heads + h) * problem.seq_q + i);
        gpu_weights->download(gpu_row.data(), row_bytes, row * row_bytes);
        const double* want = ref.weights.data() + static_cast<std::size_t>((h * problem.seq_q + i) * problem.seq_k);
        for (int64_t j = 0; j < problem.seq_k; ++j) {
          const double err = weight_error(gpu_row[static_cast<std::size_t>(j)], want[j]);
          result.max_weight_err = std::max(result.max_weight_err, err);
        }
      }
  }
  return result;
}

}  // namespace vkattn::cli
