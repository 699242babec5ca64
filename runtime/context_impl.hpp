// The state behind vkattn::Context: the device (owned or adopted), its queue, a command pool for
// vkattn's own submissions, the pipeline registry and a reusable scratch buffer.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "instance.hpp"
#include "memory.hpp"
#include "pipelines.hpp"
#include "vkattn/context.hpp"
#include "vkattn/testing.hpp"

namespace vkattn::detail {

struct DispatchProbe;

class ContextImpl {
 public:
  ContextImpl() = default;
  ContextImpl(const ContextImpl&) = delete;
  ContextImpl& operator=(const ContextImpl&) = delete;
  ~ContextImpl();

  // Finishes setup once the handles are set: device info, memory properties, command pool, registry.
  void initialise(uint32_t device_index);

  // Records with `record` into a fresh primary command buffer, submits it on the queue and waits.
  // Serialised per context (the queue and the pool are externally synchronised objects).
  void submit_and_wait(const std::function<void(VkCommandBuffer)>& record);

  // submit_and_wait, handing `record` the scratch buffer (at least `scratch_bytes`; VK_NULL_HANDLE
  // when 0), which stays reserved until the work has completed.
  void submit_with_scratch(uint64_t scratch_bytes, const std::function<void(VkCommandBuffer, VkBuffer)>& record);

  // A device buffer of at least `bytes`, reused across calls; only valid while `queue_mutex` is held.
  const Allocation& scratch(uint64_t bytes);
  // The scratch buffer's texel view (Allocation::texel_view), none without one; under `queue_mutex`.
  VkBufferView scratch_texel_view() const { return scratch_ ? scratch_->texel_view : VK_NULL_HANDLE; }
  // Frees the scratch buffer (Context::release_scratch); its size before, 0 when there was none.
  void release_scratch();
  // Bytes of device memory the scratch buffer holds now.
  uint64_t scratch_bytes();
  // A small buffer bound to shader bindings a call does not use (e.g. no mask).
  const Allocation& dummy() const { return *dummy_; }

  // Throws once the device has been lost: every later call fails fast, naming the cause.
  void check_usable() const;
  // Remembers a VK_ERROR_DEVICE_LOST (then throws like VK_TRY for any failure).
  void check_result(const char* call, VkResult result);
  // The result a test's fault hook injects at `site` (VK_SUCCESS without a hook).
  VkResult injected_fault(testing::FaultSite site) const { return fault_hook ? fault_hook(site) : VK_SUCCESS; }

  testing::FaultHook fault_hook;
  bool device_memory_unmapped = false;  // testing::set_device_memory_unmapped
  bool check_barriers = false;          // ContextOptions::check_barriers
  std::atomic<bool> device_lost{false};
  ValidationCallback validation_callback;  // referenced by the messenger: declared before it
  InstanceHandles instance;
  bool owns_device = false;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  bool storage_16bit_enabled = false;
  bool subgroup_size_control_enabled = false;  // subgroupSizeControl, computeFullSubgroups
  bool shader_int64_enabled = false;
  KernelVariant kernel = KernelVariant::automatic;
  std::string pipeline_cache_file;  // the application's, read by initialise(); "" for none
  DeviceInfo info;
  // The largest device buffer allocate_buffer gives a texel view (Allocation::texel_view): on a CPU
  // device, maxTexelBufferElements 8-byte texels where R32G32_UINT is a uniform texel buffer format
  // (Vulkan requires it); 0 elsewhere: GPUs' kernels do not read through texel buffers.
  uint64_t texel_view_bytes = 0;
  VkPhysicalDeviceMemoryProperties memory_properties{};
  // vkCmdPushDescriptorSetWithTemplateKHR (VK_KHR_push_descriptor), loaded from the device.
  PFN_vkCmdPushDescriptorSetWithTemplateKHR push_descriptors = nullptr;
  std::unique_ptr<PipelineRegistry> pipelines;
  // The active DispatchProfile's timestamps, written by every replay while one lives; else null.
  DispatchProbe* dispatch_probe = nullptr;
  std::recursive_mutex queue_mutex;
  // Every device allocation of this Context counts here (Context::memory_stats).
  std::shared_ptr<MemoryCounter> memory = std::make_shared<MemoryCounter>();

 private:
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::unique_ptr<Allocation> scratch_;
  std::unique_ptr<Allocation> dummy_;
};

}  // namespace vkattn::detail
