// The fused attention kernels as a table: one enum value and one traits row per kernel (its shader,
// what it supports, what the device must have, its per-kernel plan rules), and the tile shape a plan
// gives it (KernelConfig). A new variant is a new row (fused_kernels.cpp) plus its shader; the
// planner (plan_kernel.cpp, plan_splits.cpp) and the recorder (attention_fused.cpp) read the row
// instead of asking which kernel it is.
#pragma once

#include <cstdint>

#include "pipelines.hpp"
#include "vkattn/context.hpp"

namespace vkattn::detail {

enum class FusedKernel : uint8_t {
  tiled,            // attention_tiled.comp: row groups of TPR lanes, K/V tiles in shared memory (GPUs)
  rowwise,          // attention_rowwise.comp: four query rows per invocation (SIMD CPUs without shuffles)
  subgroup,         // attention_subgroup.comp: one subgroup per workgroup, K/V shared by shuffles
  subgroup_decode,  // attention_subgroup_decode.comp: the subgroup kernel's decode form (packed GQA rows)
};

struct FusedKernelTraits {
  FusedKernel kernel;
  const char* name;  // as plans report it (AttentionPlan::kernel, the planner table)
  Shader shader;
  // The user's choice (KernelVariant, the CLI's --kernel) that asks for this kernel's family; the
  // decode form is the subgroup family's, chosen by the shape.
  KernelVariant variant;

  // What it runs. Every fused kernel takes paged caches, packed (varlen) batches, q8_0 K and V and
  // every score modifier today; none writes the weights P (the three-stage path does).
  bool paged, packed, q8_0, modifiers, weights;

  // What the device must have. Subgroup shuffles: the subgroup kernels share K, V and partial sums
  // across the subgroup (the tiled kernel uses them only when present, TPR 1 without). One subgroup
  // per workgroup: the workgroup must be exactly one subgroup of a size the device runs or can
  // require (subgroup_kernel_lanes).
  bool needs_subgroup_shuffle;
  bool one_subgroup_workgroup;

  // Plan and dispatch rules that are constants of the kernel.
  // Its shared memory is held to min(device, this) (0: the device's): the tiled and rowwise
  // kernels keep room for occupancy; the subgroup kernels' is small (fused_shared_bytes).
  uint32_t shared_budget;
  // Runs as a fast pass and a careful pass (two pipelines on one grid, SPEC_ATTENTION_CAREFUL_PASS),
  // its ballots (16 bytes a workgroup) in the workspace.
  bool careful_pass;
  // Reads Q, K and V rows four elements at a time where they allow (FLAG_VEC_Q/K/V); checks the
  // binding offsets itself.
  bool vec4_row_flags;
  // Takes the mask kind as a specialization constant (its code for the other kinds left out).
  bool mask_kind_constant;
  // Its split partials' LSE are in half log2 units (the combine's half_log2_units).
  bool lse_half_log2;
  // Its rows (Q, K, V and an unsplit O) may be read and written in 16-byte chunks (vec_loads), and
  // on a CPU device it may touch K and V rows ahead (prefetch_keys): the decode form.
  bool chunked_rows;
  // On a GPU: the workgroups wanted in flight before splitting the key range for parallelism, the
  // most keys per split when fewer are in flight, and the fewest keys a split for parallelism (and a
  // work-list item) keeps (0: one key tile).
  uint64_t gpu_target_workgroups, gpu_max_keys_per_split, gpu_min_keys_per_split;
  // On a CPU device: a packed batch's splits are held to kCpuPagedKeysPerSplit keys (paged calls'
  // are for every kernel), and sequences of their own key counts take at least this many splits.
  bool cpu_packed_keys_cap;
  uint64_t cpu_own_lengths_min_splits;
};

// The row of `kernel`.
const FusedKernelTraits& kernel_traits(FusedKernel kernel);

// The subgroup kernel's decode form reads rows in chunks of this many bytes (4 f32, 8 f16/bf16).
inline constexpr uint32_t kDecodeChunkBytes = 16;

// On a CPU device a call of at least this many query rows is prefill (the kernel choice,
// plan_kernel.cpp, and the path choice, prepared_attention.cpp).
inline constexpr int64_t kCpuPrefillRows = 16;
// The widest head dim a CPU device runs the subgroup kernel (not its decode form) at: past it prefill
// takes the three-stage path when the plan chooses, rowwise on the fused path (its JIT time).
inline constexpr int64_t kCpuSubgroupMaxHeadDim = 256;
// Past kCpuSubgroupMaxHeadDim, a decode whose three-stage GEMMs have at least this many rows (a
// GQA/MQA group's rows packed, group x seq_q: 4 heads at one query row) takes the three-stage path
// when the plan chooses (prepared_attention.cpp, wide_heads_three_stage).
inline constexpr int64_t kCpuWideGemmRows = 4;

// The tile shape of a plan's kernel (its specialization constants).
struct KernelConfig {
  FusedKernel kernel = FusedKernel::tiled;
  uint32_t rows = 16;             // BR: query rows per workgroup
  uint32_t threads_per_row = 8;   // TPR
  uint32_t keys_per_tile = 32;    // BC (subgroup: keys per iteration of its key loop)
  uint32_t lanes = 0;             // subgroup kernels: the device's subgroup size, one workgroup
  // subgroup kernels: a workgroup's rows are the query rows of all query heads of one GQA group
  // (head-major), so each K/V row it loads serves the whole group (decode); the grid's y is then the
  // KV head.
  bool pack_group = false;
  // subgroup_decode (attention_subgroup_decode.comp), for workgroups of at most kDecodeMaxRows rows:
  // every lane holds all `rows` rows and groups of threads_per_row lanes split the head dims, each
  // group taking its own keys (key_groups(); keys_per_tile counts all groups' keys of an iteration);
  // `vec_loads`: Q, K and V rows are read and O rows written (unsplit) in 16-byte chunks (dims and
  // strides allow it; a call whose tensors start unaligned replays the element-wise pipeline). The
  // subgroup kernel (choose_chunked_kv): its fast pass reads K and V rows in chunks.
  bool vec_loads = false;
  // subgroup_decode: the K and V rows of the key this many keys ahead are touched (loaded, the value
  // unused) in each iteration, as a software prefetch; 0 = none. On for a paged cache, a packed batch
  // or K/V whose rows of a head are apart (BSHD) on a CPU device.
  uint32_t prefetch_keys = 0;
  // tiled: query rows per row group of TPR lanes (RPT), query heads of a GQA group per workgroup
  // (rows counts all of them: rows / heads query rows per head), bytes per vec4 slot of its shared
  // K/V tiles (16 for f32, 8 for f16/bf16)
  uint32_t rows_per_thread = 1;
  uint32_t heads = 1;
  uint32_t slot_bytes = 16;

