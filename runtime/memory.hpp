// Device memory for vkattn-owned buffers: one VkBuffer + VkDeviceMemory per allocation (attention
// needs few, large buffers), host-mapped when the memory type allows it.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "vkattn/context.hpp"

namespace vkattn::detail {

class ContextImpl;

enum class MemoryUse {
  device,   // storage buffer: device-local; mapped when also host-visible (CPUs, UMA; not on a discrete GPU)
  staging,  // host-visible transfer buffer for upload/download
};

// Context::memory_stats(): the device memory of live Allocations. Shared by the Context and each of
// its Allocations, so an Allocation that outlives its Context still has somewhere to subtract from.
class MemoryCounter {
 public:
  void add(uint64_t bytes);
  void remove(uint64_t bytes);
  void reset_peak();
  MemoryStats stats() const;  // scratch_bytes left 0: the Context knows its scratch buffer

 private:
  mutable std::mutex mutex_;
  uint64_t current_ = 0, peak_ = 0, count_ = 0;
};

struct Allocation {
  VkDevice device = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // non-null when host-visible and coherent
  // A uniform texel buffer view of R32G32_UINT over the whole buffer, for the kernels that read
  // through one (gemm_subgroup_texel): a device buffer on a device that takes them
  // (ContextImpl::texel_view_bytes), else none.
  VkBufferView texel_view = VK_NULL_HANDLE;
  uint64_t size = 0;
  // Device memory counted against `counter` (staging memory is not), removed again on destruction.
  std::shared_ptr<MemoryCounter> counter;
  uint64_t counted_bytes = 0;

  Allocation() = default;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();
};

// Throws Error (with the VkResult) when the allocation fails; nothing leaks.
std::unique_ptr<Allocation> allocate_buffer(const ContextImpl& context, uint64_t bytes, MemoryUse use);

}  // namespace vkattn::detail
