// The attention kernels' push constants (runtime/shader_abi.hpp) and how a call's options become their
// flag bits and mask strides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "shader_abi.hpp"
#include "vkattn/attention.hpp"

namespace vkattn::detail {

// Flag bits of AttentionPush::flags and SoftmaxPush::flags (shaders/shader_abi.h).
enum AttentionFlags : uint32_t {
  kCausalTopLeft = CAUSAL_TOP_LEFT,
  kCausalBottomRight = CAUSAL_BOTTOM_RIGHT,
  kMaskKindShift = MASK_KIND_SHIFT,  // 0 none, 1 boolean, 2 f32, 3 f16
  kFlagKvLengths = FLAG_KV_LENGTHS,
  kFlagWriteLse = FLAG_WRITE_LSE,
  kFlagVarlen = FLAG_VARLEN,  // the row softmax only
  kFlagCacheLengths = FLAG_CACHE_LENGTHS,  // the row softmax only
};

// The causal alignment and explicit-mask kind bits of `flags`, the same in every push block that has
// them (the fused kernels and the row softmax).
inline uint32_t mask_flags(Causal causal, const std::optional<MaskLayout>& mask) {
  uint32_t flags = causal == Causal::top_left ? kCausalTopLeft : causal == Causal::bottom_right ? kCausalBottomRight : 0u;
  if (mask) {
    const uint32_t kind = mask->type == MaskType::boolean ? MASK_BOOL : mask->type == MaskType::f32 ? MASK_F32 : MASK_F16;
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

}  // namespace vkattn::detail
