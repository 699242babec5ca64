#include "vkattn/dispatch_profile.hpp"

#include <string>

#include "context_impl.hpp"
#include "dispatch_probe.hpp"
#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn {

namespace detail {

uint32_t DispatchProbe::begin_call(VkCommandBuffer cmd, uint32_t dispatches) {
  const uint32_t queries = dispatches + 1;
  uint32_t first = next.load(std::memory_order_relaxed);
  do {
    if (queries > capacity - first) {
      unprofiled.fetch_add(1, std::memory_order_relaxed);
      return kUnprofiled;
    }
  } while (!next.compare_exchange_weak(first, first + queries, std::memory_order_relaxed));
  pipelines[first] = VK_NULL_HANDLE;
  vkCmdResetQueryPool(cmd, pool, first, queries);
  vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, first);
  return first + 1;
}

void DispatchProbe::after_dispatch(VkCommandBuffer cmd, uint32_t query, VkPipeline pipeline) {
  pipelines[query] = pipeline;
  vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, query);
}

}  // namespace detail

namespace {
constexpr uint32_t kMaxDispatches = 1u << 20;
}  // namespace

struct DispatchProfile::State {
  std::shared_ptr<detail::ContextImpl> context;
  detail::DispatchProbe probe;
  std::size_t pipelines_before = 0;  // the registry's count when the profile began
  ~State() {
    if (context->dispatch_probe == &probe) context->dispatch_probe = nullptr;
    vkDestroyQueryPool(context->device, probe.pool, nullptr);
  }
};

DispatchProfile::DispatchProfile(Context& context, uint32_t max_dispatches) {
  const std::shared_ptr<detail::ContextImpl>& c = detail::shared_impl_of(context);
  if (!c->info.timestamps)
    throw detail::unsupported("DispatchProfile: " + c->info.name + " has no compute timestamp queries");
  if (max_dispatches == 0 || max_dispatches > kMaxDispatches)
    throw Error("DispatchProfile: max_dispatches (" + std::to_string(max_dispatches) + ") must be 1 to " +
                std::to_string(kMaxDispatches));
  if (c->dispatch_probe)
    throw Error("DispatchProfile: another profile is already active on this Context (one at a time)");
  auto state = std::make_unique<State>();
  state->context = c;
  state->pipelines_before = c->pipelines->pipeline_count();
  // One more query than dispatches: the first call's start.
  const uint32_t queries = max_dispatches + 1;
  VkQueryPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  pool_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  pool_info.queryCount = queries;
  VK_TRY(vkCreateQueryPool(c->device, &pool_info, nullptr, &state->probe.pool));
  state->probe.capacity = queries;
  state->probe.pipelines.assign(queries, VK_NULL_HANDLE);
  c->dispatch_probe = &state->probe;
  state_ = std::move(state);
}

DispatchProfile::~DispatchProfile() = default;

std::vector<PipelineBuild> DispatchProfile::builds() const {
  return state_->context->pipelines->builds_since(state_->pipelines_before);
}

uint32_t DispatchProfile::unprofiled_calls() const { return state_->probe.unprofiled.load(); }

std::vector<DispatchTime> DispatchProfile::collect() {
  detail::ContextImpl& c = *state_->context;
  detail::DispatchProbe& probe = state_->probe;
  const uint32_t used = probe.next.exchange(0);
  std::vector<DispatchTime> times;
  if (used == 0) return times;
  // Each query's value and its availability, without waiting: a call never submitted would never
  // become available.
  std::vector<uint64_t> results(2 * static_cast<std::size_t>(used));
  const VkResult got = vkGetQueryPoolResults(c.device, probe.pool, 0, used, results.size() * sizeof(uint64_t),
                                             results.data(), 2 * sizeof(uint64_t),
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
  if (got != VK_SUCCESS && got != VK_NOT_READY) c.check_result("vkGetQueryPoolResults", got);
  const auto available = [&](uint32_t q) { return results[2 * q + 1] != 0; };
  const auto ticks = [&](uint32_t q) { return results[2 * q]; };
  uint32_t call = 0;
  for (uint32_t start = 0; start < used;) {
    uint32_t end = start + 1;  // one past the call's last dispatch
    while (end < used && probe.pipelines[end] != VK_NULL_HANDLE) ++end;
    bool complete = true;
    for (uint32_t q = start; q < end; ++q) complete = complete && available(q);
    if (complete) {
      for (uint32_t q = start + 1; q < end; ++q) {
        const double ms = static_cast<double>(ticks(q) - ticks(q - 1)) * c.info.timestamp_period_ns * 1e-6;
        auto [label, id] = c.pipelines->label(probe.pipelines[q]);
        times.push_back({std::move(label), id, call, ms});
      }
    }
    ++call;
    start = end;
  }
  return times;
}

}  // namespace vkattn
