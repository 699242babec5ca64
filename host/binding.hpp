// Storage-buffer bindings of the kernels: a descriptor range plus the element offset the shader adds.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>

#include "context_impl.hpp"

namespace vkattn::detail {

// The descriptor starts at the aligned-down offset and the shader adds the remainder (in elements),
// so tensors may start at any element-aligned byte offset.
struct Binding {
  VkDescriptorBufferInfo info{};
  uint32_t element_offset = 0;
};

// `elements` elements of `element_size` bytes from byte `byte_offset` of `buffer`. The range covers
// whole 32-bit words: masks and 16-bit tensors are read a word at a time.
Binding bind(VkBuffer buffer, uint64_t byte_offset, uint64_t element_size, uint64_t elements, uint64_t alignment);

// The context's small placeholder buffer, for bindings a dispatch does not use.
Binding bind_dummy(const ContextImpl& context);

// Pushes `count` storage-buffer bindings (binding i = bindings[i]) as the compute descriptor set 0.
void push_bindings(const ContextImpl& context, VkCommandBuffer cmd, VkPipelineLayout layout,
                   const Binding* const* bindings, uint32_t count);

}  // namespace vkattn::detail
