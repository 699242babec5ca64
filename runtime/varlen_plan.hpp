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
// Plans a varlen call (check_varlen_attention, the max lengths against the totals, then the path as
// plan_path chooses it, the fused one with the sizes of VarlenRows); throws Error.
VarlenCall plan_varlen(const DeviceInfo& device, KernelVariant variant, const VarlenAttentionLayouts& layouts);

}  // namespace vkattn::detail
