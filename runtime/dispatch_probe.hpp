// The recording side of vkattn::DispatchProfile: while one is active on a Context, CommandList::replay
// writes a timestamp at the start of each call it records and after each dispatch, into a query pool
// whose slots it reserves per call without a lock.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace vkattn::detail {

struct DispatchProbe {
  static constexpr uint32_t kUnprofiled = UINT32_MAX;

  VkQueryPool pool = VK_NULL_HANDLE;
  uint32_t capacity = 0;
  std::atomic<uint32_t> next{0};        // the first free query
  std::atomic<uint32_t> unprofiled{0};  // calls that found no room
  // Per query: the pipeline whose dispatch ended there; VK_NULL_HANDLE marks a call's start.
  std::vector<VkPipeline> pipelines;

  // Reserves a call's 1 + `dispatches` queries, resets them and writes the call's start timestamp
  // into `cmd`; returns the query of its first dispatch, or kUnprofiled when the pool is full.
  uint32_t begin_call(VkCommandBuffer cmd, uint32_t dispatches);
  // The timestamp after a dispatch of `pipeline`, at `query` (begin_call's, then the next ones).
  void after_dispatch(VkCommandBuffer cmd, uint32_t query, VkPipeline pipeline);
};

}  // namespace vkattn::detail
