// A packed variable-length call (vkattn/varlen.hpp) planned: on the fused kernels, each workgroup
// confined to one sequence, or on the three-stage path when the weights are asked for.
#pragma once

#include "attention_record.hpp"
#include "vkattn/varlen_attention.hpp"

namespace vkattn::detail {

// Its checked problem, the dense view of its tensors the kernels run on (batch 1 packed tensors;
// ALiBi's slopes as given, (heads) or (batch, heads)) and the plan of the path chosen (the fused
// one's plan.varlen set, the three-stage one's varlen_batch).
struct VarlenCall {
  VarlenProblem problem;
  AttentionLayouts dense;
  PathPlan planned;
};
// The dense layouts a packed call is planned and checked with: `dense` with ALiBi's (batch, heads)
// slopes, whose batch is the packed batch's sequences and which the dense checks (batch 1) would
// refuse, as (heads); the kernels index the slopes given whole by sequence (alibi_per_batch).
AttentionLayouts varlen_planning_layouts(const AttentionLayouts& dense);

// Plans a varlen call (check_varlen_attention, the max lengths against the totals, then the path as
// plan_path chooses it, the fused one with the sizes of VarlenRows); throws Error.
VarlenCall plan_varlen(const DeviceInfo& device, KernelVariant variant, const VarlenAttentionLayouts& layouts);

}  // namespace vkattn::detail
