// `vkattn bench --varlen`: the bench's batch as one packed variable-length call (vkattn/varlen.hpp),
// the sequences laid end to end in Q, K, V and O and told apart by cu_seqlens, timed through
// the PreparedAttention of a PackedKv spec as the dense bench times its call, and checked (--check) against
// reference::varlen_attention on the benched buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "bench_common.hpp"
#include "bench_result.hpp"
#include "vkattn/context.hpp"

namespace vkattn::cli {

// Gives `shape` (batch, seq_q and seq_k as asked) its sequences: keys `lengths` when given (the batch
// is their count), else drawn uniformly from [1, seq_k] for each of `batch` sequences; queries 1 each
// when seq_q is 1 (decode), else drawn uniformly from [1, seq_q]; one generator seeded by `seed`,
// keys first. seq_q and seq_k become the longest (at least 1).
void draw_varlen_lengths(BenchShape& shape, const std::vector<int64_t>& lengths, uint64_t seed);

// Q (total_q, heads, dim_qk), K (total_k, kv_heads, dim_qk), V (total_k, kv_heads, dim_v) and O dense
// packed rows (packed_layout), q8_0 K and V under --kv-dtype q8_0; cu_seqlens_q and cu_seqlens_k
// (batch + 1) int32 from the shape's lengths; max_seqlen_q and max_seqlen_k the longest. Throws
// ShapeSkipped when the buffers exceed --max-memory or the device's limits, Error otherwise.
BenchResult bench_varlen(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype);

}  // namespace vkattn::cli
