// Step choose_kernel (plan_steps.hpp): which fused kernel (fused_kernels.hpp) runs the call, and its
// tiles: each kernel's speed and its pipelines' JIT time depend on the device class and the shape
// (prefill or decode, head dims), measured on lavapipe and GPUs (the benchmark notebook (docs/performance.md)).
#include <algorithm>
#include <bit>
#include <string>

#include "int_math.hpp"
#include "plan_steps.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// A paged cache, a packed batch or BSHD K/V on a CPU device: the decode form touches the K and V
// rows of the key this many keys ahead (KernelConfig::prefetch_keys). A head's rows in nhd pages
// (and packed or BSHD K/V) are kv_heads * dim elements apart, a few lines each, so the CPU's
// prefetchers never learn them and every row was a demand miss (TLB walk and memory) on the
// critical path; the touching loads take those misses for all of a row's lines at once, early.
// Measured on lavapipe (the benchmark notebook (docs/performance.md), issue 14): issue 14's batch (32k + 7 x 512 keys,
// GQA 32/8, d128, f16), nhd pages of 16 107 -> 52 ms, hnd 40 -> 36 ms, packed 244 -> 100 ms, BSHD
// K/V 120-137 -> 50-64 ms; 16 keys ahead as fast as 32, 64 a little slower.
constexpr uint32_t kCpuPrefetchKeys = 16;

// Keys per iteration of the subgroup kernel with one query row per invocation (decode), up to 128
// dims: measured on lavapipe (the benchmark notebook (docs/performance.md)).
constexpr uint32_t kDecodeKeysPerIteration = 1;

// The subgroup kernel's decode form (attention_subgroup_decode.comp), measured on lavapipe (Mesa
// 22.3.6, the benchmark notebook (docs/performance.md)): for packed tiles (a GQA group's heads x seq_q) of up to 16 rows,
// in workgroups of up to 4 rows that every lane holds whole (8 rows: about 10% faster, but a d128
// pipeline's first dispatch JITs for 2-2.5 s); the lanes-own-rows form is as fast or faster past 16.
// Keys per iteration: 4 for 1-2 rows, 2 for 4 (1 to 4 cost about the same at 4 rows; more keys per
// iteration count fewer loop iterations against lavapipe's limit), halved while a lane's 16-byte
// loads of K per iteration (keys x the lane's chunks of a row) pass 16, or those times the rows pass
// 32: the fast loop is unrolled over them, and Mesa 25.0.7's JIT time grows fast with them (d256
// f32, 8 chunks a lane: 4 rows at 2 keys JIT for 6.3 s there, at 1 key 3.8 s; one row at 4 keys 5.1 s,
// at 2 keys 2.6 s and 25% faster on 22.3.6: the benchmark notebook (docs/performance.md), "d256 f32 decode").
constexpr uint64_t kDecodeMaxRows = 4;
// A lane's values of one key (its chunks x values per chunk) times the rows it holds, at most:
// first-dispatch JIT time of the decode pipeline on Mesa 22.3.6 (8 lanes, `bench/run.py
// --cold-shader-cache first-dispatch`, 2026-12-03): 128 (d256 f32 or f16 x 4 rows) 1.2-1.5 s, 144
// (576/512 f16 x 2 rows) 1.2 s, 256 (d512 f16 x 4 rows) 3.3 s, 288 (576/512 f16 x 4 rows) 3.0 s.
constexpr uint64_t kDecodeMaxLaneValues = 160;
// And a lane's 16-byte loads of a key times its rows, at most (Mesa 25.0.7: 576/512 f32, 18 loads x 2
// rows, 7.1 s; d256 f32, 8 x 4 rows, 3.8 s).
constexpr uint64_t kDecodeMaxLaneLoads = 32;
constexpr uint64_t kDecodeMaxTileRows = 16;
uint32_t decode_keys_per_iteration(uint32_t rows, uint64_t chunks_per_lane) {
  uint32_t keys = rows <= 2 ? 4 : 2;
  while (keys > 1 && (keys * chunks_per_lane > 16 || keys * chunks_per_lane * rows > 32)) keys /= 2;
  return keys;
}

