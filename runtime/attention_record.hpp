// An attention call as vkattn records it: the path chosen and planned from the tensors' layouts, and
// its command list (command_list.hpp), whose slots the call's buffers fill at replay.
#pragma once

#include <vulkan/vulkan.h>

#include <optional>

#include "attention_plan.hpp"
#include "attention_unfused.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"

namespace vkattn::detail {

// The command-list slot of each argument. Attention calls use these; the multi-head layer maps its
// own intermediates into its list's slots.
struct AttentionSlots {
  uint32_t q = 1, k = 2, v = 3, out = 4, lse = 5, mask = 6, kv_lengths = 7, weights = 8;
  // The split-KV partials or the three-stage path's scores; the runner aligns the slot's base up to
  // the list's alignment.
  uint32_t workspace = 9;
  PerHead<uint32_t> per_head{10, 11};  // the score modifiers' per-head tensors, in kPerHeadTensors' order
  // A paged call's (k and v are then its caches): the block table (at the byte offset its plan's
  // emit was given) and the tokens to append.
  uint32_t block_table = 12, k_new = 13, v_new = 14;
  // Byte offsets of the LSE and the key lengths in their slots (a cascade's passes keep theirs in
  // the workspace).
  uint64_t lse_base = 0, kv_lengths_base = 0;
};
inline constexpr uint32_t kAttentionSlotCount = 12;  // the placeholder (slot 0) and slots q .. per_head above
inline constexpr uint32_t kPagedSlotCount = 15;      // and a paged call's three more

// A call planned on either path.
struct PathPlan {
  std::optional<FusedPlan> fused;
  std::optional<UnfusedPlan> unfused;
  std::optional<CascadePlan> cascade;  // a paged call's cascade (fused is then its suffix pass)
  uint64_t workspace_bytes() const {
    return cascade ? cascade->workspace_bytes : fused ? fused->workspace_bytes : unfused->workspace_bytes;
  }
  const AttentionProblem& problem() const { return fused ? fused->problem : unfused->problem; }
  uint64_t alignment() const { return fused ? fused->alignment : unfused->alignment; }
};

// A paged call planned (paged_plan.cpp).
struct PagedCall {
  PagedProblem problem;
  AttentionLayouts dense;
  PathPlan planned;  // fused, with a cascade (shared_prefix_pages > 0: fused is its suffix), or three-stage
};
// Plans a paged call (check_paged_attention, then on the dense view: with shared_prefix_pages,
// plan_cascade; the three-stage path where the layouts' path asks for it or path automatic's
// wide-head rule takes it; else plan_fused); throws Error.
PagedCall plan_paged(const DeviceInfo& device, KernelVariant variant, const PagedAttentionLayouts& layouts);

// How a planned call runs, as plan_attention and PreparedAttention::plan report it.
AttentionPlan report_of(const PathPlan& planned);
// What a planned dense call's buffers must hold (checked on every record).
CallNeeds needs_of(const PathPlan& planned, const AttentionLayouts& layouts, bool weights);

// Checks `path` is one of the enum's values; throws Error naming it.
void check_path(AttentionPath path);

// Chooses the path (the three-stage one when `weights` are requested or `path` says so) and plans
// it on `device`: checks the layouts and every limit; throws Error. Needs no buffer. `varlen`: the
// layouts are a packed variable-length batch's (plan_varlen).
PathPlan plan_path(const DeviceInfo& device, KernelVariant variant, const AttentionLayouts& layouts,
                           bool weights, AttentionPath path, const VarlenRows* varlen = nullptr);
// Path automatic's choice of the three-stage path for wide heads on a CPU device (its rule is at
// its definition); nullopt for the fused path. `paged`: the layouts are a paged cache's views.
std::optional<UnfusedPlan> wide_heads_three_stage(const DeviceInfo& device, const AttentionLayouts& layouts,
                                                  const PagedKeys* paged = nullptr);

// The call's dispatches and barriers, appended to `list` (pipelines built on `context` as needed).
void emit_attention(ContextImpl& context, CommandList& list, const PathPlan& planned,
                    const AttentionLayouts& layouts, const AttentionSlots& slots = {});
void emit_fused_attention(ContextImpl& context, CommandList& list, const FusedPlan& plan,
                          const AttentionLayouts& layouts, const AttentionSlots& slots);
// A paged call (plan_paged): the append of k_new and v_new into the caches first when the layouts
// give them (seq_new > 0), a barrier, then the cascade's passes, the fused dispatches or the
// three-stage path's.
void emit_paged_attention(ContextImpl& context, CommandList& list, const PathPlan& planned,
                          const AttentionLayouts& layouts, const std::optional<TensorLayout>& k_new,
                          const std::optional<TensorLayout>& v_new, const AttentionSlots& slots = {});
// A cascade's passes and merge (after the append), paged_cascade.cpp.
void emit_cascade(ContextImpl& context, CommandList& list, const CascadePlan& plan, const AttentionLayouts& layouts,
                  const AttentionSlots& slots);

// The barriers vkattn's synchronous calls put around recorded attention: prior host/transfer/shader
// writes before the kernels read, and the kernels' writes before host or transfer reads.
void barrier_before_attention(VkCommandBuffer cmd);
void barrier_after_attention(VkCommandBuffer cmd);

}  // namespace vkattn::detail
