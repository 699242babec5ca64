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

// The copy shader's pipeline: two storage buffers (src, dst) and the count of chunks pushed.
struct CopyPipeline {
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
};

CopyPipeline create_copy_pipeline(Objects& objects) {
  const VkDevice device = objects.device();
  CopyPipeline p;
  VkDescriptorSetLayoutBinding bindings[2] = {
      {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr},
      {1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr}};
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = 2;
  set_info.pBindings = bindings;
  VkDescriptorSetLayout set_layout;
  check(vkCreateDescriptorSetLayout(device, &set_info, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
  objects.add([=] { vkDestroyDescriptorSetLayout(device, set_layout, nullptr); });
  p.set_layout = set_layout;
  const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push;
  VkPipelineLayout layout;
  check(vkCreatePipelineLayout(device, &layout_info, nullptr, &layout), "vkCreatePipelineLayout");
  objects.add([=] { vkDestroyPipelineLayout(device, layout, nullptr); });
  p.layout = layout;
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
  p.pipeline = pipeline;
  return p;
}

// The command buffer a copy is recorded into, its two timestamps and the fence it is waited on with.
struct Submission {
  VkCommandBuffer cmd;
  VkQueryPool queries;
  VkFence fence;
};

Submission create_submission(Objects& objects, uint32_t queue_family_index) {
  const VkDevice device = objects.device();
  Submission s;
  VkCommandPoolCreateInfo command_pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  command_pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  command_pool_info.queueFamilyIndex = queue_family_index;
  VkCommandPool command_pool;
  check(vkCreateCommandPool(device, &command_pool_info, nullptr, &command_pool), "vkCreateCommandPool");
  objects.add([=] { vkDestroyCommandPool(device, command_pool, nullptr); });
  VkCommandBufferAllocateInfo command_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  command_info.commandPool = command_pool;
  command_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  command_info.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device, &command_info, &s.cmd), "vkAllocateCommandBuffers");
  VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  query_info.queryCount = 2;
  VkQueryPool queries;
  check(vkCreateQueryPool(device, &query_info, nullptr, &queries), "vkCreateQueryPool");
  objects.add([=] { vkDestroyQueryPool(device, queries, nullptr); });
  s.queries = queries;
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  check(vkCreateFence(device, &fence_info, nullptr, &fence), "vkCreateFence");
  objects.add([=] { vkDestroyFence(device, fence, nullptr); });
  s.fence = fence;
  return s;
}

// The two copies of `bytes` from src to dst (vkCmdCopyBuffer and the copy shader), each timed alone.
class CopyBench {
 public:
  CopyBench(Context& context, uint64_t bytes)
      : context_(context),
        info_(context.device_info()),
        bytes_(bytes),
        objects_(context.vk_device()),
        // Two buffers, both written first: untouched memory may be the zero page on a CPU device.
        src_(Buffer::allocate(context, bytes)),
        dst_(Buffer::allocate(context, bytes)) {
    src_.fill(0x5a);
    dst_.fill(0);
    // Pieces of the buffers that one storage-buffer binding can hold, at offsets the device accepts.
    const uint64_t alignment = std::max<uint64_t>(info_.min_storage_buffer_offset_alignment, kChunk);
    piece_ = std::max<uint64_t>(std::min<uint64_t>(info_.max_storage_buffer_range, 1u << 30) / alignment * alignment, alignment);
    if (src_.offset() % alignment != 0 || dst_.offset() % alignment != 0)
      throw Error("bench --copy: the copy buffers do not start at the storage-buffer offset alignment");
    pieces_ = static_cast<uint32_t>((bytes + piece_ - 1) / piece_);
    pipeline_ = create_copy_pipeline(objects_);
    create_piece_sets();
    submission_ = create_submission(objects_, context.queue_family_index());
  }

  void clear_destination() { dst_.fill(0); }

