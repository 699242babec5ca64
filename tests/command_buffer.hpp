// A primary command buffer of a Context's queue for tests that record prepared calls themselves:
// its own pool (destroyed with it, its command buffer too), begun on construction.
#pragma once

#include <vulkan/vulkan.h>

#include <doctest/doctest.h>
#include <vkattn/vkattn.hpp>

namespace vkattn::test {

class TestCommandBuffer {
 public:
  explicit TestCommandBuffer(Context& ctx) : ctx_(ctx) {
    VkCommandPoolCreateInfo pool_info{};
    pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pool_info.queueFamilyIndex = ctx.queue_family_index();
    REQUIRE(vkCreateCommandPool(ctx.vk_device(), &pool_info, nullptr, &pool_) == VK_SUCCESS);
    VkCommandBufferAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    info.commandPool = pool_;
    info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    info.commandBufferCount = 1;
    REQUIRE(vkAllocateCommandBuffers(ctx.vk_device(), &info, &cmd_) == VK_SUCCESS);
    VkCommandBufferBeginInfo begin{};
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    REQUIRE(vkBeginCommandBuffer(cmd_, &begin) == VK_SUCCESS);
  }
  ~TestCommandBuffer() { vkDestroyCommandPool(ctx_.vk_device(), pool_, nullptr); }
  TestCommandBuffer(const TestCommandBuffer&) = delete;
  TestCommandBuffer& operator=(const TestCommandBuffer&) = delete;

  VkCommandBuffer cmd() const { return cmd_; }

  // The caller's side of vkattn's contract between two recorded calls: the shader writes before are
  // visible to the shader reads and writes, and the host reads, after.
  void barrier() {
    VkMemoryBarrier b{};
    b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
    b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0,
                         nullptr);
  }

  // Ends the recording without submitting it (tests of what recording refuses or allocates).
  void end() { REQUIRE(vkEndCommandBuffer(cmd_) == VK_SUCCESS); }

  // Ends the recording, submits it and waits for the queue.
  void submit_and_wait() {
    end();
    VkSubmitInfo submit{};
    submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd_;
    REQUIRE(vkQueueSubmit(ctx_.vk_queue(), 1, &submit, VK_NULL_HANDLE) == VK_SUCCESS);
    REQUIRE(vkQueueWaitIdle(ctx_.vk_queue()) == VK_SUCCESS);
  }

 private:
  Context& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
};

}  // namespace vkattn::test
