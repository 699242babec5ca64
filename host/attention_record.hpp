// Recording a planned attention call: bindings, push constants, dispatches and the barrier between
// the split-KV pass and the combine pass.
#pragma once

#include <vulkan/vulkan.h>

#include "attention_plan.hpp"
#include "context_impl.hpp"

namespace vkattn::detail {

// `workspace` / `workspace_offset`: where the split-KV partials go (unused when plan.splits == 1).
void record_planned_attention(ContextImpl& context, VkCommandBuffer cmd, const LaunchPlan& plan,
                              const AttentionArgs& args, VkBuffer workspace, uint64_t workspace_offset);

// The barriers vkattn's synchronous calls put around recorded attention: prior host/transfer/shader
// writes before the kernels read, and the kernels' writes before host or transfer reads.
void barrier_before_attention(VkCommandBuffer cmd);
void barrier_after_attention(VkCommandBuffer cmd);

}  // namespace vkattn::detail
