#include "fused_kernels.hpp"

#include <algorithm>

#include "int_math.hpp"
#include "shader_abi.hpp"

namespace vkattn::detail {
namespace {

// The tiled and rowwise kernels hold their shared memory to 32 KiB (or the device's less).
constexpr uint32_t kTileSharedBudget = 32768;
// Workgroups wanted in flight before splitting the key range for parallelism alone.
constexpr uint64_t kGpuTargetWorkgroups = 256;
// A GPU with fewer workgroups than its target (decode): at most this many keys per split, so that
// the longest sequence of a batch is not left to a few workgroups. Measured on an H100
// (the benchmark notebook (docs/performance.md), "First runs on a GPU"): batch 8 (32768 + 7 x 512 keys, GQA 32/8, d128,
// paged 16) 15.5 ms with the 4 splits the target alone gave, 10.0 ms with 32 (1024 keys a split);
// batch 1 x 32768 keys already had 32.
constexpr uint64_t kGpuKeysPerSplit = 1024;
// The same for the decode form on a GPU, whose workgroups are one subgroup each, and its most keys
// per split (the longest sequence of a batch spread over many workgroups); a short key range stays
// in splits of at least kGpuDecodeMinKeysPerSplit keys, enough to be worth the combine.
constexpr uint64_t kGpuDecodeTargetWorkgroups = 2048;
constexpr uint64_t kGpuDecodeKeysPerSplit = 256;
constexpr uint64_t kGpuDecodeMinKeysPerSplit = 32;
// The decode form on a CPU device, for sequences with their own key counts: at least this many splits,
// so that a work list cuts them by their keys even where the batch alone fills the target. Without
// one, the grid's z is the batch, and lavapipe's threads each take one contiguous run of it: one long
// sequence among short ones ran on one thread (batch 16384 + 2 x 256 keys, GQA 32/8, d128, f16: 31-41
// ms, against 16 ms for the 16384 keys alone; the benchmark notebook (docs/performance.md), issue 14).
constexpr uint64_t kCpuOwnLengthsMinSplits = 2;

// One row per FusedKernel, in its order.
constexpr FusedKernelTraits kFusedKernels[] = {
    {.kernel = FusedKernel::tiled, .name = "tiled", .shader = Shader::attention_tiled, .variant = KernelVariant::tiled,
     .paged = true, .packed = true, .q8_0 = true, .modifiers = true, .weights = false,
     .needs_subgroup_shuffle = false, .one_subgroup_workgroup = false, .shared_budget = kTileSharedBudget,
     .careful_pass = false, .vec4_row_flags = true, .mask_kind_constant = false, .lse_half_log2 = true,
     .chunked_rows = false, .gpu_target_workgroups = kGpuTargetWorkgroups, .gpu_max_keys_per_split = kGpuKeysPerSplit,
     .gpu_min_keys_per_split = 0, .cpu_packed_keys_cap = false, .cpu_own_lengths_min_splits = 0},
    {.kernel = FusedKernel::rowwise, .name = "rowwise", .shader = Shader::attention_rowwise,
     .variant = KernelVariant::rowwise, .paged = true, .packed = true, .q8_0 = true, .modifiers = true, .weights = false,
     .needs_subgroup_shuffle = false, .one_subgroup_workgroup = false, .shared_budget = kTileSharedBudget,
     .careful_pass = false, .vec4_row_flags = false, .mask_kind_constant = false, .lse_half_log2 = false,
     .chunked_rows = false, .gpu_target_workgroups = kGpuTargetWorkgroups, .gpu_max_keys_per_split = kGpuKeysPerSplit,
     .gpu_min_keys_per_split = 0, .cpu_packed_keys_cap = false, .cpu_own_lengths_min_splits = 0},
    {.kernel = FusedKernel::subgroup, .name = "subgroup", .shader = Shader::attention_subgroup,
     .variant = KernelVariant::subgroup, .paged = true, .packed = true, .q8_0 = true, .modifiers = true, .weights = false,
     .needs_subgroup_shuffle = true, .one_subgroup_workgroup = true, .shared_budget = 0, .careful_pass = true,
     .vec4_row_flags = false, .mask_kind_constant = true, .lse_half_log2 = false, .chunked_rows = false,
     .gpu_target_workgroups = kGpuTargetWorkgroups, .gpu_max_keys_per_split = kGpuKeysPerSplit,
     .gpu_min_keys_per_split = 0, .cpu_packed_keys_cap = false, .cpu_own_lengths_min_splits = 0},
    {.kernel = FusedKernel::subgroup_decode, .name = "subgroup-decode", .shader = Shader::attention_subgroup_decode,
     .variant = KernelVariant::subgroup, .paged = true, .packed = true, .q8_0 = true, .modifiers = true,
     .weights = false, .needs_subgroup_shuffle = true, .one_subgroup_workgroup = true, .shared_budget = 0,
     .careful_pass = false, .vec4_row_flags = false, .mask_kind_constant = true, .lse_half_log2 = false,
     .chunked_rows = true, .gpu_target_workgroups = kGpuDecodeTargetWorkgroups,
     .gpu_max_keys_per_split = kGpuDecodeKeysPerSplit, .gpu_min_keys_per_split = kGpuDecodeMinKeysPerSplit,
     .cpu_packed_keys_cap = true, .cpu_own_lengths_min_splits = kCpuOwnLengthsMinSplits},
};

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < std::size(kFusedKernels); ++i)
    if (static_cast<std::size_t>(kFusedKernels[i].kernel) != i) return false;
  return true;
}
static_assert(rows_in_order(), "kFusedKernels: one row per FusedKernel, in its order");

}  // namespace

