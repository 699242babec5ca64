// The pipeline registry: descriptor-set and pipeline layouts per kernel kind, and compute pipelines
// built lazily, keyed by (SPIR-V module, specialization constants), through one VkPipelineCache.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vkattn::detail {

enum class KernelKind { attention, combine, gemm, softmax };

struct KernelLayout {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;  // push-descriptor set
  VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  uint32_t bindings = 0;
};

class PipelineRegistry {
 public:
  explicit PipelineRegistry(VkDevice device);
  PipelineRegistry(const PipelineRegistry&) = delete;
  PipelineRegistry& operator=(const PipelineRegistry&) = delete;
  ~PipelineRegistry();

  const KernelLayout& layout(KernelKind kind) const { return layouts_[static_cast<int>(kind)]; }
  // The pipeline of SPIR-V module `module` (an embedded shader name) with `spec` as constant_id
  // 0, 1, 2, ... Built on first use; thread-safe.
  VkPipeline get(KernelKind kind, const std::string& module, const std::vector<uint32_t>& spec);

 private:
  void release();
  VkShaderModule shader_module(const std::string& name);

  VkDevice device_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  KernelLayout layouts_[4];
  std::mutex mutex_;
  std::map<std::string, VkShaderModule> modules_;
  std::map<std::pair<std::string, std::vector<uint32_t>>, VkPipeline> pipelines_;
};

}  // namespace vkattn::detail
