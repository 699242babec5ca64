#include "vkattn/timer.hpp"

#include <algorithm>
#include <functional>
#include <optional>

#include "attention_record.hpp"
#include "context_impl.hpp"
#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace {

void check_counts(const char* what, std::size_t rotations, int warmup, int iterations) {
  if (rotations == 0) throw Error(std::string(what) + ": no arguments to time");
  if (warmup < 0 || iterations < 1)
    throw Error(std::string(what) + ": warmup (" + std::to_string(warmup) + ") must be >= 0 and iterations (" +
                std::to_string(iterations) + ") >= 1");
}

// `warmup` untimed then `iterations` timed submissions, each recording rotation `it % rotations` with
// `record`, bracketed by timestamps; each timed one's GPU milliseconds.
std::vector<double> time_submissions(detail::ContextImpl& c, const char* what, std::size_t rotations, int warmup,
                                     int iterations, const std::function<void(VkCommandBuffer, std::size_t)>& record) {
  if (!c.info.timestamps) throw detail::unsupported(std::string(what) + ": " + c.info.name + " has no compute timestamp queries");
  VkQueryPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  pool_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  pool_info.queryCount = 2;
  VkQueryPool pool;
  VK_TRY(vkCreateQueryPool(c.device, &pool_info, nullptr, &pool));
  struct Destroy {
    VkDevice d;
    VkQueryPool p;
    ~Destroy() { vkDestroyQueryPool(d, p, nullptr); }
  } destroy{c.device, pool};

  std::lock_guard lock(c.queue_mutex);
  std::vector<double> times;
  for (int it = 0; it < warmup + iterations; ++it) {
    const std::size_t r = static_cast<std::size_t>(it) % rotations;
    const bool timed = it >= warmup;
    c.submit_and_wait([&](VkCommandBuffer cmd) {
      if (timed) vkCmdResetQueryPool(cmd, pool, 0, 2);
      detail::barrier_before_attention(cmd);
      if (timed) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0);
      record(cmd, r);
      if (timed) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1);
      detail::barrier_after_attention(cmd);
    });
    if (!timed) continue;
    uint64_t ticks[2];
    VK_TRY(vkGetQueryPoolResults(c.device, pool, 0, 2, sizeof(ticks), ticks, sizeof(uint64_t),
                                 VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    times.push_back(double(ticks[1] - ticks[0]) * c.info.timestamp_period_ns * 1e-6);
  }
  return times;
}

}  // namespace

std::vector<double> time_attention(Context& context, const std::vector<AttentionArgs>& rotations, int warmup,
                                   int iterations) {
  check_counts("time_attention", rotations.size(), warmup, iterations);
  detail::ContextImpl& c = detail::impl_of(context);
  // One prepared call per rotation: their layouts may differ (they usually don't).
  std::vector<PreparedAttention> calls;
  std::vector<AttentionBuffers> buffers;
  uint64_t workspace = 0;
  for (const AttentionArgs& a : rotations) {
    calls.emplace_back(context, AttentionSpec::of(a));
    buffers.push_back(AttentionBuffers::of(a));
    workspace = std::max(workspace, calls.back().workspace_bytes());
  }
  const detail::Allocation* scratch = workspace ? &c.scratch(workspace) : nullptr;
  return time_submissions(c, "time_attention", rotations.size(), warmup, iterations, [&](VkCommandBuffer cmd, std::size_t r) {
    detail::record_with_scratch(calls[r], cmd, buffers[r], scratch ? scratch->buffer : VK_NULL_HANDLE,
                                scratch ? scratch->texel_view : VK_NULL_HANDLE);
  });
}

std::vector<double> time_attention_backward(Context& context, const AttentionSpec& spec,
                                            const std::vector<BackwardBuffers>& rotations, int warmup, int iterations) {
  check_counts("time_attention_backward", rotations.size(), warmup, iterations);
  detail::ContextImpl& c = detail::impl_of(context);
  const PreparedAttentionBackward call(context, spec);
  std::optional<Buffer> workspace;
  if (call.workspace_bytes() > 0) workspace.emplace(Buffer::allocate(context, call.workspace_bytes()));
  const BufferSlice slice{workspace ? &*workspace : nullptr, 0};
  return time_submissions(c, "time_attention_backward", rotations.size(), warmup, iterations,
                          [&](VkCommandBuffer cmd, std::size_t r) { call.record(cmd, rotations[r], slice); });
}

}  // namespace vkattn
