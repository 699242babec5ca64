// Argument checking for scaled dot-product attention, shared by the Vulkan path and the CPU
// reference: one set of rules (the contract: docs/semantics.md), one set of messages.
#pragma once

#include <optional>

#include "vkattn/per_head.hpp"
#include "vkattn/types.hpp"

namespace vkattn {

// Everything the kernels need to know about one attention call, derived from checked layouts.
struct AttentionProblem {
  int64_t batch = 0, heads = 0, kv_heads = 0, seq_q = 0, seq_k = 0, dim_qk = 0, dim_v = 0;
  float scale = 0.0f;
  Causal causal = Causal::none;
  DType dtype = DType::f32;
  bool has_mask = false, has_kv_lengths = false, has_lse = false;
  // Score modifiers, resolved. `align` is the call's one alignment (causal's when causal is set);
  // window_left/right the visible band around the diagonal with causal folded in (right = 0), -1 =
  // unbounded on that side. The other modifier options are read from AttentionLayouts::options
  // (checked with the call).
  Align align = Align::bottom_right;
  int64_t window_left = -1, window_right = -1;
  uint32_t num_splits = 0;  // AttentionOptions::num_splits (0: automatic)
  PerHead<bool> per_head;        // which per-head tensors the call has (vkattn/per_head.hpp)
  bool alibi_per_batch = false;  // its ALiBi slopes are (batch, heads)
  KvQuant kv_quant = KvQuant::none;  // how K and V are stored (AttentionLayouts::kv_quant)

  int64_t group_size() const { return heads / kv_heads; }  // query heads per KV head
  // Last visible key + 1 for query row i under the causal rule (seq_k when not causal); may be <= 0.
  int64_t causal_key_end(int64_t i) const;
  // The diagonal offset of the call's alignment: 0 (top-left) or seq_k - seq_q (bottom-right).
  int64_t diagonal_offset() const { return align == Align::top_left ? 0 : seq_k - seq_q; }
  bool has_window() const { return window_left >= 0 || window_right >= 0; }
  // Keys [visible_key_begin(i), visible_key_end(i)) of query row i pass causal and the window,
  // clamped to [0, seq_k] (empty when begin >= end).
  int64_t visible_key_begin(int64_t i) const;
  int64_t visible_key_end(int64_t i) const;
};

// The tensors of one call, described without data.
struct AttentionLayouts : PerHeadLayouts {  // the per-head tensors' layouts (vkattn/per_head.hpp)
  TensorLayout q, k, v, out;
  std::optional<MaskLayout> mask;
  bool has_kv_lengths = false;
  bool has_lse = false;
  AttentionOptions options;
  // How K and V are stored: as q.dtype (their dtype must equal it either way), or ggml's q8_0 blocks
  // (vkattn/q8_0.hpp), whose element indices, offsets and strides included, cut into blocks of 32:
  // dim, the strides and the offset of K and V must then be multiples of 32. Q and O stay q.dtype.
  KvQuant kv_quant = KvQuant::none;
};

// Checks shapes, dims (1..kMaxHeadDim), dtypes (Q, K, V, O share one), GQA divisibility, mask broadcast,
// strides (non-negative, last dim contiguous, no overlap of distinct output elements), q8_0's
// multiples of 32, and the scale.
// Throws vkattn::Error naming the argument and its values.
AttentionProblem check_attention(const AttentionLayouts& layouts);

// The widest head dims a call takes (DeepSeek's MLA: 576 for Q and K, 512 for V); any pair of
// dim_qk and dim_v up to it.
constexpr int64_t kMaxHeadDim = 576;

}  // namespace vkattn
