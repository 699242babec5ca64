// Where the kernels read the per-head tensors (vkattn/per_head.hpp), so that the recording code binds
// them in one loop: each kernel kind's binding of each tensor, and the byte offset in its push
// constants of the 16 bits that hold the tensor's element offset (shaders/modifiers.glsl: the high
// half of a 32-bit member).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "command_list.hpp"
#include "shader_abi.hpp"
#include "vkattn/per_head.hpp"

namespace vkattn::detail {

// The MOD_* bit that tells a kernel it has the tensor (shaders/modifiers.glsl).
inline uint32_t per_head_modifier_bit(PerHeadTensor t) { return t == PerHeadTensor::alibi ? MOD_ALIBI : MOD_SINKS; }

struct PerHeadBinding {
  bool read = false;  // the kernel kind reads this tensor
  uint32_t binding = 0;
  std::size_t push_offset = 0;
};

// The attention kernels and the row softmax read every per-head tensor; a split call's combine only
// the sinks (the split kernels leave them to it). Other kinds read none.
inline PerHead<PerHeadBinding> per_head_bindings(KernelKind kind) {
  PerHead<PerHeadBinding> b;
  if (kind == KernelKind::attention) {
    b.alibi = {true, ATTENTION_ALIBI_BINDING, offsetof(AttentionPush, kv_len_off) + 2};
    b.sinks = {true, ATTENTION_SINKS_BINDING, offsetof(AttentionPush, lse_off) + 2};
  } else if (kind == KernelKind::softmax) {
    b.alibi = {true, SOFTMAX_ALIBI_BINDING, offsetof(SoftmaxPush, kv_len_off) + 2};
    b.sinks = {true, SOFTMAX_SINKS_BINDING, offsetof(SoftmaxPush, lse_off) + 2};
  } else if (kind == KernelKind::combine) {
    b.sinks = {true, COMBINE_SINKS_BINDING, offsetof(CombinePush, lse_off) + 2};
  }
  return b;
}

// Each given tensor of `layouts` whole in its slot (the kernels index it with their own (b, h)), or
// the placeholder.
inline PerHead<Binding> per_head_slot_bindings(const PerHead<uint32_t>& slots, const PerHeadLayouts& layouts) {
  PerHead<Binding> b;
  for (PerHeadTensor t : kPerHeadTensors) {
    const std::optional<HeadValuesLayout>& l = layouts[t];
    b[t] = l ? Binding{slots[t], uint64_t(l->offset) * 4, 4, uint64_t(l->required_elements() - l->offset)} : kPlaceholder;
  }
  return b;
}

// Binds `bindings` where a dispatch of `kind` reads them.
inline void bind_per_head(Dispatch& d, KernelKind kind, const PerHead<Binding>& bindings) {
  const PerHead<PerHeadBinding> where = per_head_bindings(kind);
  for (PerHeadTensor t : kPerHeadTensors)
    if (where[t].read) d.bind(where[t].binding, bindings[t], where[t].push_offset);
}

}  // namespace vkattn::detail
