// The pipeline registry: descriptor-set and pipeline layouts per kernel kind, and compute pipelines
// built lazily, keyed by (SPIR-V module, specialization constants), through one VkPipelineCache —
// which starts from the application's cache file when it names one (pipeline_cache.hpp).
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
  // `cache_file`: the application's pipeline cache file, "" for none. A missing, damaged or foreign
  // file is ignored (the cache starts empty); see cache_note().
  PipelineRegistry(VkPhysicalDevice physical_device, VkDevice device, const std::string& cache_file = {});
  PipelineRegistry(const PipelineRegistry&) = delete;
  PipelineRegistry& operator=(const PipelineRegistry&) = delete;
  ~PipelineRegistry();

  const KernelLayout& layout(KernelKind kind) const { return layouts_[static_cast<int>(kind)]; }
  // The pipeline of SPIR-V module `module` (an embedded shader name) with `spec` as constant_id
  // 0, 1, 2, ... Built on first use; thread-safe.
  VkPipeline get(KernelKind kind, const std::string& module, const std::vector<uint32_t>& spec);

  // The VkPipelineCache's contents (vkGetPipelineCacheData), for saving; thread-safe.
  std::vector<uint8_t> cache_data();
  // Whether the cache started from the application's file, and what became of that file.
  bool cache_loaded() const { return cache_loaded_; }
  const std::string& cache_note() const { return cache_note_; }
  // How many pipelines have been built (for tests and tools).
  std::size_t pipeline_count();

 private:
  void release();
  VkShaderModule shader_module(const std::string& name);

  VkDevice device_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool cache_loaded_ = false;
  std::string cache_note_;
  KernelLayout layouts_[4];
  std::mutex mutex_;
  std::map<std::string, VkShaderModule> modules_;
  std::map<std::pair<std::string, std::vector<uint32_t>>, VkPipeline> pipelines_;
};

}  // namespace vkattn::detail
