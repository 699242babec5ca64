#include "bench_timing.hpp"

#include <string>

#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

void check(VkResult result, const char* call) {
  if (result != VK_SUCCESS) throw Error(std::string("bench: ") + call + " failed (VkResult " + std::to_string(result) + ")");
}

// A command pool with one primary command buffer, a two-timestamp query pool and a fence,
// destroyed on every way out (the handles are null until created; vkDestroy* accepts null).
struct TimingObjects {
  VkDevice device;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkQueryPool queries = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  explicit TimingObjects(VkDevice d) : device(d) {}
  TimingObjects(const TimingObjects&) = delete;
  TimingObjects& operator=(const TimingObjects&) = delete;
  ~TimingObjects() {
    vkDestroyFence(device, fence, nullptr);
    vkDestroyQueryPool(device, queries, nullptr);
    vkDestroyCommandPool(device, pool, nullptr);  // frees cmd
  }
};

// What vkattn's synchronous calls put before and after recorded attention (runtime/prepared_attention.cpp):
// earlier host, transfer and shader accesses before the kernels read and write; their writes before
// host or transfer accesses.
void barrier_before(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void barrier_after(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

std::vector<double> time_recorded(Context& context, const std::function<void(VkCommandBuffer, int)>& record, int warmup,
                                  int iterations) {
  const DeviceInfo& info = context.device_info();
  if (!info.timestamps) throw Error("bench: " + info.name + " has no compute timestamp queries");
  TimingObjects o(context.vk_device());
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = context.queue_family_index();
  check(vkCreateCommandPool(o.device, &pool_info, nullptr, &o.pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo command_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  command_info.commandPool = o.pool;
  command_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  command_info.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(o.device, &command_info, &o.cmd), "vkAllocateCommandBuffers");
  VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  query_info.queryCount = 2;
  check(vkCreateQueryPool(o.device, &query_info, nullptr, &o.queries), "vkCreateQueryPool");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(o.device, &fence_info, nullptr, &o.fence), "vkCreateFence");

  std::vector<double> times;
  for (int run = 0; run < warmup + iterations; ++run) {
    const bool timed = run >= warmup;
    check(vkResetCommandBuffer(o.cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(o.cmd, &begin), "vkBeginCommandBuffer");
    if (timed) vkCmdResetQueryPool(o.cmd, o.queries, 0, 2);
    barrier_before(o.cmd);
    if (timed) vkCmdWriteTimestamp(o.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, o.queries, 0);
    record(o.cmd, run);
    if (timed) vkCmdWriteTimestamp(o.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, o.queries, 1);
    barrier_after(o.cmd);
    check(vkEndCommandBuffer(o.cmd), "vkEndCommandBuffer");
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &o.cmd;
    check(vkResetFences(o.device, 1, &o.fence), "vkResetFences");
    check(vkQueueSubmit(context.vk_queue(), 1, &submit, o.fence), "vkQueueSubmit");
    check(vkWaitForFences(o.device, 1, &o.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    if (!timed) continue;
    uint64_t ticks[2];
    check(vkGetQueryPoolResults(o.device, o.queries, 0, 2, sizeof(ticks), ticks, sizeof(uint64_t),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    times.push_back(static_cast<double>(ticks[1] - ticks[0]) * info.timestamp_period_ns * 1e-6);
  }
  return times;
}

}  // namespace vkattn::cli
