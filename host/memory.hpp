// Device memory for vkattn-owned buffers: one VkBuffer + VkDeviceMemory per allocation (attention
// needs few, large buffers), host-mapped when the memory type allows it.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>

namespace vkattn::detail {

class ContextImpl;

enum class MemoryUse {
  device,   // storage buffer; device-local preferred, mapped when also host-visible (CPUs, UMA)
  staging,  // host-visible transfer buffer for upload/download
};

struct Allocation {
  VkDevice device = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // non-null when host-visible and coherent
  uint64_t size = 0;

  Allocation() = default;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();
};

// Throws Error (with the VkResult) when the allocation fails; nothing leaks.
std::unique_ptr<Allocation> allocate_buffer(const ContextImpl& context, uint64_t bytes, MemoryUse use);

}  // namespace vkattn::detail
