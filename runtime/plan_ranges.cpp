// Steps fit_chunk_to_workspace and plan_query_ranges (plan_steps.hpp): split-KV partials grow with
// seq_q x splits (that is, seq_q x seq_k), so the split dispatches and the combine run one range of
// query tiles at a time, reusing one workspace sized for one range; a chunk whose single query tile
// alone exceeds that budget is cut to fewer batches and heads first.
#include <algorithm>
#include <string>

#include "int_math.hpp"
#include "plan_steps.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// A fused call's split-KV workspace is at most its output's size in f32 divided by this (below
// fused_workspace_budget), so the fused path's memory stays linear in the sequence lengths...
constexpr uint64_t kOutputPerWorkspace = 4;
// ...unless that would leave a range of query tiles fewer than this many times the target workgroups.
constexpr uint64_t kRangeWorkgroupsPerTarget = 4;

}  // namespace

WorkspaceBudget workspace_budget(const PlanInputs& in, const KernelConfig& c, uint64_t alignment) {
  WorkspaceBudget b;
  b.budget = std::min<uint64_t>(fused_workspace_budget, in.device.max_storage_buffer_range);
  // The workspace is align_up(partial O) + partial LSE + one alignment (record_chunk's base), so two
  // alignments are set aside; a third for the careful pass's ballots, which start aligned after the rest.
  const uint64_t reserved = (c.careful_pass() ? 3 : 2) * alignment;
  b.usable = b.budget > reserved ? b.budget - reserved : 0;
  return b;
}

uint64_t tile_workspace_bytes(const PlanInputs& in, const KernelConfig& c, uint32_t splits, int64_t batch_chunk,
                              int64_t head_chunk) {
  // (With the careful pass, its ballots too: 16 bytes a workgroup, shader_abi.h.)
  const uint64_t workgroups = uint64_t(splits) * uint64_t(batch_chunk) * uint64_t(head_chunk / c.heads_per_workgroup(in.group()));
  return (splits > 1 ? workgroups * c.rows * (uint64_t(in.problem.dim_v) + 2) * 4 : 0) +
         (c.careful_pass() ? workgroups * 16 : 0);
}

// The splits count from all query tiles of a chunk, not one range's: ranges are cut only when the
// partials of all tiles exceed the workspace budget, and then one range's split dispatches still
// hold about budget / (BR * (dim_v + 2) * 4) >= 1000 workgroups (BR <= 32, dim_v <= 256), far
// above the target.
// One query tile of the chunk over budget (many heads, a long key range): fewer batches, then fewer
// whole GQA groups per chunk, down to one query tile of one group, which runs even when it alone
// exceeds the budget (plan_workspace's binding checks still apply).
// (A packed batch keeps its one chunk: its partials are sized by its rows, plan_workspace.)
FittedChunk fit_chunk_to_workspace(const PlanInputs& in, const KernelConfig& c, const SplitRules& rules,
                                   const WorkspaceBudget& budget, uint32_t query_tiles, int64_t batch_chunk,
                                   int64_t head_chunk) {
  const int64_t group = in.group();
  FittedChunk f{batch_chunk, head_chunk, {}};
  const auto split = [&] {
    const uint64_t base_workgroups =
        uint64_t(query_tiles) * uint64_t(f.head_chunk / c.heads_per_workgroup(group)) * uint64_t(f.batch_chunk);
    f.splits = split_keys(rules, base_workgroups);
  };
  const auto over_budget = [&] {
    return tile_workspace_bytes(in, c, f.splits.splits, f.batch_chunk, f.head_chunk) > budget.usable;
  };
  split();
  if (!in.varlen && over_budget() && f.batch_chunk > 1) {
    f.batch_chunk = 1;
    split();
  }
  while (!in.varlen && over_budget() && f.head_chunk > group) {
    f.head_chunk -= group;
    split();
  }
  return f;
}

// Query-tile ranges: a range is at most maxComputeWorkGroupCount[0] tiles (the grid's x dimension,
// split or not) and its partials fit the budget. Below the fixed budget a range's partials also stay
// proportional to the chunk's own output, so that the fused path's memory grows linearly with the
// sequence at every size, not only past 32 MiB: at most O's bytes in f32 / kOutputPerWorkspace, but
// never less than the partials of kRangeWorkgroupsPerTarget x the device's target workgroups (each
// with all its splits), so a range still keeps the device as busy as the unsplit problem wants.
QueryRanges plan_query_ranges(const PlanInputs& in, const FusedPlan& plan, const SplitRules& rules,
                              const WorkspaceBudget& budget) {
  const AttentionProblem& p = in.problem;
  const KernelConfig& c = plan.config;
  const uint64_t max_x = in.device.max_workgroup_count[0];
  const uint64_t o_f32_bytes =
      uint64_t(plan.batch_chunk) * uint64_t(plan.head_chunk) * uint64_t(p.seq_q) * uint64_t(p.dim_v) * 4;
  const uint64_t busy_bytes = kRangeWorkgroupsPerTarget * rules.target_workgroups *
                              (c.rows * (uint64_t(p.dim_v) + 2) * 4 + (c.careful_pass() ? 16 : 0));
  // Packed tiles (seq_q below one tile) keep one range within the fixed budget: plan_fused replans
  // them unpacked past one range.
  const uint64_t range_budget = c.heads_per_workgroup(in.group()) > 1
                                    ? budget.usable
                                    : std::min(budget.usable, std::max(busy_bytes, o_f32_bytes / kOutputPerWorkspace));
  const uint64_t tile_bytes = tile_workspace_bytes(in, c, plan.splits, plan.batch_chunk, plan.head_chunk);
  uint64_t tiles_per_range = std::min<uint64_t>(plan.query_tiles, max_x);
  if (tile_bytes > 0 && !in.varlen) tiles_per_range = std::min(tiles_per_range, std::max<uint64_t>(1, range_budget / tile_bytes));
  // A packed batch's partials are indexed by packed row, which one range of query tiles (of every
  // sequence) covers only whole: one range, its workspace linear in total_q x splits.
  if (in.varlen && tiles_per_range < plan.query_tiles)
    throw unsupported("grid: " + str(plan.query_tiles) + " query tiles of max_seqlen_q " + str(uint64_t(in.shape.seq_q)) +
                      " exceed maxComputeWorkGroupCount[0] (" + str(max_x) + ") of " + in.device.name);
  QueryRanges r;
  r.tiles_per_range = static_cast<uint32_t>(tiles_per_range);
  r.query_ranges = static_cast<uint32_t>(ceil_div(plan.query_tiles, tiles_per_range));
  return r;
}

}  // namespace vkattn::detail
