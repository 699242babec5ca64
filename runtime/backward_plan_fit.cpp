#include "backward_plan_fit.hpp"

#include <algorithm>
#include <string>

#include "attention_plan.hpp"
#include "fused_kernels.hpp"
#include "int_math.hpp"
#include "llvmpipe_limits.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// The dsinks pass sums D over every sequence's row blocks. (Without sinks the rows kernel loops over
// the dims only.)
void check_sinks_walk(const BackwardCallPlan& plan) {
  const uint64_t sinks_walk = uint64_t(plan.batches) * (ceil_div(plan.rows_total, plan.workgroup) + 1);
  if (plan.p.per_head.sinks && sinks_walk > kLlvmpipeLoopBudget)
    throw Error("the dsinks pass would loop about " + str(sinks_walk) + " times (" + str(plan.batches) +
                " sequences of up to " + str(plan.rows_total) + " query rows), beyond lavapipe's loop limit (" +
                str(kLlvmpipeLoopBudget) + " planned)");
}

// The loop iterations of the backward's longest walks, counted as plan_backward counts them when it
// splits them for lavapipe: the dK/dV kernel walks its split's query rows for each query head of its
// group, the dQ kernel its split's keys; the three-stage form's GEMMs and scores kernel are checked
// with its chunks (backward_three_stage.hpp).
void check_loops(const BackwardCallPlan& plan, const DeviceInfo& device) {
  if (plan.three_stage) {
    check_sinks_walk(plan);
    return;
  }
  if (plan.tiles) {
    // The tiled form loops per block of rows (keys) and around its blocks (backward_tiles.hpp).
    const BackwardTiles& t = *plan.tiles;
    const BackwardTileIterations it = backward_tile_iterations(t, uint32_t(plan.p.dim_qk), uint32_t(plan.p.dim_v));
    const uint64_t group = uint64_t(plan.p.group_size());
    const uint64_t kv_loops = it.kv_fixed + 2 * group + group * ceil_div(uint64_t(plan.split_rows), t.rows) * it.kv_per_block;
    const uint64_t q_loops = it.q_fixed + ceil_div(uint64_t(plan.split_keys), t.keys) * it.q_per_block;
    if (std::max(kv_loops, q_loops) > kLlvmpipeLoopBudget)
      throw Error("the tiled kernels' invocations would loop about " + str(std::max(kv_loops, q_loops)) + " times (" +
                  str(plan.split_rows) + " query rows of " + str(group) + " heads, " + str(plan.split_keys) +
                  " keys a split), beyond lavapipe's loop limit (" + str(kLlvmpipeLoopBudget) + " planned); the plan for " +
                  device.name + " splits only where it must");
  }
  const uint64_t kv_walk = uint64_t(plan.split_rows) * uint64_t(plan.p.group_size());
  if (!plan.tiles && kv_walk > kLlvmpipeLoopBudget)
    throw Error("the dK/dV kernel's invocations would loop about " + str(kv_walk) + " times (" + str(plan.split_rows) +
                " query rows of " + str(uint64_t(plan.p.group_size())) + " heads a split), beyond lavapipe's loop limit (" +
                str(kLlvmpipeLoopBudget) + " planned); the plan for " + device.name + " splits only where it must");
  if (!plan.tiles && plan.split_keys > kLlvmpipeLoopBudget)
    throw Error("the dQ kernel's invocations would loop about " + str(plan.split_keys) + " times (keys a split), beyond " +
                "lavapipe's loop limit (" + str(kLlvmpipeLoopBudget) + " planned)");
  check_sinks_walk(plan);
}

}  // namespace

void check_backward_plan_fits(const BackwardCallPlan& plan, const DeviceInfo& device) {
  // The layout rules that depend on the device (16-bit storage, the 32-bit index limit).
  check_attention_layouts(device, planning_layouts(plan.forward));
  if (plan.alignment % std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 1) != 0)
    throw Error("the plan aligns bindings to " + str(plan.alignment) + " bytes; " + device.name + " needs " +
                str(device.min_storage_buffer_offset_alignment));
  const uint32_t widest = plan.subgroup_form ? std::max(plan.workgroup, plan.lanes)
                         : plan.tiles          ? std::max(plan.workgroup, plan.tiles->workgroup)
                                               : plan.workgroup;
  if (widest > device.max_workgroup_invocations)
    throw Error("workgroups of " + str(widest) + " invocations exceed maxComputeWorkGroupInvocations (" +
                str(device.max_workgroup_invocations) + ") of " + device.name);
  // The subgroup form's workgroup is one subgroup of `lanes` (its shuffles span it): a device whose
  // subgroups may be another size, and that cannot require this one, would shuffle across subgroups.
  if (plan.subgroup_form && !runs_subgroup_lanes(device, plan.lanes))
    throw Error("the subgroup form's workgroups are one subgroup of " + str(plan.lanes) + " lanes; " + device.name +
                " runs subgroups of " + str(device.min_subgroup_size) + " to " + str(device.max_subgroup_size) + " lanes" +
                (device.subgroup_shuffle ? "" : " without shuffles"));
  // The rows kernel's workgroup sum (attention_backward_rows.comp: one float per invocation).
  const uint64_t shared = uint64_t(plan.workgroup) * 4;
  if (shared > device.max_shared_memory)
    throw Error("the rows kernel's " + str(shared) + " bytes of shared memory exceed maxComputeSharedMemorySize (" +
                str(device.max_shared_memory) + ") of " + device.name);
  // The tiled form's blocks of rows and keys (backward_tiles.hpp).
  if (plan.tiles && plan.tiles->shared_bytes > device.max_shared_memory)
    throw Error("the tiled kernels' " + str(plan.tiles->shared_bytes) + " bytes of shared memory exceed " +
                "maxComputeSharedMemorySize (" + str(device.max_shared_memory) + ") of " + device.name);
  if (plan.three_stage) check_three_stage_fits(*plan.three_stage, plan.p, device);
  if (device.is_llvmpipe) check_loops(plan, device);
}

}  // namespace vkattn::detail
