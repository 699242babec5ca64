#include "bench_varlen.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_metrics.hpp"
#include "bench_serving.hpp"
#include "conform/q8_0_blocks.hpp"
#include "vkattn/q8_0.hpp"
#include "vkattn/varlen.hpp"
#include "vkattn/varlen_attention.hpp"

namespace vkattn::cli {
namespace {

// cu_seqlens of `lengths`: batch + 1 offsets from 0. Throws Error past int32.
std::vector<int32_t> offsets(const std::vector<int64_t>& lengths, const char* what) {
  std::vector<int32_t> cu{0};
  int64_t total = 0;
  for (const int64_t len : lengths) {
    total += len;
    if (total > std::numeric_limits<int32_t>::max())
      throw Error(std::string("--varlen: the sequences' ") + what + " add up to " + std::to_string(total) +
                  ", more than int32 cu_seqlens hold");
    cu.push_back(static_cast<int32_t>(total));
  }
  return cu;
}

}  // namespace

void draw_varlen_lengths(BenchShape& shape, const std::vector<int64_t>& lengths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (lengths.empty()) {
    std::uniform_int_distribution<int64_t> keys(1, shape.seq_k);
    shape.kv_lengths.resize(static_cast<std::size_t>(shape.batch));
    for (int64_t& len : shape.kv_lengths) len = keys(rng);
  } else {
    shape.kv_lengths = lengths;
    shape.batch = static_cast<int64_t>(lengths.size());
  }
  std::uniform_int_distribution<int64_t> queries(1, std::max<int64_t>(shape.seq_q, 1));
  shape.q_lengths.resize(static_cast<std::size_t>(shape.batch));
  for (int64_t& len : shape.q_lengths) len = shape.seq_q == 1 ? 1 : queries(rng);
  shape.seq_q = *std::max_element(shape.q_lengths.begin(), shape.q_lengths.end());
  shape.seq_k = std::max<int64_t>(1, *std::max_element(shape.kv_lengths.begin(), shape.kv_lengths.end()));
}

BenchResult bench_varlen(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype) {
  const std::vector<int32_t> cu_q = offsets(shape.q_lengths, "queries");
  const std::vector<int32_t> cu_k = offsets(shape.kv_lengths, "keys");
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  if (total_k == 0) throw Error("--varlen: no sequence has a key (packed K and V need a row or more)");

  VarlenAttentionLayouts layouts;
  layouts.q = packed_layout(dtype, total_q, shape.heads, shape.dim_qk);
  layouts.k = packed_layout(dtype, total_k, shape.kv_heads, shape.dim_qk);
  layouts.v = packed_layout(dtype, total_k, shape.kv_heads, shape.dim_v);
  layouts.out = packed_layout(dtype, total_q, shape.heads, shape.dim_v);
  layouts.kv_quant = shape.kv_quant;
  layouts.batch = shape.batch;
  layouts.max_seqlen_q = shape.seq_q;
  layouts.max_seqlen_k = *std::max_element(shape.kv_lengths.begin(), shape.kv_lengths.end());
  apply_shape_options(shape, layouts);
  layouts.path = shape.path;  // --path unfused: the three-stage path (its scores in the workspace)
  BenchResult result;
  result.shape = shape;
  result.dtype = dtype;
  const VarlenProblem problem = check_varlen_attention(layouts);  // before generating the values
  check_varlen_values(layouts, cu_q, cu_k);
  const uint64_t esize = dtype_size(dtype);
  const auto kv_bytes_of = [&](const TensorLayout& l) {
    const uint64_t elements = static_cast<uint64_t>(l.element_count());
    if (shape.kv_quant == KvQuant::q8_0) return elements / kQ8_0BlockElements * kQ8_0BlockBytes;
    return elements * esize;
  };
  const uint64_t q_bytes = static_cast<uint64_t>(layouts.q.element_count()) * esize;
  const uint64_t out_bytes = static_cast<uint64_t>(layouts.out.element_count()) * esize;
  const uint64_t k_bytes = kv_bytes_of(layouts.k), v_bytes = kv_bytes_of(layouts.v);
  const uint64_t cu_bytes = static_cast<uint64_t>(shape.batch + 1) * 4;
  check_shape_fits(o, context.device_info(), {q_bytes, k_bytes, v_bytes, out_bytes, cu_bytes, cu_bytes});

  std::mt19937_64 rng(o.seed);
  const std::vector<float> q = random_values(static_cast<std::size_t>(layouts.q.element_count()), dtype, rng);
  std::vector<float> k = random_values(static_cast<std::size_t>(layouts.k.element_count()), dtype, rng);
  std::vector<float> v = random_values(static_cast<std::size_t>(layouts.v.element_count()), dtype, rng);
  // --kv-dtype q8_0: K and V uploaded as blocks; k and v become the values the blocks hold.
  std::vector<uint8_t> k_blocks, v_blocks;
  if (shape.kv_quant == KvQuant::q8_0) k_blocks = conform::to_q8_0_blocks(k), v_blocks = conform::to_q8_0_blocks(v);

  const ServingValues values{.q = q, .k = k, .v = v, .k_blocks = k_blocks, .v_blocks = v_blocks, .ints_a = cu_q,
                             .ints_b = cu_k, .q_bytes = q_bytes, .k_bytes = k_bytes, .v_bytes = v_bytes,
                             .out_bytes = out_bytes, .out_elements = layouts.out.element_count()};
  const auto check = [&](std::span<const float> out, const PerHeadValues& per_head) {
    // (q8_0: the reference reads the values the blocks hold, k and v.)
    VarlenAttentionLayouts as_values = layouts;
    as_values.kv_quant = KvQuant::none;
    VarlenCheckInputs in;
    in.layouts = &as_values;
    in.q = q;
    in.k = k;
    in.v = v;
    in.cu_seqlens_q = cu_q;
    in.cu_seqlens_k = cu_k;
    in.per_head = per_head;
    return check_varlen_against_reference(in, out);
  };
  run_serving_bench(context, o, shape, dtype, AttentionSpec::packed(layouts), values,
                    credited_flops(problem.attention, shape.q_lengths, shape.kv_lengths), check, result);
  return result;
}

}  // namespace vkattn::cli
