// C++ mirrors of the push-constant blocks in shaders/attention_push.glsl, shaders/combine_push.glsl
// and shaders/softmax_push.glsl. Same member order; all members are 4 bytes, so std430 adds no
// padding. The offsetof checks pin the members added last (they must follow the GLSL order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "vkattn/attention.hpp"

namespace vkattn::detail {

// Flag bits of AttentionPush::flags (shaders/attention_push.glsl).
enum AttentionFlags : uint32_t {
  kCausalTopLeft = 1u,
  kCausalBottomRight = 2u,
  kMaskKindShift = 2u,  // 0 none, 1 boolean, 2 f32, 3 f16
  kFlagKvLengths = 16u,
  kFlagWriteLse = 32u,
  kFlagPartial = 64u,
};

// The causal alignment and explicit-mask kind bits of `flags`, the same in every push block that has
// them (the fused kernels and the row softmax).
inline uint32_t mask_flags(Causal causal, const std::optional<MaskLayout>& mask) {
  uint32_t flags = causal == Causal::top_left ? kCausalTopLeft : causal == Causal::bottom_right ? kCausalBottomRight : 0u;
  if (mask) {
    const uint32_t kind = mask->type == MaskType::boolean ? 1u : mask->type == MaskType::f32 ? 2u : 3u;
    flags |= kind << kMaskKindShift;
  }
  return flags;
}

// A mask's element strides as the shaders read them: 0 along a broadcast (size 1) batch or head.
inline void mask_strides(const MaskLayout& mask, uint32_t& batch, uint32_t& head, uint32_t& query) {
  batch = mask.batch == 1 ? 0 : static_cast<uint32_t>(mask.stride_batch);
  head = mask.heads == 1 ? 0 : static_cast<uint32_t>(mask.stride_head);
  query = static_cast<uint32_t>(mask.stride_q);
}

struct AttentionPush {
  uint32_t seq_q, seq_k, heads, group;
  uint32_t splits, keys_per_split, flags;
  float scale;
  uint32_t q_sb, q_sh, q_ss, q_off;
  uint32_t k_sb, k_sh, k_ss, k_off;
  uint32_t v_sb, v_sh, v_ss, v_off;
  uint32_t o_sb, o_sh, o_ss, o_off;
  uint32_t m_sb, m_sh, m_ss, m_off;
  uint32_t lse_off, kv_len_off;
  uint32_t split_base;
  uint32_t tile_base;  // first query tile of the dispatch (query-tile ranges: LaunchPlan::tiles_per_range)
};
static_assert(sizeof(AttentionPush) <= 128, "push constants beyond the guaranteed 128 bytes");
static_assert(sizeof(AttentionPush) == 32 * 4);
static_assert(offsetof(AttentionPush, split_base) == 30 * 4 && offsetof(AttentionPush, tile_base) == 31 * 4);

struct CombinePush {
  uint32_t splits, rows, heads, seq_q;
  uint32_t o_sb, o_sh, o_ss, o_off;
  uint32_t lse_off, write_lse;
  uint32_t row_base, range_rows;  // the range's first query row; its rows per (batch, head)
};
static_assert(sizeof(CombinePush) <= 128, "push constants beyond the guaranteed 128 bytes");
static_assert(sizeof(CombinePush) == 12 * 4);
static_assert(offsetof(CombinePush, row_base) == 10 * 4 && offsetof(CombinePush, range_rows) == 11 * 4);

// shaders/softmax_push.glsl: the row softmax of the three-stage path (flags as AttentionFlags).
struct SoftmaxPush {
  uint32_t seq_q, seq_k, heads, flags;
  uint32_t rows, chunk_heads, chunk_rows;
  uint32_t b0, h0, i0;
  uint32_t p_off, lse_off, kv_len_off;
  uint32_t m_sb, m_sh, m_ss, m_off;
};
static_assert(sizeof(SoftmaxPush) <= 128, "push constants beyond the guaranteed 128 bytes");

}  // namespace vkattn::detail
