// Packed variable-length batches (FlashAttention's varlen API): the sequences of a batch laid end to
// end with no padding, told apart by cumulative offsets. The semantics (the contract of issue 14):
//   - Q (total_q, heads, dim_qk), K (total_k, kv_heads, dim_qk), V (total_k, kv_heads, dim_v), any row
//     and head strides; cu_seqlens_q and cu_seqlens_k (batch + 1) int32, non-decreasing from 0 and
//     ending at total_q / total_k. Sequence b's queries are rows cu_q[b] .. cu_q[b+1] - 1; they attend
//     only to its keys cu_k[b] .. cu_k[b+1] - 1.
//   - Each sequence is a dense problem of seq_q_b queries and seq_k_b keys: causal and the alignment
//     per sequence (bottom-right: off = seq_k_b - seq_q_b), and so every score modifier (ALiBi's
//     slopes (heads) or (batch, heads)). A sequence may be empty; one with no keys gives O = 0 and
//     LSE = -inf (the sink's logit where the head has one). No explicit mask or kv_lengths.
//   - O (total_q, heads, dim_v); LSE (heads, total_q), f32 (FlashAttention's layout).
//   - The weights P, when asked for (`weights`: the three-stage path computes them): f32 (heads,
//     total_q, total_k), dense. Row r of head h holds its sequence's weights in its keys' columns
//     cu_k[b] .. cu_k[b+1] - 1 and exactly 0 in every other column (the other sequences' keys, and
//     every key of a fully masked row). Quadratic in the totals, like the dense call's (B, H, Sq, Sk):
//     for inspecting a batch, not for serving it.
//   - K and V may be q8_0 (KvQuant, types.hpp): their element indices cut into blocks of 32, so dim,
//     the strides and the offset must be multiples of 32.
//   - max_seqlen_q and max_seqlen_k (FlashAttention's max_seqlen_*): bounds the host knows on every
//     sequence's queries and keys, 0 = the totals (which always hold). The fused kernels size their
//     grid and key splits by them, so they must bound every sequence; check_varlen_values checks
//     them where the host has the offsets (the device reads the offsets unchecked). A sequence longer
//     than a bound gets, on the fused path, split or not:
//       - its first max_seqlen_q rows computed as its own rows, with causal, the window and ALiBi
//         still aligned to its own lengths (bottom-right: off = seq_k_b - seq_q_b);
//       - its keys past its first max_seqlen_k masked for every row, as key padding at max_seqlen_k
//         would (so a row is exact when it sees none of them);
//       - its rows past the first max_seqlen_q never written: O and LSE keep what they held there.
//     Never a read or write out of bounds, never uninitialised memory in O or LSE. The three-stage
//     path, whose work does not depend on the bounds, does not use them: every row of every sequence
//     is computed with all its keys.
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

struct VarlenAttentionLayouts : PerHeadLayouts {  // the per-head tensors' layouts (vkattn/per_head.hpp)
  TensorLayout q, k, v, out;  // packed: batch 1, seq = total_q or total_k rows (at least 1 each)
  KvQuant kv_quant = KvQuant::none;
  int64_t batch = 0;          // sequences; cu_seqlens_q and cu_seqlens_k hold batch + 1 values
  int64_t max_seqlen_q = 0;   // the most queries any sequence has, 0 = total_q (see above)
  int64_t max_seqlen_k = 0;   // the most keys any sequence has, 0 = total_k
  bool has_lse = false;
  bool weights = false;  // the runs give a weights buffer: P (heads, total_q, total_k), three-stage path
  AttentionPath path = AttentionPath::automatic;  // automatic: the fused kernels, or three-stage with weights
  AttentionOptions options;
};

struct VarlenProblem {
  // Q, K, V, O and the options resolved as for a dense call of batch 1; its seq_q and seq_k are the
  // totals. Use sequence() for one sequence's rules.
  AttentionProblem attention;
  int64_t batch = 0;
  KvQuant kv_quant = KvQuant::none;
  int64_t max_seq_q = 0, max_seq_k = 0;  // max_seqlen_q and max_seqlen_k resolved (0 became the total)
  int64_t total_q() const { return attention.seq_q; }
  int64_t total_k() const { return attention.seq_k; }
  AttentionProblem sequence(int64_t seq_q, int64_t seq_k) const {
    AttentionProblem p = attention;
    p.seq_q = seq_q;
    p.seq_k = seq_k;
    return p;
  }
};

// Checks the layouts (packed tensors of batch 1, sizes, strides, dtypes, dims 1..576 (kMaxHeadDim), GQA
// divisibility, q8_0's dims, strides and offsets multiples of 32, batch >= 1, the options and
// modifiers, ALiBi's batch against `batch`, max_seqlen_q and max_seqlen_k in [0, total]); throws
// vkattn::Error naming the argument and its values.
VarlenProblem check_varlen_attention(const VarlenAttentionLayouts& layouts);

// Checks one cu_seqlens array's values (a host that has them, the reference): batch + 1 values,
// starting at 0, non-decreasing, ending at `total` (`total_name` says which). Throws Error naming the
// entry and its value.
void check_cu_seqlens(const char* name, std::span<const int32_t> cu_seqlens, int64_t batch, int64_t total,
                      const char* total_name);

// Checks both offset arrays against the layouts (check_cu_seqlens) and every sequence's lengths
// against max_seqlen_q and max_seqlen_k: what a host that has the offsets calls before a device call
// (the device reads them unchecked). Throws Error naming the sequence and its values.
void check_varlen_values(const VarlenAttentionLayouts& layouts, std::span<const int32_t> cu_seqlens_q,
                         std::span<const int32_t> cu_seqlens_k);

}  // namespace vkattn