// The shared memory a kernel's tiles may take on `device` (its row's budget, or the device's).
uint64_t shared_budget(const DeviceInfo& device, FusedKernel kernel) {
  const uint32_t own = kernel_traits(kernel).shared_budget;
  return own ? std::min<uint64_t>(device.max_shared_memory, own) : device.max_shared_memory;
}

[[noreturn]] void too_little_shared_memory(const DeviceInfo& device, const AttentionProblem& p) {
  throw unsupported("device: " + device.name + " has " + str(device.max_shared_memory) +
                    " bytes of shared memory, too little for dim_qk " + str(p.dim_qk) + " and dim_v " + str(p.dim_v));
}

// Four query rows per invocation and 8 invocations: llvmpipe runs 8 invocations per SIMD vector.
KernelConfig choose_rowwise_config(const DeviceInfo& device, const AttentionProblem& p) {
  KernelConfig c;
  c.kernel = FusedKernel::rowwise;
  c.threads_per_row = 1;
  c.rows = 32;
  for (uint32_t bc : {64u, 32u, 16u, 8u, 4u, 2u, 1u}) {  // 2 and 1: 576/512 f32 in 16 KiB
    c.keys_per_tile = bc;
    if (fused_shared_bytes(c, p.dim_qk, p.dim_v) <= shared_budget(device, c.kernel)) return c;
  }
  too_little_shared_memory(device, p);
}

// The subgroup kernel's lanes on `device`, or why it cannot run there.
uint32_t subgroup_lanes_or_throw(const DeviceInfo& device) {
  if (!device.subgroup_shuffle)
    throw unsupported("kernel: subgroup needs subgroup shuffles in compute shaders, which " + device.name +
                      " does not offer");
  // The kernel's workgroup must be exactly one subgroup: a driver free to compile it with smaller
  // subgroups (Intel's SIMD8/16/32, AMD's wave32/64) would split it, and the shuffles would read
  // lanes of another subgroup. On such a device the pipeline requires its size (subgroup size control).
  const uint32_t lanes = subgroup_kernel_lanes(device);
  if (lanes == 0)
    throw unsupported("kernel: subgroup needs every subgroup to have one size, but " + device.name +
                      "'s pipelines may run with " +
                      (device.max_subgroup_size == 0 ? std::string("sizes it does not report (no Vulkan 1.3)")
                                                     : "sizes " + str(device.min_subgroup_size) + " to " +
                                                           str(device.max_subgroup_size)) +
                      " and it offers no subgroup size control for compute shaders (or it was not enabled)");
  return lanes;
}

// The decode form's tile for `tile_rows` packed rows: every lane holds all the rows of its
// workgroup (1, 2 or 4) and the lanes split the head dims.
void make_decode_form(KernelConfig& c, const AttentionProblem& p, uint64_t tile_rows) {
  c.kernel = FusedKernel::subgroup_decode;
  c.rows = static_cast<uint32_t>(std::min<uint64_t>(std::bit_ceil(tile_rows), kDecodeMaxRows));
  // Lanes per key: as many as the head dim has 16-byte chunks (a power of two), at most the
  // subgroup; the rest of the subgroup's lanes form more key groups, each taking its own keys of
  // an iteration (a GPU's 32 lanes at d128 f16: 2 groups of 16, not 16 idle lanes).
  const uint64_t chunks = ceil_div(std::max(p.dim_qk, p.dim_v), kDecodeChunkBytes / dtype_size(p.dtype));
  c.threads_per_row = static_cast<uint32_t>(std::min<uint64_t>(c.lanes, std::bit_ceil(chunks)));
  // Fewer rows per workgroup where a lane's values of a key times its rows pass kDecodeMaxLaneValues:
  // the unrolled body's JIT time grows with them (the head dims past 256).
  const uint64_t chunks_per_lane = ceil_div(chunks, c.threads_per_row);
  const uint64_t values_per_lane = chunks_per_lane * (kDecodeChunkBytes / dtype_size(p.dtype));
  while (c.rows > 1 && (values_per_lane * c.rows > kDecodeMaxLaneValues || chunks_per_lane * c.rows > kDecodeMaxLaneLoads))
    c.rows /= 2;
  c.keys_per_tile = decode_keys_per_iteration(c.rows, chunks_per_lane) * c.key_groups();
}

