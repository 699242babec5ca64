// Step plan_workspace (plan_steps.hpp): how many splits one dispatch covers, and where the workspace
// holds, each region aligned, the split-KV partials (O, then LSE), the work list, and the careful
// pass's ballots (one uvec4 per workgroup of the largest dispatch, shader_abi.h) after everything else.
#include <algorithm>
#include <string>
#include <utility>

#include "int_math.hpp"
#include "plan_steps.hpp"
#include "shader_abi.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// Rows per (batch, head) of the largest (first) range of the chunk: the last may hold fewer.
// (A packed batch's: every packed row of every head, batch 1.)
uint64_t chunk_range_rows(const PlanInputs& in, const FusedPlan& plan) {
  const AttentionProblem& p = in.problem;
  const uint64_t range_rows = std::min<uint64_t>(uint64_t(plan.tiles_per_range) * plan.config.rows, uint64_t(p.seq_q));
  return in.varlen ? uint64_t(p.heads) * uint64_t(p.seq_q)
                   : uint64_t(plan.batch_chunk) * uint64_t(plan.head_chunk) * range_rows;
}

// The workspace's bytes when `used` bytes precede the ballots.
uint64_t workspace_for(uint64_t used, uint64_t redo_bytes, uint64_t alignment) {
  if (redo_bytes == 0) return used ? used + alignment : 0;
  return align_up(used, alignment) + redo_bytes + alignment;
}

// The splits of a paged call, a packed batch, or a dense call with key lengths (and no mask: the
// list takes the mask's binding), follow each sequence's own keys (WorkListPlan), where one dispatch
// per range covers them and the items fit the list's (sequence << 16 | split) words and the grid;
// and only within the workspace bound (the list is 4 bytes a slot, a partial row at least 12).
// Sets `ws.work_list` and grows the workspace where it applies; `used`: the bytes before it.
void place_work_list(const PlanInputs& in, const FusedPlan& plan, const SplitRules& rules,
                     const WorkspaceBudget& budget, WorkspaceLayout& ws, uint64_t& used) {
  const uint64_t max_z = in.device.max_workgroup_count[2];
  const uint64_t max_items = uint64_t(plan.batch_chunk) * plan.splits;
  if (!(in.own_lengths() && !plan.band_splits && ws.splits_per_dispatch == plan.splits && plan.splits < 65536 &&
        plan.batch_chunk < 65536 && max_items <= max_z))
    return;
  const KernelConfig& c = plan.config;
  WorkListPlan w;
  w.max_items = uint32_t(max_items);
  // Items of at least the rules' least keys, and at most the planned keys per split (lavapipe's loop
  // limit, the paged cap).
  w.min_keys = uint32_t(std::min<uint64_t>(align_up(rules.work_list_min_keys, c.keys_per_tile), plan.keys_per_split));
  const uint64_t workgroups_per_item =
      uint64_t(plan.tiles_per_range) * uint64_t(plan.head_chunk / c.heads_per_workgroup(in.group()));
  w.target_items = uint32_t(std::clamp<uint64_t>(ceil_div(rules.target_workgroups, workgroups_per_item), 1,
                                                 max_items - uint64_t(plan.batch_chunk)));
  w.offset = align_up(used, plan.alignment);
  w.words = WORK_LIST_ITEMS + max_items + uint64_t(plan.batch_chunk) + 1;
  const uint64_t with_list = workspace_for(w.offset + w.words * 4, ws.redo_bytes, plan.alignment);
  if (with_list > budget.budget) return;
  used = w.offset + w.words * 4;
  ws.workspace_bytes = with_list;
  ws.work_list = w;
}

// The split partials, the work list and the combine's grid (split calls only).
void place_partials(const PlanInputs& in, const FusedPlan& plan, const SplitRules& rules,
                    const WorkspaceBudget& budget, WorkspaceLayout& ws, uint64_t& used) {
  const DeviceInfo& device = in.device;
  for (auto [name, bytes] : {std::pair{"partial O", ws.partial_o_bytes}, std::pair{"partial LSE", ws.partial_lse_bytes}})
    if (bytes > device.max_storage_buffer_range || bytes / 4 > kMaxIndex)
      throw unsupported(std::string("workspace: split-KV ") + name + " of one query tile of one GQA group (" +
                        str(plan.splits) + " splits) needs " + str(bytes) +
                        " bytes, more than one binding can hold on " + device.name + " (" +
                        str(device.max_storage_buffer_range) + ")");
  place_work_list(in, plan, rules, budget, ws, used);
  const uint64_t rows = chunk_range_rows(in, plan);
  if (ceil_div(rows, device.max_workgroup_count[0]) > device.max_workgroup_count[1])
    throw unsupported("grid: " + str(rows) + " rows exceed what the combine dispatch can cover on " + device.name);
}

}  // namespace

WorkspaceLayout plan_workspace(const PlanInputs& in, const FusedPlan& plan, const KeyTiles& keys, bool key_ranges,
                               const SplitRules& rules, const WorkspaceBudget& budget) {
  const AttentionProblem& p = in.problem;
  const KernelConfig& c = plan.config;
  const uint64_t max_range = in.device.max_storage_buffer_range;
  WorkspaceLayout ws;
  const uint64_t rows = chunk_range_rows(in, plan);
  ws.partial_o_bytes = plan.splits > 1 ? plan.splits * rows * uint64_t(p.dim_v) * 4 : 0;
  ws.partial_lse_bytes = plan.splits > 1 ? plan.splits * rows * 8 : 0;  // (max, sum) per row

  // Splits per dispatch: those whose keys one binding holds, and as many as the grid's z dimension
  // (batches x splits) allows; the rest go to further dispatches (split_base in the shaders).
  ws.splits_per_dispatch = plan.splits;
  if (key_ranges) ws.splits_per_dispatch = uint32_t(std::min<uint64_t>(plan.splits, keys.keys_per_binding / plan.keys_per_split));
  ws.splits_per_dispatch =
      uint32_t(std::min<uint64_t>(ws.splits_per_dispatch, in.device.max_workgroup_count[2] / uint64_t(plan.batch_chunk)));
  // The careful pass's ballots: one uvec4 per workgroup of the largest dispatch.
  ws.redo_bytes = c.careful_pass() ? uint64_t(plan.tiles_per_range) *
                                         uint64_t(plan.head_chunk / c.heads_per_workgroup(in.group())) *
                                         (in.varlen ? uint64_t(in.varlen->batch) : uint64_t(plan.batch_chunk)) *
                                         ws.splits_per_dispatch * 16
                                   : 0;
  // `used`: the bytes before the ballots.
  uint64_t used = plan.splits > 1 ? align_up(ws.partial_o_bytes, plan.alignment) + ws.partial_lse_bytes : 0;
  ws.workspace_bytes = workspace_for(used, ws.redo_bytes, plan.alignment);
  if (plan.splits > 1) place_partials(in, plan, rules, budget, ws, used);
  if (ws.redo_bytes > 0) {
    if (ws.redo_bytes > max_range)
      throw unsupported("workspace: the careful pass's " + str(ws.redo_bytes / 16) + " workgroups need " +
                        str(ws.redo_bytes) + " bytes, more than one binding can hold on " + in.device.name + " (" +
                        str(max_range) + ")");
    ws.redo_offset = align_up(used, plan.alignment);
  } else {
    ws.redo_bytes = 0;
  }
  return ws;
}

}  // namespace vkattn::detail
