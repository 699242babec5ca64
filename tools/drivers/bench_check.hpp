// `vkattn bench --check`: the GPU output against the fp64 CPU reference, on a sample of query rows
// when the problem is large (the reference is a plain triple loop; checking every row of a 16k x 16k
// problem would take minutes where the timing took milliseconds).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkattn/buffer.hpp"
#include "vkattn/kv_cache.hpp"
#include "vkattn/per_head.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"
#include "vkattn/varlen.hpp"

namespace vkattn::cli {

// docs/testing.md, "Precision and the tolerances the tests use": max-abs error normalised by max|V| (O is a convex combination of V's rows).
double check_tolerance(DType dtype);

// Up to 64 query rows spread evenly over seq_q (first and last included), fewer when the reference
// would need more than a couple of seconds for them; every row when seq_q is small. Every batch is
// checked, or only the first and last when even one row of every batch is too much.
std::vector<int64_t> sample_rows(const AttentionProblem& problem);

struct CheckResult {
  double max_err_over_max_v = 0.0;  // normalised by max|V|; +inf when the GPU gave NaN/Inf the reference has not
  double tolerance = 0.0;
  std::size_t rows_checked = 0;
  // The weights P on the same rows, absolute (they are probabilities); a masked key must weigh
  // exactly 0. Checked only when P was written and the reference can hold one batch of it.
  bool weights_checked = false;
  double max_weight_err = 0.0;
  bool passed() const { return max_err_over_max_v <= tolerance && (!weights_checked || max_weight_err <= tolerance); }
};

// q, k, v: the values the GPU saw (already rounded to the dtype), dense in `layouts`; `gpu_out`:
// the GPU's O decoded to f32, dense (batch, heads, seq_q, dim_v); `gpu_weights`, when not null, the
// device buffer holding P f32 (batch, heads, seq_q, seq_k) dense (only the sampled rows are read back).
// No mask (bench uses none); `kv_lengths` (one per batch, --lengths) or empty; `per_head` the
// per-head tensors of the layouts, (heads) each: the same for every batch.
CheckResult check_against_reference(const AttentionLayouts& layouts, const AttentionProblem& problem,
                                    std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                    std::span<const float> gpu_out, const Buffer* gpu_weights = nullptr,
                                    const PerHeadValues& per_head = {},
                                    std::span<const int32_t> kv_lengths = {});

// The paged call's values, as the GPU saw them (the caches in f32, PagedKvLayout's order; rows no
// sequence holds may be NaN), for reference::paged_attention.
struct PagedCheckInputs {
  const PagedAttentionLayouts* layouts = nullptr;  // no append, no LSE
  std::span<const float> q, k_cache, v_cache;
  std::span<const int32_t> block_table, cache_lens;
  PerHeadValues per_head;  // the layouts' per-head tensors, (heads) each
};

// O of every query row of every sequence against reference::paged_attention, or of the first and
// the last sequence only when all of them would take the reference more than a couple of seconds.
// `gpu_out`: the GPU's O decoded to f32, dense (batch, heads, seq_q, dim_v). Normalised by max|V|
// over the cache's finite values.
CheckResult check_paged_against_reference(const PagedCheckInputs& in, std::span<const float> gpu_out);

// The varlen call's values, as the GPU saw them (K and V in f32, dense packed rows; q8_0: the values
// the blocks hold), for reference::varlen_attention.
struct VarlenCheckInputs {
  const VarlenAttentionLayouts* layouts = nullptr;  // dense packed rows, no LSE, no kv_quant
  std::span<const float> q, k, v;
  std::span<const int32_t> cu_seqlens_q, cu_seqlens_k;
  PerHeadValues per_head;  // the layouts' per-head tensors, (heads) each
};

// O of every query row of every sequence against reference::varlen_attention, or of the first and
// the last sequence only when all of them would take the reference more than a couple of seconds.
// `gpu_out`: the GPU's O decoded to f32, dense (total_q, heads, dim_v). Normalised by max|V|.
CheckResult check_varlen_against_reference(const VarlenCheckInputs& in, std::span<const float> gpu_out);

}  // namespace vkattn::cli
