#include "plan_fit.hpp"

#include <string>

#include "llvmpipe_limits.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

void check_plan_fits(const PathPlan& planned, const AttentionLayouts& layouts, bool weights,
                     const DeviceInfo& device) {
  // The layout rules that depend on the device (16-bit storage, the 32-bit index limit).
  check_attention_layouts(device, layouts);
  if (planned.alignment() % std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 1) != 0)
    throw Error("the plan aligns bindings to " + str(planned.alignment()) + " bytes; " + device.name + " needs " +
                str(device.min_storage_buffer_offset_alignment));
  if (planned.fused) {
    const FusedPlan& lp = *planned.fused;
    const KernelConfig& c = lp.config;
    const AttentionProblem& p = lp.problem;
    if (c.workgroup_size() > device.max_workgroup_invocations)
      throw Error("workgroups of " + str(c.workgroup_size()) + " invocations exceed maxComputeWorkGroupInvocations (" +
                  str(device.max_workgroup_invocations) + ") of " + device.name);
    // The subgroup kernel's workgroup is one subgroup of `lanes`: a device whose subgroups may be
    // another size (and that cannot require this one) would run its shuffles across subgroups.
    if (c.one_subgroup() && !runs_subgroup_lanes(device, c.lanes))
      throw Error("the subgroup kernel's workgroups are one subgroup of " + str(c.lanes) + " lanes; " + device.name +
                  " runs subgroups of " + str(device.min_subgroup_size) + " to " + str(device.max_subgroup_size) + " lanes" +
                  (device.subgroup_shuffle ? "" : " without shuffles"));
    // The tiled kernel's row groups exchange values with subgroupShuffleXor among TPR lanes: TPR must
    // divide every subgroup size of this device.
    if (c.is(FusedKernel::tiled) && c.threads_per_row > 1 &&
        (!device.subgroup_shuffle || device.min_subgroup_size == 0 || device.min_subgroup_size % c.threads_per_row != 0))
      throw Error("row groups of " + str(c.threads_per_row) + " lanes need subgroup shuffles within subgroups of a multiple of " +
                  str(c.threads_per_row) + " lanes; " + device.name + " may run subgroups of " + str(device.min_subgroup_size));
    const uint64_t shared = fused_shared_bytes(c, p.dim_qk, p.dim_v);
    if (shared > device.max_shared_memory)
      throw Error("the kernel's " + str(shared) + " bytes of shared memory exceed maxComputeSharedMemorySize (" +
                  str(device.max_shared_memory) + ") of " + device.name);
    if (device.is_llvmpipe) {
      const uint64_t tiles = (uint64_t(lp.keys_per_split) + c.keys_per_tile - 1) / c.keys_per_tile;
      const uint64_t iterations = fused_loop_iterations(c, p.dim_qk, p.dim_v, tiles);
      if (iterations > kLlvmpipeLoopBudget)
        throw Error("an invocation would loop about " + str(iterations) + " times over " + str(lp.keys_per_split) +
                    " keys per split, beyond lavapipe's loop limit (" + str(kLlvmpipeLoopBudget) + " planned)");
    }
  } else {
    // The softmax's and the chunks' limits are those of a plan for this device; the GEMMs run the
    // kernel of the plan's device (its tiles, its loops), checked here with this device's limits.
    make_unfused_plan(device, layouts, weights);
    const UnfusedPlan& up = *planned.unfused;
    const AttentionProblem& p = up.problem;
    if (up.softmax_quads && !device.shader_int64)
      throw Error("the plan's softmax reads 64-bit words; " + device.name + " has no shaderInt64");
    if (up.chunks > 0) {
      // Each chunk's GEMMs put its heads on the grid's z (emit_gemm), whole batches per dispatch.
      if (uint64_t(up.head_chunk) > device.max_workgroup_count[2])
        throw Error("the plan's chunks of " + str(uint64_t(up.head_chunk)) + " heads exceed maxComputeWorkGroupCount[2] (" +
                    str(device.max_workgroup_count[2]) + ") of " + device.name);
      check_gemm_shape(device, up.gemm, "unfused path, scores", up.row_chunk, p.seq_k, p.dim_qk);
      check_gemm_shape(device, up.gemm, "unfused path, P·V", up.row_chunk, p.dim_v, p.seq_k);
    }
  }
}

}  // namespace vkattn::detail