// One workgroup = one subgroup of the device's size (the shader shuffles K and V across it), a few
// query rows per invocation and keys per iteration; lavapipe's JIT time grows with their product
// and the head dim (the unrolled body; docs/devices.md).
KernelConfig choose_subgroup_config(const DeviceInfo& device, const AttentionProblem& p, bool packing_allowed) {
  KernelConfig c;
  c.kernel = FusedKernel::subgroup;
  c.threads_per_row = 1;
  c.lanes = subgroup_lanes_or_throw(device);
  const uint32_t lanes = c.lanes;
  // Rows per invocation x keys per iteration, by the padded head dim: measured on lavapipe (Mesa
  // 22.3.6, the benchmark notebook (docs/performance.md)) for speed with a first-dispatch JIT time under 2 s. d64: 4 x 4
  // (4 x 8 spills, 8 x 2 and 8 x 4 JIT for 2.4-3.4 s); d128: 4 x 1 (4 x 2: 2.6 s); d256: 2 x 1 (4 x 1: 4.7 s).
  const uint64_t padded = ceil_div(std::max(p.dim_qk, p.dim_v), lanes) * lanes;
  uint32_t rows_per_invocation = padded <= 128 ? 4 : padded <= 256 ? 2 : 1;
  c.keys_per_tile = padded <= 64 ? 4 : 1;
  // Fewer query rows than one tile holds (decode): the query heads of a GQA group become the rows
  // (one K/V load serves the group), and the rows per invocation shrink to what the rows need
  // (1, 2 or 4), so that no lane computes rows that do not exist. Without GQA (a group of one head)
  // the packed rows are the head's own: the same pipeline serves MHA and GQA decode.
  const uint64_t group = uint64_t(p.group_size());
  c.pack_group = packing_allowed && uint64_t(p.seq_q) < uint64_t(rows_per_invocation) * lanes;
  const uint64_t tile_rows = uint64_t(p.seq_q) * (c.pack_group ? group : 1);
  while (rows_per_invocation > 1 && uint64_t(rows_per_invocation / 2) * lanes >= tile_rows) rows_per_invocation /= 2;
  if (rows_per_invocation == 1 && padded <= 128) c.keys_per_tile = kDecodeKeysPerIteration;
  c.rows = rows_per_invocation * lanes;
  // Packed tiles of up to kDecodeMaxTileRows rows: the decode form.
  if (c.pack_group && tile_rows <= kDecodeMaxTileRows) make_decode_form(c, p, tile_rows);
  if (fused_shared_bytes(c, p.dim_qk, p.dim_v) > device.max_shared_memory)  // none today
    throw unsupported("device: " + device.name + " has too little shared memory for the subgroup kernel");
  return c;
}

// The lanes of a row group of the tiled kernel: they exchange partial dot products with
// subgroupShuffleXor, so TPR must divide every subgroup size the device may compile the kernel with
// (its min_subgroup_size: drivers free to pick smaller subgroups, Intel's SIMD8 or Apple's 4-wide, set
// the bound). 8 at most (also what lavapipe, whose subgroups are 8 lanes, can run: a GPU preset's
// plan is proven there), and no more lanes than vec4s in a head dim. 1 (the build without subgroup
// operations) without shuffles or without a reported minimum size.
uint32_t tiled_lanes(const DeviceInfo& device, const AttentionProblem& p) {
  if (!device.subgroup_shuffle || device.min_subgroup_size < 2) return 1;
  uint32_t tpr = 8;
  while (tpr > 1 && (device.min_subgroup_size % tpr != 0 || uint64_t(tpr) / 2 >= ceil_div(std::max(p.dim_qk, p.dim_v), 4)))
    tpr /= 2;
  return tpr;
}

