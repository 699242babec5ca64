// How a backward call runs (vkattn/attention_backward.hpp), planned once from its spec and the device:
// the forward call's checks and dense view, the splits that bound each invocation's loop iterations
// (lavapipe's limit), and where the workspace keeps D and the splits' partials. A pure function of the
// spec and the device description, like the forward's planner.
#pragma once

#include <cstdint>
#include <optional>

#include "backward_three_stage.hpp"
#include "backward_tiles.hpp"
#include "planned_call.hpp"
#include "vkattn/attention_backward.hpp"

namespace vkattn::detail {

struct BackwardCallPlan {
  PlannedCall forward;  // the forward's checks and the layouts the kernels run on (a packed batch's batch-1 view)
  AttentionProblem p;   // the problem of those layouts
  bool varlen = false;
  uint32_t batches = 0;            // the grid's z per split: batch elements, or a packed batch's sequences
  uint32_t rows_total = 0;         // query rows per (batch, head) the grid covers: seq_q or max_seqlen_q
  uint32_t keys_total = 0;         // keys likewise: seq_k or max_seqlen_k
  uint32_t split_rows = 0, split_keys = 0;  // the dK/dV kernel's query rows per split, the dQ kernel's keys
  uint32_t query_splits = 1, key_splits = 1;
  uint32_t workgroup = 64;  // the rows kernel's and the reduce's; the portable kv and q kernels'
  // The dK/dV and dQ kernels: the portable ones (a key or a query row per invocation, any device), on
  // CPU devices their subgroup forms (one subgroup of `lanes`, `rows_per_lane` keys or rows per lane),
  // on GPUs their tiled forms (`tiles`: blocks of keys and query rows in shared memory).
  bool subgroup_form = false;
  uint32_t lanes = 0, rows_per_lane = 1;
  std::optional<BackwardTiles> tiles;
  uint32_t kv_tile() const { return tiles ? tiles->keys : subgroup_form ? lanes * rows_per_lane : workgroup; }  // keys per workgroup
  uint32_t q_tile() const { return tiles ? tiles->rows : subgroup_form ? lanes * rows_per_lane : workgroup; }   // query rows per workgroup
  // The three-stage form (backward_three_stage.hpp) for a call that asked for the weights or the
  // unfused path, instead of the kernels above; its row splits are query_splits.
  std::optional<ThreeStageBackward> three_stage;
  uint32_t dropout_threshold = 0;  // vkattn/dropout.hpp; 0: none
  uint64_t seed = 0;
  uint32_t dropout_offset = 0;
  // The workspace, from its aligned start: D (f32 per query row), the three-stage form's S and dP
  // blocks of one chunk, then the partials of dK, dV and dQ (only where their kernel has splits), each
  // region aligned.
  uint64_t alignment = 16;
  uint64_t rows_offset = 0, scores_offset = 0, dp_offset = 0, dk_parts_offset = 0, dv_parts_offset = 0, dq_parts_offset = 0;
  uint64_t workspace_bytes = 0;
  BackwardPlan report;
};

// Checks `spec` for the backward pass (throws Error naming the argument: a paged or q8_0 source, no
// LSE, a grid or binding the device cannot take) and plans it on `device`: the three-stage form where
// its forward runs on the three-stage path (the weights with path automatic, path unfused, or head
// dims past the fused kernels'); else the fused kernels.
BackwardCallPlan plan_backward(const DeviceInfo& device, KernelVariant variant, const AttentionSpec& spec);

}  // namespace vkattn::detail
