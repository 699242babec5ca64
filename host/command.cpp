// One-shot command submission for vkattn's synchronous calls (uploads, downloads, attention()).
#include <string>

#include "context_impl.hpp"
#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {

void ContextImpl::submit_and_wait(const std::function<void(VkCommandBuffer)>& record) {
  std::lock_guard lock(queue_mutex);
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
  VK_TRY(vkQueueSubmit(queue, 1, &submit, fence_));
  VK_TRY(vkWaitForFences(device, 1, &fence_, VK_TRUE, UINT64_MAX));
}

void ContextImpl::submit_with_scratch(uint64_t scratch_bytes,
                                      const std::function<void(VkCommandBuffer, VkBuffer)>& record) {
  std::lock_guard lock(queue_mutex);  // the scratch buffer is shared: hold the queue until the work is done
  const VkBuffer buffer = scratch_bytes > 0 ? scratch(scratch_bytes).buffer : VK_NULL_HANDLE;
  submit_and_wait([&](VkCommandBuffer cmd) { record(cmd, buffer); });
}

}  // namespace vkattn::detail
