#include "bench_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vkattn/reference.hpp"
#include "vkattn/serving_reference.hpp"

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

// |got - want| / norm for one element of O. Non-finite reference values must be matched exactly (NaN
// by NaN, +inf by +inf); a non-finite GPU value where the reference has a finite one is +inf.
double output_error(double got, double want, double norm) {
  if (std::isnan(want) || std::isinf(want))
    return (std::isnan(want) ? std::isnan(got) : got == want) ? 0.0 : std::numeric_limits<double>::infinity();
  if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
  return std::fabs(got - want) / norm;
}

// max|V| over the finite values (O is a convex combination of V's rows), 1 when there are none.
double max_abs_finite(std::span<const float> v) {
  double max_v = 0.0;
  for (float x : v)
    if (std::isfinite(x)) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
  return max_v > 0.0 ? max_v : 1.0;
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
                                    std::span<const float> gpu_out, const Buffer* gpu_weights,
                                    const PerHeadValues& per_head, std::span<const int32_t> kv_lengths) {
  const std::vector<int64_t> rows = sample_rows(problem);
  const double norm = max_abs_finite(v);

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
    in.per_head_values() = per_head;
    if (!kv_lengths.empty()) in.kv_lengths = kv_lengths.subspan(static_cast<std::size_t>(b), 1);
    in.weights = result.weights_checked;
    const reference::Outputs ref = reference::attention(in, rows);
    for (int64_t h = 0; h < problem.heads; ++h)
      for (int64_t i : rows)
        for (int64_t d = 0; d < problem.dim_v; ++d) {
          const double want = ref.at(0, h, i, d);
          const double got =
              gpu_out[static_cast<std::size_t>(((b * problem.heads + h) * problem.seq_q + i) * problem.dim_v + d)];
          result.max_err_over_max_v = std::max(result.max_err_over_max_v, output_error(got, want, norm));
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

CheckResult check_paged_against_reference(const PagedCheckInputs& in, std::span<const float> gpu_out) {
  const PagedAttentionLayouts& layouts = *in.layouts;
  const TensorLayout& ql = layouts.q;
  const int64_t batch = ql.batch, heads = ql.heads, seq_q = ql.seq, dim_qk = ql.dim, dim_v = layouts.out.dim;
  const int64_t max_pages = layouts.max_pages;
  // The reference computes every row of a sequence: all of them, or the first and last sequence.
  double cost = 0;
  for (const int32_t len : in.cache_lens)
    cost += 2.0 * static_cast<double>(heads * seq_q) * static_cast<double>(len) * static_cast<double>(dim_qk + dim_v);
  std::vector<int64_t> chosen;
  for (int64_t b = 0; b < batch; ++b)
    if (cost <= kBudget || b == 0 || b == batch - 1) chosen.push_back(b);

  // The chosen sequences as a batch of their own: their Q rows, block-table rows and lengths; the
  // caches are shared.
  const int64_t n = static_cast<int64_t>(chosen.size());
  const std::size_t q_per_batch = static_cast<std::size_t>(heads * seq_q * dim_qk);
  std::vector<float> q;
  std::vector<int32_t> table, lens;
  for (const int64_t b : chosen) {
    const auto at = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b) * q_per_batch);
    q.insert(q.end(), in.q.begin() + at, in.q.begin() + at + static_cast<std::ptrdiff_t>(q_per_batch));
    table.insert(table.end(), in.block_table.begin() + b * max_pages, in.block_table.begin() + (b + 1) * max_pages);
    lens.push_back(in.cache_lens[static_cast<std::size_t>(b)]);
  }
  reference::PagedInputs ref_in;
  ref_in.q_layout = TensorLayout::bhsd(ql.dtype, n, heads, seq_q, dim_qk);
  ref_in.q = q;
  ref_in.k_cache_layout = layouts.k_cache;
  ref_in.v_cache_layout = layouts.v_cache;
  ref_in.k_cache.values = in.k_cache;
  ref_in.v_cache.values = in.v_cache;
  ref_in.max_pages = max_pages;
  ref_in.block_table = table;
  ref_in.cache_lens = lens;
  ref_in.options = layouts.options;
  ref_in.per_head_values() = in.per_head;
  const reference::PagedOutputs ref = reference::paged_attention(ref_in);

  CheckResult result;
  result.tolerance = check_tolerance(ql.dtype);
  result.rows_checked = static_cast<std::size_t>(n * seq_q);
  const double norm = max_abs_finite(in.v_cache);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < seq_q; ++i)
        for (int64_t d = 0; d < dim_v; ++d) {
          const double got =
              gpu_out[static_cast<std::size_t>(((chosen[static_cast<std::size_t>(c)] * heads + h) * seq_q + i) * dim_v + d)];
          result.max_err_over_max_v = std::max(result.max_err_over_max_v, output_error(got, ref.at(c, h, i, d), norm));
        }
  return result;
}

