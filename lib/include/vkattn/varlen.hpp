// Packed variable-length batches (FlashAttention's varlen API): the sequences of a batch laid end to
// end with no padding, told apart by cumulative offsets. The semantics (the contract of issue 14):
//   - Q (total_q, heads, dim_qk), K (total_k, kv_heads, dim_qk), V (total_k, kv_heads, dim_v), any row
//     and head strides; cu_seqlens_q and cu_seqlens_k (batch + 1) int32, non-decreasing from 0 and
//     ending at total_q / total_k. Sequence b's queries are rows cu_q[b] .. cu_q[b+1] - 1; they attend
//     only to its keys cu_k[b] .. cu_k[b+1] - 1.
//   - Each sequence is a dense problem of seq_q_b queries and seq_k_b keys: causal and the alignment
//     per sequence (bottom-right: off = seq_k_b - seq_q_b), and so the window, ALiBi ((heads) or
//     (batch, heads)), softcap and sinks. A sequence may be empty; one with no keys gives O = 0 and
//     LSE = -inf (the sink's logit with sinks). No explicit mask or kv_lengths.
//   - O (total_q, heads, dim_v); LSE (heads, total_q), f32 (FlashAttention's layout).
//   - K and V may be q8_0 (KvQuant, types.hpp): their element indices cut into blocks of 32, so dim,
//     the strides and the offset must be multiples of 32.
// A packed tensor is a TensorLayout of batch 1 and seq = its rows: packed_layout() for dense rows.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn {

// Dense packed rows (total, heads, dim), as the TensorLayout (1, heads, total, dim) with row stride
// heads * dim.
inline TensorLayout packed_layout(DType dtype, int64_t total, int64_t heads, int64_t dim) {
  return TensorLayout::bshd(dtype, 1, total, heads, dim);
}

struct VarlenAttentionLayouts {
  TensorLayout q, k, v, out;  // packed: batch 1, seq = total_q or total_k rows (at least 1 each)
  KvQuant kv_quant = KvQuant::none;
  int64_t batch = 0;          // sequences; cu_seqlens_q and cu_seqlens_k hold batch + 1 values
  bool has_lse = false;
  AttentionOptions options;
  std::optional<HeadValuesLayout> alibi;  // (heads) or (batch, heads)
  std::optional<HeadValuesLayout> sinks;  // (heads)
};

struct VarlenProblem {
  // Q, K, V, O and the options resolved as for a dense call of batch 1; its seq_q and seq_k are the
  // totals. Use sequence() for one sequence's rules.
  AttentionProblem attention;
  int64_t batch = 0;
  KvQuant kv_quant = KvQuant::none;
  int64_t total_q() const { return attention.seq_q; }
  int64_t total_k() const { return attention.seq_k; }
  AttentionProblem sequence(int64_t seq_q, int64_t seq_k) const {
    AttentionProblem p = attention;
    p.seq_q = seq_q;
    p.seq_k = seq_k;
    return p;
  }
};

// Checks the layouts (packed tensors of batch 1, sizes, strides, dtypes, dims 1..256, GQA
// divisibility, q8_0's dims, strides and offsets multiples of 32, batch >= 1, the options and
// modifiers, ALiBi's batch against `batch`); throws vkattn::Error naming the argument and its values.
VarlenProblem check_varlen_attention(const VarlenAttentionLayouts& layouts);

// Checks one cu_seqlens array's values (a host that has them, the reference): batch + 1 values,
// starting at 0, non-decreasing, ending at `total` (`total_name` says which). Throws Error naming the
// entry and its value.
void check_cu_seqlens(const char* name, std::span<const int32_t> cu_seqlens, int64_t batch, int64_t total,
                      const char* total_name);

}  // namespace vkattn