// The tiled kernel's rows: row groups, rows per group and the GQA heads sharing a workgroup.
void choose_tiled_rows(KernelConfig& c, const DeviceInfo& device, const AttentionProblem& p, bool packing_allowed) {
  const uint32_t tpr = c.threads_per_row;
  // Rows per row group: each keeps RPT x (Q and accumulator vec4s of its lanes) in registers; at most
  // 16 vec4s (64 floats) of them. d64: 4 rows (with 8 lanes), d128: 2, d256: 1.
  const uint64_t per_row = ceil_div(ceil_div(p.dim_qk, 4), tpr) + ceil_div(ceil_div(p.dim_v, 4), tpr);
  c.rows_per_thread = per_row * 4 <= 16 ? 4 : per_row * 2 <= 16 ? 2 : 1;
  // The query heads of a GQA group share one workgroup when the query rows are few (decode, up to
  // 64 rows of the group): each K/V tile is then read once for the group, not once per head. Groups
  // of a power-of-two size only, so that the workgroup stays whole row groups of a power of two.
  const int64_t group = p.group_size();
  c.heads = packing_allowed && group > 1 && std::has_single_bit(uint64_t(group)) && p.seq_q * group <= 64
                ? uint32_t(group)
                : 1;
  // Query rows per workgroup: up to 128 invocations (16 row groups of 8 lanes), at most 64 rows, fewer
  // when the query sequence is short.
  const uint32_t max_groups = std::max<uint32_t>(1, std::min<uint32_t>(128 / tpr, device.max_workgroup_invocations / tpr));
  uint32_t groups = std::min<uint32_t>(max_groups, 64 / c.rows_per_thread);
  while (c.rows_per_thread > 1 && int64_t(c.rows_per_thread / 2) >= p.seq_q * c.heads) c.rows_per_thread /= 2;
  while (groups > 1 && int64_t(groups / 2) * c.rows_per_thread >= p.seq_q * c.heads) groups /= 2;
  c.rows = groups * c.rows_per_thread;  // all heads of the workgroup
}

// The tiled kernel's tiles with `tpr` lanes a row: the most keys per tile that fit the budget,
// then fewer rows (whole row groups, whole heads) where the scores' tile does not fit.
bool fit_tiled_tiles(KernelConfig& c, const DeviceInfo& device, const AttentionProblem& p, bool packing_allowed,
                     uint32_t tpr) {
  c.threads_per_row = tpr;
  choose_tiled_rows(c, device, p, packing_allowed);
  const uint64_t budget = shared_budget(device, c.kernel);
  for (uint32_t bc : {32u, 16u, 8u, 4u, 2u, 1u}) {
    c.keys_per_tile = std::max(bc, tpr);
    if (fused_shared_bytes(c, p.dim_qk, p.dim_v) <= budget) break;
  }
  while (fused_shared_bytes(c, p.dim_qk, p.dim_v) > budget && c.rows / 2 >= c.heads &&
         (c.rows / 2) % c.heads == 0 && (c.rows / 2) % c.rows_per_thread == 0)
    c.rows /= 2;
  return fused_shared_bytes(c, p.dim_qk, p.dim_v) <= budget;
}

KernelConfig choose_tiled_config(const DeviceInfo& device, const AttentionProblem& p, bool packing_allowed) {
  KernelConfig c;
  c.kernel = FusedKernel::tiled;
  c.slot_bytes = p.dtype == DType::f32 ? 16 : 8;
  // A tile holds at least one key per lane of a row (keys_per_tile >= TPR). Where even that does not
  // fit (f32 rows of 512 dims and more on 32 KiB devices: 8 keys of K and V are 32 KiB), fewer lanes
  // a row and so fewer keys a tile; each lane then holds more of the row's Q and accumulator.
  for (uint32_t tpr = tiled_lanes(device, p); tpr >= 1; tpr /= 2)
    if (fit_tiled_tiles(c, device, p, packing_allowed, tpr)) return c;
  too_little_shared_memory(device, p);
}

