// One-shot command submission for vkattn's synchronous calls (uploads, downloads, attention()).
#include <string>

#include "context_impl.hpp"
#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {

void ContextImpl::check_usable() const {
  if (device_lost)
    throw vk_error("context: the device was lost (VK_ERROR_DEVICE_LOST) in an earlier call; this Context can no "
                   "longer run work: create a new one",
                   VK_ERROR_DEVICE_LOST);
}

void ContextImpl::check_result(const char* call, VkResult result) {
  if (result == VK_ERROR_DEVICE_LOST) device_lost = true;
  if (result != VK_SUCCESS) throw_vk_error(call, result);
}

void ContextImpl::submit_and_wait(const std::function<void(VkCommandBuffer)>& record) {
  std::lock_guard lock(queue_mutex);
  check_usable();
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd;
  VK_TRY(vkAllocateCommandBuffers(device, &alloc, &cmd));
  // Freed on every path, including a throwing `record`.
  struct Free {
    VkDevice device;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    ~Free() { vkFreeCommandBuffers(device, pool, 1, &cmd); }
  } free_on_exit{device, pool_, cmd};

  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_TRY(vkBeginCommandBuffer(cmd, &begin));
  record(cmd);
  VK_TRY(vkEndCommandBuffer(cmd));

  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  VK_TRY(vkResetFences(device, 1, &fence_));
  const VkResult injected = injected_fault(testing::FaultSite::submit);
  check_result("vkQueueSubmit", injected != VK_SUCCESS ? injected : vkQueueSubmit(queue, 1, &submit, fence_));
  check_result("vkWaitForFences", vkWaitForFences(device, 1, &fence_, VK_TRUE, UINT64_MAX));
}

void ContextImpl::submit_with_scratch(uint64_t scratch_bytes,
                                      const std::function<void(VkCommandBuffer, VkBuffer)>& record) {
  std::lock_guard lock(queue_mutex);  // the scratch buffer is shared: hold the queue until the work is done
  const VkBuffer buffer = scratch_bytes > 0 ? scratch(scratch_bytes).buffer : VK_NULL_HANDLE;
  submit_and_wait([&](VkCommandBuffer cmd) { record(cmd, buffer); });
}

}  // namespace vkattn::detail

namespace vkattn::testing {

void set_fault_hook(Context& context, FaultHook hook) { detail::impl_of(context).fault_hook = std::move(hook); }
void set_device_memory_unmapped(Context& context, bool unmapped) {
  detail::impl_of(context).device_memory_unmapped = unmapped;
}

}  // namespace vkattn::testing