CheckResult check_varlen_against_reference(const VarlenCheckInputs& in, std::span<const float> gpu_out) {
  const VarlenAttentionLayouts& layouts = *in.layouts;
  const int64_t batch = layouts.batch, heads = layouts.q.heads, kv_heads = layouts.k.heads;
  const int64_t dim_qk = layouts.q.dim, dim_v = layouts.out.dim;
  const auto rows_of = [](std::span<const int32_t> cu, int64_t b) {
    return std::pair<int64_t, int64_t>{cu[static_cast<std::size_t>(b)], cu[static_cast<std::size_t>(b) + 1]};
  };
  // The reference computes every row of a sequence: all of them, or the first and last sequence.
  double cost = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const auto [q0, q1] = rows_of(in.cu_seqlens_q, b);
    const auto [k0, k1] = rows_of(in.cu_seqlens_k, b);
    cost += 2.0 * static_cast<double>(heads * (q1 - q0)) * static_cast<double>(k1 - k0) * static_cast<double>(dim_qk + dim_v);
  }
  std::vector<int64_t> chosen;
  for (int64_t b = 0; b < batch; ++b)
    if (cost <= kBudget || b == 0 || b == batch - 1) chosen.push_back(b);

  // The chosen sequences packed as a batch of their own: their Q, K and V rows and new offsets.
  std::vector<float> q, k, v;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  const auto append = [](std::vector<float>& to, std::span<const float> from, int64_t row0, int64_t row1, int64_t width) {
    to.insert(to.end(), from.begin() + row0 * width, from.begin() + row1 * width);
  };
  for (const int64_t b : chosen) {
    const auto [q0, q1] = rows_of(in.cu_seqlens_q, b);
    const auto [k0, k1] = rows_of(in.cu_seqlens_k, b);
    append(q, in.q, q0, q1, heads * dim_qk);
    append(k, in.k, k0, k1, kv_heads * dim_qk);
    append(v, in.v, k0, k1, kv_heads * dim_v);
    cu_q.push_back(cu_q.back() + static_cast<int32_t>(q1 - q0));
    cu_k.push_back(cu_k.back() + static_cast<int32_t>(k1 - k0));
  }
  const DType dtype = layouts.q.dtype;
  reference::VarlenInputs ref_in;
  ref_in.q_layout = packed_layout(dtype, cu_q.back(), heads, dim_qk);
  ref_in.k_layout = packed_layout(dtype, cu_k.back(), kv_heads, dim_qk);
  ref_in.v_layout = packed_layout(dtype, cu_k.back(), kv_heads, dim_v);
  ref_in.q = q;
  ref_in.k.values = k;
  ref_in.v.values = v;
  ref_in.cu_seqlens_q = cu_q;
  ref_in.cu_seqlens_k = cu_k;
  ref_in.options = layouts.options;
  ref_in.per_head_values() = in.per_head;
  const reference::VarlenOutputs ref = reference::varlen_attention(ref_in);

  CheckResult result;
  result.tolerance = check_tolerance(dtype);
  result.rows_checked = static_cast<std::size_t>(cu_q.back());
  const double norm = max_abs_finite(in.v);
  for (std::size_t c = 0; c < chosen.size(); ++c) {
    const int64_t gpu_row0 = in.cu_seqlens_q[static_cast<std::size_t>(chosen[c])];
    for (int64_t i = 0; i < cu_q[c + 1] - cu_q[c]; ++i)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < dim_v; ++d) {
          const double got = gpu_out[static_cast<std::size_t>(((gpu_row0 + i) * heads + h) * dim_v + d)];
          result.max_err_over_max_v =
              std::max(result.max_err_over_max_v, output_error(got, ref.at(cu_q[c] + i, h, d), norm));
        }
  }
  return result;
}

}  // namespace vkattn::cli