// The kernel family the call runs: the variant asked for, or automatically by the device class and
// the shape. On CPU devices rowwise wins once its 32-row workgroups have rows to work on; below that
// (decode, short chunks) the tiled kernel's lanes share few rows instead (measured on lavapipe, see
// the benchmark notebook (docs/performance.md)).
// The subgroup kernel (where the device has subgroup shuffles) is about 5x faster than rowwise on
// lavapipe for prefill at d64 and d128, 4-6x at d256, and for decode (seq_q < 16: a GQA group's
// heads packed into its rows, one row per invocation) 4-15x faster than tiled
// (the benchmark notebook (docs/performance.md)). Every head dim takes it (up to kMaxHeadDim, padded to a subgroup of
// at most 128 lanes, it always fits): at d256 each of its two prefill pipelines JITs in under 2 s on Mesa 22.3.6 (1.3 and 0.8 s),
// where rowwise now takes 2.3 s or more ("d256 prefill: the subgroup kernel").
// Decode (a packed tile of up to kDecodeMaxTileRows rows) runs the subgroup kernel's decode form
// up to 256 dims (a GQA group's query rows in every lane, the lanes across the head dim and keys, K
// and V read once in 16-byte loads): on GPUs whose subgroups have one size (NVIDIA's 32), or whose
// pipelines can require one (AMD, Intel: 32 lanes, subgroup_kernel_lanes), where the tiled kernel's
// decode tile is a prefill tile with the group's few useful rows (the benchmark notebook (docs/performance.md), "GPU
// decode form"); and on CPU devices past 128 dims too, where it is 11x faster than tiled at d256
// on lavapipe 22.3.6 and 4x on 25.0.7 (GQA 32/8, 32k keys) and JITs in about as long as the d128
// prefill pipeline (the benchmark notebook (docs/performance.md), "d256 decode"). A CPU device's seq_q of 16 or more is
// prefill.
// Past 256 head dims a CPU device runs the decode form where it applies and rowwise otherwise: the
// subgroup kernel's pipelines (one row per invocation, its whole row unrolled) JIT for 6-8 s each on
// Mesa 25.0.7 at d512 (1.6-1.9 s on 22.3.6), rowwise's for 1.7-2.4 s on either, at half the subgroup
// kernel's speed or less (B1 H8 d512 f16: 235 ms against 112 at 256x256, 1004 against 412 at 512x512;
// bench/results, 2026-12-03).
// (The subgroup family's configuration picks between the subgroup kernel and its decode form.)
FusedKernel kernel_family(const PlanInputs& in, KernelVariant variant, bool packing_allowed) {
  for (FusedKernel k : {FusedKernel::tiled, FusedKernel::rowwise, FusedKernel::subgroup})
    if (variant == kernel_traits(k).variant) return k;
  const DeviceInfo& device = in.device;
  const AttentionProblem& shape = in.shape;
  const bool cpu_prefill = device.is_cpu() && shape.seq_q >= kCpuPrefillRows;
  const bool subgroup_runs = device_runs(device, FusedKernel::subgroup);
  const bool decode_form = device_runs(device, FusedKernel::subgroup_decode) && packing_allowed && !cpu_prefill &&
                           uint64_t(shape.seq_q) * uint64_t(in.group()) <= kDecodeMaxTileRows;
  const bool cpu_wide = device.is_cpu() && std::max(shape.dim_qk, shape.dim_v) > kCpuSubgroupMaxHeadDim;
  if ((device.is_cpu() && subgroup_runs && !cpu_wide) || decode_form) return FusedKernel::subgroup;
  return cpu_prefill || cpu_wide ? FusedKernel::rowwise : FusedKernel::tiled;
}

