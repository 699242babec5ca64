// Argument checking for scaled dot-product attention, shared by the Vulkan path and the CPU
// reference: one set of rules (the contract: README.md, "Semantics"), one set of messages.
#pragma once

#include <optional>

#include "vkattn/types.hpp"

namespace vkattn {

// Everything the kernels need to know about one attention call, derived from checked layouts.
struct AttentionProblem {
  int64_t batch = 0, heads = 0, kv_heads = 0, seq_q = 0, seq_k = 0, dim_qk = 0, dim_v = 0;
  float scale = 0.0f;
  Causal causal = Causal::none;
  DType dtype = DType::f32;
  bool has_mask = false, has_kv_lengths = false, has_lse = false;

  int64_t group_size() const { return heads / kv_heads; }  // query heads per KV head
  // Last visible key + 1 for query row i under the causal rule (seq_k when not causal); may be <= 0.
  int64_t causal_key_end(int64_t i) const;
};

// The tensors of one call, described without data.
struct AttentionLayouts {
  TensorLayout q, k, v, out;
  std::optional<MaskLayout> mask;
  bool has_kv_lengths = false;
  bool has_lse = false;
  AttentionOptions options;
};

// Checks shapes, dims (1..256), dtypes (Q, K, V, O share one), GQA divisibility, mask broadcast,
// strides (non-negative, last dim contiguous, no overlap of distinct output elements) and the scale.
// Throws vkattn::Error naming the argument and its values.
AttentionProblem check_attention(const AttentionLayouts& layouts);

constexpr int64_t kMaxHeadDim = 256;

}  // namespace vkattn
