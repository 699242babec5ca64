// Recording a planned attention call: bindings, push constants, dispatches and the barrier between
// the split-KV pass and the combine pass.
#pragma once

#include <vulkan/vulkan.h>

#include <optional>

#include "attention_plan.hpp"
#include "attention_unfused.hpp"
#include "context_impl.hpp"

namespace vkattn::detail {

// `workspace` / `workspace_offset`: where the split-KV partials go (unused when plan.splits == 1).
void record_planned_attention(ContextImpl& context, VkCommandBuffer cmd, const LaunchPlan& plan,
                              const AttentionArgs& args, VkBuffer workspace, uint64_t workspace_offset);

// A call planned on either path (the path chosen from AttentionArgs::path and whether the weights
// are requested).
struct PlannedAttention {
  std::optional<LaunchPlan> fused;
  std::optional<UnfusedPlan> unfused;
  uint64_t workspace_bytes() const { return fused ? fused->workspace_bytes : unfused->workspace_bytes; }
};

// Checks `path` is one of the enum's values; throws Error naming it.
void check_path(AttentionPath path);

// Chooses the path and plans it on `context`'s device; checks every argument, that every Buffer
// belongs to `context` and that no output overlaps another argument (call_buffers.hpp); throws Error
// (nothing is recorded). `workspace`: the caller's (record_attention), checked to hold the plan's
// workspace_bytes; null when vkattn supplies its own scratch.
PlannedAttention plan_any_path(const ContextImpl& context, const AttentionArgs& args,
                               const BufferSlice* workspace = nullptr);
void record_any_path(ContextImpl& context, VkCommandBuffer cmd, const PlannedAttention& planned,
                     const AttentionArgs& args, VkBuffer workspace, uint64_t workspace_offset);

// The barriers vkattn's synchronous calls put around recorded attention: prior host/transfer/shader
// writes before the kernels read, and the kernels' writes before host or transfer reads.
void barrier_before_attention(VkCommandBuffer cmd);
void barrier_after_attention(VkCommandBuffer cmd);
// Compute shader to compute shader: the accesses `before` are made available to and visible for the
// accesses `after` (a global memory barrier; vkattn's dispatches share buffers, not images).
void compute_barrier(VkCommandBuffer cmd, VkAccessFlags before, VkAccessFlags after);
// Between two of vkattn's dispatches: every shader read and write before, every one after (a
// dispatch may read what the last wrote, or overwrite what it read).
void barrier_between_dispatches(VkCommandBuffer cmd);

}  // namespace vkattn::detail
