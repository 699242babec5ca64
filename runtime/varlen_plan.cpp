// Planning a packed variable-length call (vkattn/varlen.hpp): the packed tensors are one dense
// batch-1 problem of total_q queries and total_k keys.
//   - The fused kernels confine each workgroup to one sequence (SPEC_ATTENTION_VARLEN: the grid's z
//     is the sequence, its rows come from cu_seqlens on the device), and the dense planner chooses
//     the kernel, tiles and splits for `batch` sequences of the longest lengths the host gives
//     (max_seqlen_q, max_seqlen_k).
//   - The three-stage path computes every packed row's scores against every packed key, and its row
//     softmax confines each row to its sequence's keys (FLAG_VARLEN); P·V skips the zero weights.
#include "varlen_plan.hpp"

#include <algorithm>
#include <string>

#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

AttentionLayouts varlen_planning_layouts(const AttentionLayouts& dense) {
  AttentionLayouts d = dense;
  if (d.alibi) d.alibi = HeadValuesLayout{1, d.alibi->heads, d.alibi->offset};
  return d;
}

VarlenCall plan_varlen(const DeviceInfo& device, KernelVariant variant, const VarlenAttentionLayouts& layouts) {
  VarlenCall call;
  call.problem = check_varlen_attention(layouts);
  const VarlenProblem& vp = call.problem;

  AttentionLayouts& d = call.dense;
  d.q = layouts.q;
  d.k = layouts.k;
  d.v = layouts.v;
  d.out = layouts.out;
  d.has_lse = layouts.has_lse;
  d.options = layouts.options;
  d.per_head() = layouts.per_head();
  d.kv_quant = layouts.kv_quant;

  // The offsets are bound whole (batch + 1 values each).
  const uint64_t alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  if (uint64_t(vp.batch + 1) * 4 + alignment > device.max_storage_buffer_range)
    throw unsupported("binding: cu_seqlens of " + str(uint64_t(vp.batch + 1)) + " values exceed maxStorageBufferRange (" +
                      str(device.max_storage_buffer_range) + " bytes) of " + device.name);
  const VarlenRows rows{vp.batch, vp.max_seq_q, vp.max_seq_k};
  call.planned = plan_path(device, variant, varlen_planning_layouts(d), layouts.weights, layouts.path, &rows);
  AttentionProblem& planned = call.planned.fused ? call.planned.fused->problem : call.planned.unfused->problem;
  planned.alibi_per_batch = vp.attention.alibi_per_batch;
  return call;
}

}  // namespace vkattn::detail