// The decode form's reads and writes in 16-byte chunks, and its prefetch on a CPU device.
// Whether a tensor's batch, head and sequence strides are whole 16-byte chunks of `chunk` elements.
bool chunk_strides(const TensorLayout& t, int64_t chunk) {
  return t.stride_batch % chunk == 0 && t.stride_head % chunk == 0 && t.stride_seq % chunk == 0;
}

void choose_chunked_rows(const PlanInputs& in, KernelChoice& choice) {
  const AttentionLayouts& layouts = in.layouts;
  const AttentionProblem& p = in.problem;
  // 16-byte chunks: whole in every row when the dims and strides are multiples of a chunk (the
  // binding offsets are checked at replay: CommandList picks the element-wise pipeline there).
  const int64_t chunk = kDecodeChunkBytes / int64_t(dtype_size(p.dtype));
  const auto chunked = [&](const TensorLayout& t) { return t.dim % chunk == 0 && chunk_strides(t, chunk); };
  // (q8_0 K and V are read in runs of a block instead: kv_values.glsl.)
  choice.config.vec_loads =
      p.kv_quant == KvQuant::none && chunked(layouts.q) && chunked(layouts.k) && chunked(layouts.v);
  choice.out_chunked = chunked(layouts.out);
  // (Dense K or V whose rows of a head have a row's length or more of other data between them:
  // BSHD tensors.)
  const auto interleaved = [](const TensorLayout& t) { return t.stride_seq >= 2 * t.dim; };
  if ((in.paged || in.varlen || interleaved(layouts.k) || interleaved(layouts.v)) && in.device.is_cpu())
    choice.config.prefetch_keys = kCpuPrefetchKeys;
}

// The subgroup kernel's fast pass reads K and V in 16-byte chunks where every lane's share of a row
// is whole chunks (the head dims multiples of lanes x a chunk's elements: d64, d128 and d256 f16 on
// lavapipe's 8 lanes, d32 to d256 f32) and the rows' strides are whole chunks (the binding offsets are
// checked at replay). Not q8_0 (its blocks are read their own way: kv_values.glsl).
void choose_chunked_kv(const PlanInputs& in, KernelChoice& choice) {
  const AttentionProblem& p = in.problem;
  const int64_t chunk = kDecodeChunkBytes / int64_t(dtype_size(p.dtype));
  const int64_t lane_rows = chunk * choice.config.lanes;
  choice.config.vec_loads = p.kv_quant == KvQuant::none && p.dim_qk % lane_rows == 0 && p.dim_v % lane_rows == 0 &&
                            chunk_strides(in.layouts.k, chunk) && chunk_strides(in.layouts.v, chunk);
}

}  // namespace

KernelChoice choose_kernel(const PlanInputs& in, KernelVariant variant, bool packing_allowed) {
  KernelChoice choice;
  switch (kernel_family(in, variant, packing_allowed)) {
    case FusedKernel::subgroup:
    case FusedKernel::subgroup_decode:
      choice.config = choose_subgroup_config(in.device, in.shape, packing_allowed);
      break;
    case FusedKernel::rowwise:
      choice.config = choose_rowwise_config(in.device, in.shape);
      break;
    case FusedKernel::tiled:
      choice.config = choose_tiled_config(in.device, in.shape, packing_allowed);
      break;
  }
  if (choice.config.traits().chunked_rows) choose_chunked_rows(in, choice);
  if (choice.config.is(FusedKernel::subgroup)) choose_chunked_kv(in, choice);
  return choice;
}

uint32_t query_tiles(const PlanInputs& in, const KernelConfig& c) {
  // Packed: the tiles cover the group's heads x seq_q rows, and the grid's y the KV heads.
  return static_cast<uint32_t>(ceil_div(uint64_t(in.shape.seq_q * int64_t(c.heads_per_workgroup(in.group()))), c.rows));
}

}  // namespace vkattn::detail
