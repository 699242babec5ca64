// The fused planner's steps (plan_fused composes them, attention_plan.cpp). Each is a pure function of
// the call (PlanInputs) and what the steps before it decided, with its decision as a struct of named
// fields, so that each can be tested on any device's limits without the device
// (tests/unit_plan_steps.cpp). In order:
//   plan_chunks          (plan_chunks.cpp)    batches x heads per dispatch: bindings and the grid's y, z
//   choose_kernel        (plan_kernel.cpp)    the kernel (fused_kernels.hpp) and its tiles
//   plan_key_tiles       (plan_splits.cpp)    the key tiles a workgroup visits, the most one split takes
//   split_rules, split_keys                   how many splits, of how many keys
//   fit_chunk_to_workspace (plan_ranges.cpp)  fewer batches / heads per chunk when one tile's partials
//                                             exceed the workspace
//   plan_query_ranges                         query tiles per range: the workspace budget, the grid's x
//   plan_workspace       (plan_workspace.cpp) partials, work list and ballots laid out in the workspace
#pragma once

#include <cstdint>
#include <optional>

#include "attention_plan.hpp"

namespace vkattn::detail {

// What every step reads: the call and the device.
struct PlanInputs {
  const DeviceInfo& device;
  const AttentionLayouts& layouts;
  const AttentionProblem& problem;  // checked (a packed batch's: batch 1, seq_q and seq_k the totals)
  // The problem the kernel, tiles and splits are chosen for: `problem`, or for a packed batch its
  // sequences as a dense batch of the longest lengths (every workgroup does at most that work).
  AttentionProblem shape;
  const PagedKeys* paged = nullptr;
  const VarlenRows* varlen = nullptr;

  int64_t group() const { return problem.group_size(); }
  // Calls whose sequences have their own key counts, known only on the device (a work list follows
  // them when the call splits: plan_workspace). (A dense call's key lengths without a mask: the list
  // takes the mask's binding.)
  bool own_lengths() const { return paged || varlen || (layouts.has_kv_lengths && !layouts.mask); }
};
PlanInputs plan_inputs(const DeviceInfo& device, const AttentionLayouts& layouts, const AttentionProblem& problem,
                       const PagedKeys* paged, const VarlenRows* varlen);

// plan_chunks: which batches and query heads one dispatch covers.
struct ChunkPlan {
  uint64_t alignment = 16;  // storage-buffer offset alignment used for every binding
  int64_t batch_chunk = 0, head_chunk = 0;
  // One KV head alone is larger than a binding: one GQA group per chunk, K and V bound by key range
  // (one range of splits per dispatch).
  bool key_ranges = false;
};
ChunkPlan plan_chunks(const PlanInputs& in);

// choose_kernel: the kernel and its tiles for the call's shape.
struct KernelChoice {
  KernelConfig config;
  // O's rows are whole 16-byte chunks (the decode form writes them so when the call is not split).
  bool out_chunked = false;
};
KernelChoice choose_kernel(const PlanInputs& in, KernelVariant variant, bool packing_allowed);
// Query tiles of `config` over the shape's query rows (packed: the group's heads x seq_q rows).
uint32_t query_tiles(const PlanInputs& in, const KernelConfig& config);

// plan_key_tiles: the key range one workgroup visits, in key tiles, and the most one split may take.
struct KeyTiles {
  uint64_t tiles = 0;  // key tiles a workgroup visits: its window's band, or every key
  // Splits count from each workgroup's first key in a two-sided window (MOD_BAND_SPLITS), not key 0.
  bool band_splits = false;
  uint64_t max_tiles = 0;  // per split: lavapipe's loop limit, one binding's keys (key ranges)
  uint64_t keys_per_binding = UINT64_MAX;  // keys of one KV head one binding holds (key ranges only)
};
KeyTiles plan_key_tiles(const PlanInputs& in, const KernelConfig& config, bool key_ranges, uint64_t alignment);

// split_rules: what bounds the split count, from the device, the kernel's row (fused_kernels.hpp) and
// the call; split_keys applies them to a chunk of `base_workgroups` (batch, head, query-tile)
// workgroups. A bound of 0 is none.
struct SplitRules {
  uint64_t tiles = 0, max_tiles = 0;  // KeyTiles'
  uint32_t keys_per_tile = 0;
  uint32_t requested = 0;             // AttentionOptions::num_splits (0: automatic)
  uint64_t target_workgroups = 0;     // wanted in flight before splitting for parallelism
  uint64_t min_parallel_keys = 0;     // splits for parallelism keep at least this many keys
  uint64_t max_keys_below_target = 0; // below the target: at most this many keys per split
  uint64_t max_keys = 0;              // always at most this many keys per split
  uint64_t min_splits = 0;            // always at least this many splits
  uint64_t work_list_min_keys = 0;    // a work list's least keys per item (WorkListPlan::min_keys)
};
SplitRules split_rules(const PlanInputs& in, const KernelConfig& config, const KeyTiles& keys);
struct KeySplits {
  uint32_t splits = 1;
  uint32_t keys_per_split = 0;
};
KeySplits split_keys(const SplitRules& rules, uint64_t base_workgroups);

// The workspace budget of one range of query tiles: min(fused_workspace_budget, one binding), less
// the alignments the layout sets aside (`usable`).
struct WorkspaceBudget {
  uint64_t budget = 0, usable = 0;
};
WorkspaceBudget workspace_budget(const PlanInputs& in, const KernelConfig& config, uint64_t alignment);
// Bytes of split-KV partials (and the careful pass's ballots) that one query tile of a chunk needs.
uint64_t tile_workspace_bytes(const PlanInputs& in, const KernelConfig& config, uint32_t splits, int64_t batch_chunk,
                              int64_t head_chunk);

// fit_chunk_to_workspace: the chunk (fewer batches, then fewer GQA groups) and its splits.
struct FittedChunk {
  int64_t batch_chunk = 0, head_chunk = 0;
  KeySplits splits;
};
FittedChunk fit_chunk_to_workspace(const PlanInputs& in, const KernelConfig& config, const SplitRules& rules,
                                   const WorkspaceBudget& budget, uint32_t query_tiles, int64_t batch_chunk,
                                   int64_t head_chunk);

// plan_query_ranges: query tiles per range of the plan so far (chunks, kernel, splits set).
struct QueryRanges {
  uint32_t tiles_per_range = 0, query_ranges = 1;
};
QueryRanges plan_query_ranges(const PlanInputs& in, const FusedPlan& plan, const SplitRules& rules,
                              const WorkspaceBudget& budget);

// plan_workspace: the dispatches' split ranges and the workspace's regions, of the plan so far
// (chunks, kernel, splits and ranges set).
struct WorkspaceLayout {
  uint32_t splits_per_dispatch = 1;
  uint64_t partial_o_bytes = 0, partial_lse_bytes = 0, workspace_bytes = 0;
  uint64_t redo_offset = 0, redo_bytes = 0;
  std::optional<WorkListPlan> work_list;
};
WorkspaceLayout plan_workspace(const PlanInputs& in, const FusedPlan& plan, const KeyTiles& keys, bool key_ranges,
                               const SplitRules& rules, const WorkspaceBudget& budget);

}  // namespace vkattn::detail