  // One copy in its own submission, between timestamps; returns its milliseconds.
  double run(bool shader) {
    const VkCommandBuffer cmd = submission_.cmd;
    check(vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
    vkCmdResetQueryPool(cmd, submission_.queries, 0, 2);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, submission_.queries, 0);
    if (shader) {
      record_shader_copy(cmd);
    } else {
      const VkBufferCopy region{src_.offset(), dst_.offset(), bytes_};
      vkCmdCopyBuffer(cmd, src_.handle(), dst_.handle(), 1, &region);
    }
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, submission_.queries, 1);
    check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    return submit_and_time();
  }

  // What a copy left in dst: src's bytes, checked in windows at the start, middle and end (and
  // across the pieces' edges, which the middle and end windows reach on the second piece).
  void check_copied(const char* how) const {
    constexpr uint64_t kWindow = 4096;
    const uint64_t bytes = bytes_, piece = piece_;
    for (const uint64_t at : {uint64_t(0), bytes / 2, bytes > kWindow ? bytes - kWindow : 0, piece > kWindow / 2 && piece < bytes ? piece - kWindow / 2 : 0}) {
      const uint64_t n = std::min(kWindow, bytes - at);
      std::vector<uint8_t> got(n);
      dst_.download(got.data(), n, at);
      for (uint64_t i = 0; i < n; ++i)
        if (got[i] != 0x5a)
          throw Error(std::string("bench --copy: ") + how + " left byte " + std::to_string(at + i) + " of the copy unwritten");
    }
  }

 private:
  // One descriptor set per piece, binding that piece of src and of dst.
  void create_piece_sets() {
    const VkDevice device = objects_.device();
    const VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2 * pieces_};
    VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pool_info.maxSets = pieces_;
    pool_info.poolSizeCount = 1;
    pool_info.pPoolSizes = &pool_size;
    VkDescriptorPool descriptor_pool;
    check(vkCreateDescriptorPool(device, &pool_info, nullptr, &descriptor_pool), "vkCreateDescriptorPool");
    objects_.add([=] { vkDestroyDescriptorPool(device, descriptor_pool, nullptr); });
    std::vector<VkDescriptorSetLayout> layouts(pieces_, pipeline_.set_layout);
    sets_.resize(pieces_);
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = descriptor_pool;
    alloc.descriptorSetCount = pieces_;
    alloc.pSetLayouts = layouts.data();
    check(vkAllocateDescriptorSets(device, &alloc, sets_.data()), "vkAllocateDescriptorSets");
    for (uint32_t i = 0; i < pieces_; ++i) {
      const uint64_t offset = uint64_t(i) * piece_, size = std::min(piece_, bytes_ - offset);
      const VkDescriptorBufferInfo buffers[2] = {{src_.handle(), src_.offset() + offset, size},
                                                 {dst_.handle(), dst_.offset() + offset, size}};
      VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      write.dstSet = sets_[i];
      write.descriptorCount = 2;
      write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      write.pBufferInfo = buffers;
      vkUpdateDescriptorSets(device, 1, &write, 0, nullptr);
    }
  }

  void record_shader_copy(VkCommandBuffer cmd) const {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_.pipeline);
    for (uint32_t i = 0; i < pieces_; ++i) {
      const uint64_t offset = uint64_t(i) * piece_, size = std::min(piece_, bytes_ - offset);
      const uint32_t count = static_cast<uint32_t>(size / kChunk);
      const uint32_t groups =
          static_cast<uint32_t>(std::min<uint64_t>((count + kWorkgroup - 1) / kWorkgroup, info_.max_workgroup_count[0]));
      vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_.layout, 0, 1, &sets_[i], 0, nullptr);
      vkCmdPushConstants(cmd, pipeline_.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &count);
      vkCmdDispatch(cmd, groups, 1, 1);
    }
  }

  // Submits the recorded copy, waits for it, and returns the milliseconds between its timestamps.
  double submit_and_time() {
    const VkDevice device = objects_.device();
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &submission_.cmd;
    check(vkResetFences(device, 1, &submission_.fence), "vkResetFences");
    check(vkQueueSubmit(context_.vk_queue(), 1, &submit, submission_.fence), "vkQueueSubmit");
    check(vkWaitForFences(device, 1, &submission_.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    uint64_t ticks[2];
    check(vkGetQueryPoolResults(device, submission_.queries, 0, 2, sizeof(ticks), ticks, sizeof(uint64_t),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    return static_cast<double>(ticks[1] - ticks[0]) * info_.timestamp_period_ns * 1e-6;
  }

  Context& context_;
  const DeviceInfo& info_;
  uint64_t bytes_;
  Objects objects_;  // destroyed after the buffers, as the copies' Vulkan objects always were
  Buffer src_, dst_;
  uint64_t piece_ = 0;
  uint32_t pieces_ = 0;
  CopyPipeline pipeline_{};
  std::vector<VkDescriptorSet> sets_;
  Submission submission_{};
};

}  // namespace

double gb_per_s(uint64_t bytes, double ms) { return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0; }

CopyTiming time_copies(Context& context, uint64_t bytes, int warmup, int iters) {
  const DeviceInfo& info = context.device_info();
  if (!info.timestamps) throw Error("bench --copy: " + info.name + " has no compute timestamp queries");
  bytes = std::max<uint64_t>((bytes + kChunk - 1) / kChunk * kChunk, kChunk);
  CopyBench bench(context, bytes);

  CopyTiming t;
  t.bytes = bytes;
  t.iters = std::max(iters, 1);
  for (const bool shader : {false, true}) {
    bench.clear_destination();
    for (int i = 0; i < warmup; ++i) bench.run(shader);
    std::vector<double> ms;
    for (int i = 0; i < t.iters; ++i) ms.push_back(bench.run(shader));
    const double med = median(ms), lo = *std::min_element(ms.begin(), ms.end());
    (shader ? t.shader_ms_median : t.transfer_ms_median) = med;
    (shader ? t.shader_ms_min : t.transfer_ms_min) = lo;
    bench.check_copied(shader ? "the copy shader" : "vkCmdCopyBuffer");
  }
  return t;
}

}  // namespace vkattn::cli
