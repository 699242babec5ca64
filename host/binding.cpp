#include "binding.hpp"

#include <vector>

namespace vkattn::detail {

Binding bind(VkBuffer buffer, uint64_t byte_offset, uint64_t element_size, uint64_t elements, uint64_t alignment) {
  const uint64_t aligned = byte_offset / alignment * alignment;
  Binding b;
  b.info.buffer = buffer;
  b.info.offset = aligned;
  b.info.range = (byte_offset - aligned + elements * element_size + 3) / 4 * 4;
  b.element_offset = static_cast<uint32_t>((byte_offset - aligned) / element_size);
  return b;
}

Binding bind_dummy(const ContextImpl& c) {
  Binding b;
  b.info = {c.dummy().buffer, 0, c.dummy().size};
  return b;
}

void push_bindings(const ContextImpl& c, VkCommandBuffer cmd, VkPipelineLayout layout, const Binding* const* bindings,
                   uint32_t count) {
  std::vector<VkWriteDescriptorSet> writes(count);
  for (uint32_t i = 0; i < count; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &bindings[i]->info;
  }
  c.push_descriptor_set(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, count, writes.data());
}

}  // namespace vkattn::detail