const FusedKernelTraits& kernel_traits(FusedKernel kernel) { return kFusedKernels[static_cast<std::size_t>(kernel)]; }

uint32_t fused_shared_bytes(const KernelConfig& c, int64_t dim_qk, int64_t dim_v) {
  // The shaders' own declarations (shaders/shader_abi.h): vec4 tiles of 16 bytes, scores of 4.
  const uint64_t dqk = uint64_t(dim_qk), dv = uint64_t(dim_v), br = c.rows, bc = c.keys_per_tile, tpr = c.threads_per_row;
  if (c.one_subgroup()) return static_cast<uint32_t>(SUBGROUP_SHARED_BYTES(br, bc, dqk, dv));
  if (c.is(FusedKernel::rowwise)) return static_cast<uint32_t>(16 * (ROWWISE_K_TILE(bc, dqk) + ROWWISE_V_TILE(bc, dv)));
  return static_cast<uint32_t>(c.slot_bytes * (TILED_K_TILE(bc, dqk, tpr) + TILED_V_TILE(bc, dv, tpr)) +
                               4 * TILED_S_TILE(br, bc) + TILED_FLAG_BYTES);
}

uint64_t fused_loop_iterations(const KernelConfig& c, int64_t dim_qk, int64_t dim_v, uint64_t tiles) {
  const uint64_t wg = c.workgroup_size(), bc = c.keys_per_tile, tpr = c.threads_per_row;
  const uint64_t dqk4 = ceil_div(dim_qk, 4), dv4 = ceil_div(dim_v, 4);
  switch (c.kernel) {
    case FusedKernel::subgroup_decode:
      // attention_subgroup_decode.comp: per tile of BC keys one iteration of the fast loop and, at
      // worst, BC / key groups of the careful loop (one key per group each); each loop also runs once
      // more than its count (lavapipe enters loops at least once). Its other loops are all unrolled; 64
      // to spare.
      return 2 + 64 + tiles * (1 + uint64_t(c.keys_per_tile / c.key_groups()));
    case FusedKernel::subgroup: {
      // attention_subgroup.comp, the more of its two passes (each its own dispatch). The fast pass: the
      // Q-load and output loops (a chunk of `lanes` dims per iteration) and per tile of BC keys one
      // iteration of the fast loop. The careful pass, at worst: per query row of an invocation
      // (rows / lanes of them) its Q-load and output loops and BC iterations per tile (one key each).
      // Every loop also runs once more than its count (lavapipe enters loops at least once); 64 to spare.
      const uint64_t lanes = c.lanes, nq = ceil_div(dim_qk, lanes), nv = ceil_div(dim_v, lanes);
      const uint64_t fast = nq + nv + 2 + 64 + tiles;
      const uint64_t careful = 1 + 64 + uint64_t(c.rows / c.lanes) * (nq + nv + 3 + tiles * bc);
      return std::max(fast, careful);
    }
    case FusedKernel::rowwise: {
      const uint64_t per_tile = 1 + ceil_div(bc * dqk4, wg) + ceil_div(bc * dv4, wg)  // tile loop, K and V loads
                                + bc * (1 + 2 * dqk4)  // scores, each maybe twice (score.glsl: overflow)
                                + 4 * dv4                                             // rescale
                                + bc * (1 + dv4);                                     // p * V
      return dqk4 + 4 * dv4 + 4 * (1 + uint64_t(dim_v)) + 64 + tiles * per_tile;  // + Q load, init, writes
    }
    case FusedKernel::tiled:
      break;
  }
  // attention_tiled.comp (tiled): per tile the K and V loads, the score blocks of TPR keys (each
  // row of a block may take careful_score's loop: 4 vec4s per iteration), the weights and weight x V.
  const uint64_t sk = ceil_div(dqk4, tpr) * tpr, sv = ceil_div(dv4, tpr) * tpr, nb = ceil_div(bc, tpr);
  // Every loop counts once more than its trips (lavapipe enters loops at least once).
  const uint64_t per_tile = 2                                                    // the tile loop
                            + 2 + ceil_div(bc * sk, wg) + ceil_div(bc * sv, wg)  // K and V tile loads
                            + 1 + ceil_div(uint64_t(c.rows) * bc, wg)            // the mask tile
                            + 1 + nb * (1 + c.rows_per_thread * (1 + ceil_div(dqk4, 4)))  // scores
                            + 1 + nb                                             // weights
                            + 1 + nb;                                            // weight x V
  const uint64_t fixed = 64;
  return fixed + tiles * per_tile;
}

}  // namespace vkattn::detail
