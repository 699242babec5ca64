// plan_fused: the fused planner as a composition of its steps (plan_steps.hpp), and the call checks
// that need no buffer.
#include "attention_plan.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "plan_steps.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {

AttentionProblem check_attention_layouts(const DeviceInfo& device, const AttentionLayouts& layouts) {
  const AttentionProblem p = check_attention(layouts);
  if (p.dtype != DType::f32 && !device.storage_16bit)
    throw unsupported(std::string("dtype: ") + to_string(p.dtype) + " needs storageBuffer16BitAccess, which " +
                      device.name + " does not offer (or it was not enabled on the adopted device)");
  // The kernels compute a row's diagonal i + seq_k - seq_q, and the window's reach, in 32-bit ints.
  for (uint64_t s : {static_cast<uint64_t>(p.seq_q), static_cast<uint64_t>(p.seq_k)})
    if (s > kMaxSequence) throw Error("seq: " + std::to_string(s) + " exceeds the kernels' limit of 2^31 - 1");
  return p;
}

PlanInputs plan_inputs(const DeviceInfo& device, const AttentionLayouts& layouts, const AttentionProblem& problem,
                       const PagedKeys* paged, const VarlenRows* varlen) {
  PlanInputs in{device, layouts, problem, problem, paged, varlen};
  if (varlen) {
    in.shape.batch = varlen->batch;
    in.shape.seq_q = varlen->max_seq_q;
    in.shape.seq_k = varlen->max_seq_k;
  }
  return in;
}

FusedPlan plan_fused(const DeviceInfo& device, KernelVariant variant, const AttentionLayouts& layouts,
                      bool packing_allowed, const PagedKeys* paged, const VarlenRows* varlen) {
  FusedPlan plan;
  plan.problem = check_attention_layouts(device, layouts);
  if (paged) plan.paged = *paged;
  if (varlen) plan.varlen = *varlen;
  const PlanInputs in = plan_inputs(device, layouts, plan.problem, paged, varlen);

  const ChunkPlan chunks = plan_chunks(in);
  plan.alignment = chunks.alignment;
  plan.batch_chunk = chunks.batch_chunk;
  plan.head_chunk = chunks.head_chunk;
  // The combine's workgroup (a power of two): on a GPU enough invocations to share a row's hundreds
  // of splits (attention_combine.comp); on a CPU device 64.
  plan.combine_workgroup =
      device.is_cpu() ? 64u : std::bit_floor(std::min<uint32_t>(256u, device.max_workgroup_invocations));

  const KernelChoice kernel = choose_kernel(in, variant, packing_allowed);
  plan.config = kernel.config;
  plan.query_tiles = query_tiles(in, plan.config);

  const KeyTiles keys = plan_key_tiles(in, plan.config, chunks.key_ranges, plan.alignment);
  plan.band_splits = keys.band_splits;
  const SplitRules rules = split_rules(in, plan.config, keys);
  const WorkspaceBudget budget = workspace_budget(in, plan.config, plan.alignment);
  const FittedChunk fitted =
      fit_chunk_to_workspace(in, plan.config, rules, budget, plan.query_tiles, plan.batch_chunk, plan.head_chunk);
  plan.batch_chunk = fitted.batch_chunk;
  plan.head_chunk = fitted.head_chunk;
  plan.splits = fitted.splits.splits;
  plan.keys_per_split = fitted.splits.keys_per_split;
  // An unsplit decode form writes O in chunks too; split, it writes the partials (whole chunks in the
  // workspace) and the combine writes O.
  if (plan.config.is(FusedKernel::subgroup_decode) && plan.splits == 1 && !kernel.out_chunked)
    plan.config.vec_loads = false;

  const QueryRanges ranges = plan_query_ranges(in, plan, rules, budget);
  plan.tiles_per_range = ranges.tiles_per_range;
  plan.query_ranges = ranges.query_ranges;
  // Packed tiles (the subgroup kernel's GQA rows, the tiled kernel's heads) are not query-row tiles:
  // their partials (partial_row) and the combine assume one range. Past that (a huge split count),
  // plan without packing.
  if (plan.config.heads_per_workgroup(in.group()) > 1 && plan.query_ranges > 1)
    return plan_fused(device, variant, layouts, false, paged, varlen);

  const WorkspaceLayout ws = plan_workspace(in, plan, keys, chunks.key_ranges, rules, budget);
  plan.splits_per_dispatch = ws.splits_per_dispatch;
  plan.partial_o_bytes = ws.partial_o_bytes;
  plan.partial_lse_bytes = ws.partial_lse_bytes;
  plan.workspace_bytes = ws.workspace_bytes;
  plan.redo_offset = ws.redo_offset;
  plan.redo_bytes = ws.redo_bytes;
  plan.work_list = ws.work_list;
  return plan;
}

}  // namespace vkattn::detail
