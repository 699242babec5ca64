#include "bench_copy.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "bench_metrics.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
// tools/drivers/bench_copy.comp, compiled and embedded by tools/CMakeLists.txt.
extern const uint32_t spirv_bench_copy[];
extern const std::size_t spirv_bench_copy_words;
}  // namespace vkattn::detail

namespace vkattn::cli {
namespace {

void check(VkResult result, const char* call) {
  if (result != VK_SUCCESS) throw Error(std::string("bench --copy: ") + call + " failed (VkResult " + std::to_string(result) + ")");
}

// The Vulkan objects of the copies, destroyed in reverse order of creation.
class Objects {
 public:
  explicit Objects(VkDevice device) : device_(device) {}
  Objects(const Objects&) = delete;
  Objects& operator=(const Objects&) = delete;
  ~Objects() {
    for (auto it = destroy_.rbegin(); it != destroy_.rend(); ++it) (*it)();
  }
  void add(std::function<void()> destroy) { destroy_.push_back(std::move(destroy)); }
  VkDevice device() const { return device_; }

 private:
  VkDevice device_;
  std::vector<std::function<void()>> destroy_;
};

constexpr uint32_t kWorkgroup = 64;  // bench_copy.comp's local_size_x
constexpr uint64_t kChunk = 16;      // bytes per invocation and iteration (a uvec4)

}  // namespace

double gb_per_s(uint64_t bytes, double ms) { return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0; }

CopyTiming time_copies(Context& context, uint64_t bytes, int warmup, int iters) {
  const DeviceInfo& info = context.device_info();
  if (!info.timestamps) throw Error("bench --copy: " + info.name + " has no compute timestamp queries");
  bytes = std::max<uint64_t>((bytes + kChunk - 1) / kChunk * kChunk, kChunk);
  const VkDevice device = context.vk_device();
  Objects objects(device);

  // Two buffers, both written first: untouched memory may be the zero page on a CPU device.
  Buffer src = Buffer::allocate(context, bytes), dst = Buffer::allocate(context, bytes);
  src.fill(0x5a);
  dst.fill(0);

  // Pieces of the buffers that one storage-buffer binding can hold, at offsets the device accepts.
  const uint64_t alignment = std::max<uint64_t>(info.min_storage_buffer_offset_alignment, kChunk);
  const uint64_t piece = std::max<uint64_t>(std::min<uint64_t>(info.max_storage_buffer_range, 1u << 30) / alignment * alignment, alignment);
  if (src.offset() % alignment != 0 || dst.offset() % alignment != 0)
    throw Error("bench --copy: the copy buffers do not start at the storage-buffer offset alignment");
  const uint32_t pieces = static_cast<uint32_t>((bytes + piece - 1) / piece);

  VkDescriptorSetLayoutBinding bindings[2] = {
      {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr},
      {1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr}};
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = 2;
  set_info.pBindings = bindings;
  VkDescriptorSetLayout set_layout;
  check(vkCreateDescriptorSetLayout(device, &set_info, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
  objects.add([=] { vkDestroyDescriptorSetLayout(device, set_layout, nullptr); });
  const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push;
  VkPipelineLayout layout;
  check(vkCreatePipelineLayout(device, &layout_info, nullptr, &layout), "vkCreatePipelineLayout");
  objects.add([=] { vkDestroyPipelineLayout(device, layout, nullptr); });
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = detail::spirv_bench_copy_words * 4;
  module_info.pCode = detail::spirv_bench_copy;
  VkShaderModule module;
  check(vkCreateShaderModule(device, &module_info, nullptr, &module), "vkCreateShaderModule");
  objects.add([=] { vkDestroyShaderModule(device, module, nullptr); });
  VkComputePipelineCreateInfo pipeline_info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pipeline_info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0, VK_SHADER_STAGE_COMPUTE_BIT,
                         module, "main", nullptr};
  pipeline_info.layout = layout;
  VkPipeline pipeline;
  check(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &pipeline), "vkCreateComputePipelines");
  objects.add([=] { vkDestroyPipeline(device, pipeline, nullptr); });

  const VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2 * pieces};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.maxSets = pieces;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  VkDescriptorPool descriptor_pool;
  check(vkCreateDescriptorPool(device, &pool_info, nullptr, &descriptor_pool), "vkCreateDescriptorPool");
  objects.add([=] { vkDestroyDescriptorPool(device, descriptor_pool, nullptr); });
  std::vector<VkDescriptorSetLayout> layouts(pieces, set_layout);
  std::vector<VkDescriptorSet> sets(pieces);
  VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  alloc.descriptorPool = descriptor_pool;
  alloc.descriptorSetCount = pieces;
  alloc.pSetLayouts = layouts.data();
  check(vkAllocateDescriptorSets(device, &alloc, sets.data()), "vkAllocateDescriptorSets");
  for (uint32_t i = 0; i < pieces; ++i) {
    const uint64_t offset = uint64_t(i) * piece, size = std::min(piece, bytes - offset);
    const VkDescriptorBufferInfo buffers[2] = {{src.handle(), src.offset() + offset, size},
                                               {dst.handle(), dst.offset() + offset, size}};
    VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    write.dstSet = sets[i];
    write.descriptorCount = 2;
    write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    write.pBufferInfo = buffers;
    vkUpdateDescriptorSets(device, 1, &write, 0, nullptr);
  }