  const FusedKernelTraits& traits() const { return kernel_traits(kernel); }
  bool is(FusedKernel k) const { return kernel == k; }
  // The subgroup kernels (and the decode form): a workgroup is one subgroup of `lanes`.
  bool one_subgroup() const { return traits().one_subgroup_workgroup; }
  bool decode() const { return kernel == FusedKernel::subgroup_decode; }
  // rowwise: four query rows per invocation (the components of a vec4); subgroup kernels: one
  // subgroup; tiled: rows / RPT row groups of TPR lanes
  uint32_t workgroup_size() const {
    return one_subgroup() ? lanes : is(FusedKernel::rowwise) ? rows / 4 : rows / rows_per_thread * threads_per_row;
  }
  bool careful_pass() const { return traits().careful_pass; }
  Shader shader() const { return traits().shader; }
  const char* name() const { return is(FusedKernel::subgroup) && pack_group ? "subgroup-packed" : traits().name; }
  // The decode form's groups of lanes that each take their own keys.
  uint32_t key_groups() const { return decode() ? lanes / threads_per_row : 1; }
  // Query heads one workgroup covers (the grid's y counts heads / this).
  uint32_t heads_per_workgroup(int64_t group) const { return pack_group ? static_cast<uint32_t>(group) : heads; }
};

// Shared memory (bytes) of the fused kernel of `config` (mirrors its declarations).
uint32_t fused_shared_bytes(const KernelConfig& config, int64_t dim_qk, int64_t dim_v);

// Upper bound of loop iterations one invocation of the fused kernel of `config` runs for `tiles` key
// tiles (mirrors its loops; used against lavapipe's per-invocation loop limit).
uint64_t fused_loop_iterations(const KernelConfig& config, int64_t dim_qk, int64_t dim_v, uint64_t tiles);

// Whether every subgroup of `device` has its reported size (at most 128 lanes) and shuffles work.
inline bool one_subgroup_size(const DeviceInfo& device) {
  return device.subgroup_shuffle && device.subgroup_size >= 1 && device.subgroup_size <= 128 &&
         device.min_subgroup_size == device.subgroup_size && device.max_subgroup_size == device.subgroup_size;
}

// Whether the subgroup kernels, whose workgroup is exactly one subgroup (they shuffle K, V and partial
// sums across it), run on `device` with `lanes` lanes: its one subgroup size, or on a device of
// several sizes one its pipelines can require (subgroup size control, full subgroups), a power of two.
inline bool runs_subgroup_lanes(const DeviceInfo& device, uint32_t lanes) {
  if (one_subgroup_size(device)) return device.subgroup_size == lanes;
  return device.subgroup_shuffle && device.required_subgroup_size && lanes >= 1 && lanes <= 128 &&
         (lanes & (lanes - 1)) == 0 && lanes >= device.min_subgroup_size && lanes <= device.max_subgroup_size &&
         lanes <= device.max_workgroup_invocations;
}

// The lanes the subgroup kernels run with on `device`, 0 where they cannot run: its one size, else
// 32 (NVIDIA's warp, AMD's wave32, Intel's SIMD32) brought into the sizes it can require.
inline uint32_t subgroup_kernel_lanes(const DeviceInfo& device) {
  if (one_subgroup_size(device)) return device.subgroup_size;
  uint32_t lanes = 32;
  while (lanes < device.min_subgroup_size && lanes < 128) lanes *= 2;
  while (lanes > device.max_subgroup_size && lanes > 1) lanes /= 2;
  return runs_subgroup_lanes(device, lanes) ? lanes : 0;
}

// Whether `device` has what `kernel`'s row asks of it (FusedKernelTraits' device needs).
inline bool device_runs(const DeviceInfo& device, FusedKernel kernel) {
  const FusedKernelTraits& t = kernel_traits(kernel);
  if (t.needs_subgroup_shuffle && !device.subgroup_shuffle) return false;
  return !t.one_subgroup_workgroup || subgroup_kernel_lanes(device) != 0;
}

}  // namespace vkattn::detail
