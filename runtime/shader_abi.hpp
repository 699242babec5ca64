// The shaders' ABI on the host: the push-constant structs, flag bits and specialization-constant ids
// come from the same file the shaders include (shaders/shader_abi.h), so the two cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pipelines.hpp"
#include "shader_abi.h"

namespace vkattn::detail {

using uint = uint32_t;  // GLSL's name, for the member lists

struct AttentionPush {
  ATTENTION_PUSH_MEMBERS
};
struct CombinePush {
  COMBINE_PUSH_MEMBERS
};
struct SoftmaxPush {
  SOFTMAX_PUSH_MEMBERS
};
struct GemmPush {
  GEMM_PUSH_MEMBERS
};
struct KvAppendPush {
  KV_APPEND_PUSH_MEMBERS
};
struct WorkListPush {
  WORK_LIST_PUSH_MEMBERS
};
struct BackwardPush {
  BACKWARD_PUSH_MEMBERS
};
struct ReducePush {
  REDUCE_PUSH_MEMBERS
};
struct MergePush {
  MERGE_PUSH_MEMBERS
};
struct CascadeLengthsPush {
  CASCADE_LENGTHS_PUSH_MEMBERS
};
struct CascadeMergePush {
  CASCADE_MERGE_PUSH_MEMBERS
};

// Every member is 4 bytes (std430 adds no padding), and Vulkan guarantees 128 bytes of push constants.
static_assert(sizeof(AttentionPush) == 32 * 4 && offsetof(AttentionPush, tile_base) == 31 * 4);
static_assert(sizeof(CombinePush) == 17 * 4);
static_assert(sizeof(WorkListPush) == 14 * 4);
static_assert(sizeof(SoftmaxPush) == 19 * 4);
static_assert(sizeof(GemmPush) == 32 * 4);
static_assert(sizeof(KvAppendPush) == 25 * 4);
static_assert(sizeof(BackwardPush) == 32 * 4 && sizeof(ReducePush) == 9 * 4 && sizeof(MergePush) == 12 * 4);
static_assert(sizeof(CascadeLengthsPush) == 7 * 4 && sizeof(CascadeMergePush) == 15 * 4);
static_assert(SPEC_BACKWARD_MODIFIERS + MOD_SPEC_BLOCK == SPEC_BACKWARD_VARLEN && SPEC_BACKWARD_COUNT <= kMaxSpecConstants);
static_assert(SPEC_ATTENTION_COUNT <= kMaxSpecConstants, "PipelineKey holds every specialization constant");
static_assert(sizeof(AttentionPush) <= 128 && sizeof(CombinePush) <= 128 && sizeof(SoftmaxPush) <= 128 &&
              sizeof(GemmPush) <= 128 && sizeof(KvAppendPush) <= 128);

}  // namespace vkattn::detail
