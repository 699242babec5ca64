// A call of any KvSource (vkattn/attention_spec.hpp) planned: the source's checks and plan, the dense
// view of its tensors that the kernels run on, and how a run's buffers are checked and bound to the
// command list's slots. PreparedAttention is this and its command list.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <optional>

#include "attention_record.hpp"
#include "varlen_plan.hpp"
#include "vkattn/attention_spec.hpp"

namespace vkattn::detail {

struct PlannedCall {
  enum class Source { dense, paged, packed };
  Source source = Source::dense;
  PathPlan planned;  // the path and its plan (a paged call's is the fused one)
  // The layouts the kernels run on: a dense call's own, a paged call's caches as (batch, kv_heads,
  // capacity, dim) of batch stride 0 (plan_paged), a packed call's batch-1 tensors (plan_varlen).
  AttentionLayouts dense;
  CallNeeds needs;  // dense: what its buffers must hold (call_buffers.hpp)
  // The source's own layouts and checked problem.
  std::optional<PagedAttentionLayouts> paged_layouts;
  PagedProblem paged;
  std::optional<VarlenAttentionLayouts> packed_layouts;
  VarlenProblem packed;
};

// The layouts the call was planned with, which a plan made for another device is checked against
// here (plan_fit.hpp): `dense`, a packed call's with its ALiBi slopes as planned (varlen_planning_layouts).
AttentionLayouts planning_layouts(const PlannedCall& call);

// Throws Error (unsupported) when `options` ask for dropout (p > 0): for the multi-head layer, which
// does not apply it yet (attention calls do: dropout_output.hpp).
void refuse_forward_dropout(const AttentionOptions& options);

// Checks `spec` and plans it on `device` (throws Error as the source's checks do); needs no buffer.
PlannedCall plan_call(const DeviceInfo& device, KernelVariant variant, const AttentionSpec& spec);

// The call's dispatches and barriers (a paged call's append first), appended to `list`.
void emit_call(ContextImpl& context, CommandList& list, const PlannedCall& call);

// Throws Error naming the argument unless the buffers are given as the spec says (and none that its
// source does not take), valid, of `context`, large enough, and no output shares a byte with another
// argument. `workspace` null: the Context's scratch. A few comparisons per buffer: it runs on every
// record.
void check_call(const ContextImpl& context, const PlannedCall& call, const AttentionBuffers& buffers,
                const BufferSlice* workspace);

// The command list's slots (attention_record.hpp) filled from one run's buffers: a paged call's cache
// lengths and a packed call's cu_seqlens_k where the key lengths are, its block table or cu_seqlens_q
// where the block table is; the workspace (its buffer, first byte and texel view) aligned up to the
// list's alignment.
std::array<SlotBase, kPagedSlotCount> slots_of(const PlannedCall& call, const AttentionBuffers& buffers, const SlotBase& workspace);

// The source-specific buffer checks (paged_attention.cpp, varlen_attention.cpp).
void check_paged_buffers(const ContextImpl& context, const PlannedCall& call, const AttentionBuffers& buffers,
                         const BufferSlice* workspace);
void check_packed_buffers(const ContextImpl& context, const PlannedCall& call, const AttentionBuffers& buffers,
                          const BufferSlice* workspace);

}  // namespace vkattn::detail