  VkCommandPoolCreateInfo command_pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  command_pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  command_pool_info.queueFamilyIndex = context.queue_family_index();
  VkCommandPool command_pool;
  check(vkCreateCommandPool(device, &command_pool_info, nullptr, &command_pool), "vkCreateCommandPool");
  objects.add([=] { vkDestroyCommandPool(device, command_pool, nullptr); });
  VkCommandBufferAllocateInfo command_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  command_info.commandPool = command_pool;
  command_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  command_info.commandBufferCount = 1;
  VkCommandBuffer cmd;
  check(vkAllocateCommandBuffers(device, &command_info, &cmd), "vkAllocateCommandBuffers");
  VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  query_info.queryCount = 2;
  VkQueryPool queries;
  check(vkCreateQueryPool(device, &query_info, nullptr, &queries), "vkCreateQueryPool");
  objects.add([=] { vkDestroyQueryPool(device, queries, nullptr); });
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  check(vkCreateFence(device, &fence_info, nullptr, &fence), "vkCreateFence");
  objects.add([=] { vkDestroyFence(device, fence, nullptr); });

  // One copy in its own submission, between timestamps; returns its milliseconds.
  const auto run = [&](bool shader) {
    check(vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
    vkCmdResetQueryPool(cmd, queries, 0, 2);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
    if (shader) {
      vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
      for (uint32_t i = 0; i < pieces; ++i) {
        const uint64_t offset = uint64_t(i) * piece, size = std::min(piece, bytes - offset);
        const uint32_t count = static_cast<uint32_t>(size / kChunk);
        const uint32_t groups =
            static_cast<uint32_t>(std::min<uint64_t>((count + kWorkgroup - 1) / kWorkgroup, info.max_workgroup_count[0]));
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &sets[i], 0, nullptr);
        vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &count);
        vkCmdDispatch(cmd, groups, 1, 1);
      }
    } else {
      const VkBufferCopy region{src.offset(), dst.offset(), bytes};
      vkCmdCopyBuffer(cmd, src.handle(), dst.handle(), 1, &region);
    }
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
    check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd;
    check(vkResetFences(device, 1, &fence), "vkResetFences");
    check(vkQueueSubmit(context.vk_queue(), 1, &submit, fence), "vkQueueSubmit");
    check(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    uint64_t ticks[2];
    check(vkGetQueryPoolResults(device, queries, 0, 2, sizeof(ticks), ticks, sizeof(uint64_t),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    return static_cast<double>(ticks[1] - ticks[0]) * info.timestamp_period_ns * 1e-6;
  };

  // What a copy left in dst: src's bytes, checked in windows at the start, middle and end (and
  // across the pieces' edges, which the middle and end windows reach on the second piece).
  const auto check_copied = [&](const char* how) {
    constexpr uint64_t kWindow = 4096;
    for (const uint64_t at : {uint64_t(0), bytes / 2, bytes > kWindow ? bytes - kWindow : 0, piece > kWindow / 2 && piece < bytes ? piece - kWindow / 2 : 0}) {
      const uint64_t n = std::min(kWindow, bytes - at);
      std::vector<uint8_t> got(n);
      dst.download(got.data(), n, at);
      for (uint64_t i = 0; i < n; ++i)
        if (got[i] != 0x5a)
          throw Error(std::string("bench --copy: ") + how + " left byte " + std::to_string(at + i) + " of the copy unwritten");
    }
  };

  CopyTiming t;
  t.bytes = bytes;
  t.iters = std::max(iters, 1);
  for (const bool shader : {false, true}) {
    dst.fill(0);
    for (int i = 0; i < warmup; ++i) run(shader);
    std::vector<double> ms;
    for (int i = 0; i < t.iters; ++i) ms.push_back(run(shader));
    const double med = median(ms), lo = *std::min_element(ms.begin(), ms.end());
    (shader ? t.shader_ms_median : t.transfer_ms_median) = med;
    (shader ? t.shader_ms_min : t.transfer_ms_min) = lo;
    check_copied(shader ? "the copy shader" : "vkCmdCopyBuffer");
  }
  return t;
}

}  // namespace vkattn::cli
