#include "attention_plan.hpp"
#include "kv_storage.hpp"
#include "int_math.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "llvmpipe_limits.hpp"
#include "shader_abi.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {


// A paged cache, or a packed batch's decode, on a CPU device: at most this many keys per split.
// Inside a page (and in a packed batch's (total_k, kv_heads, dim) K and V) the keys of one KV head
// are kv_heads * dim elements apart, and a decode workgroup streams one head: over a long key
// range it reads 256 of every 2048 bytes (8 KV heads, d128, f16), which the CPU's prefetchers do not
// follow. With short splits, the workgroups of all KV heads (consecutive in the grid) read one narrow
// window of the cache at about the same time. Measured on lavapipe (bench/results/README.md, issue
// 14): batch 1, 32k keys, GQA 32/8, d128, f16, page 16: 75-102 ms with the default splits, 54 ms
// with 1024 keys per split, 53-58 ms for dense K/V. A packed batch (32k + 7 x 512 keys, the same
// heads), decode: 100 -> 50 ms (2 splits before).
constexpr uint64_t kCpuPagedKeysPerSplit = 1024;
// A paged cache, a packed batch or BSHD K/V on a CPU device: the decode form touches the K and V
// rows of the key this many keys ahead (KernelConfig::prefetch_keys). A head's rows in nhd pages
// (and packed or BSHD K/V) are kv_heads * dim elements apart, a few lines each, so the CPU's
// prefetchers never learn them and every row was a demand miss (TLB walk and memory) on the
// critical path; the touching loads take those misses for all of a row's lines at once, early.
// Measured on lavapipe (bench/results/README.md, issue 14): issue 14's batch (32k + 7 x 512 keys,
// GQA 32/8, d128, f16), nhd pages of 16 107 -> 52 ms, hnd 40 -> 36 ms, packed 244 -> 100 ms, BSHD
// K/V 120-137 -> 50-64 ms; 16 keys ahead as fast as 32, 64 a little slower.
constexpr uint32_t kCpuPrefetchKeys = 16;
// A GPU with fewer workgroups than its target (decode): at most this many keys per split, so that
// the longest sequence of a batch is not left to a few workgroups. Measured on an H100
// (bench/results/README.md, "First runs on a GPU"): batch 8 (32768 + 7 x 512 keys, GQA 32/8, d128,
// paged 16) 15.5 ms with the 4 splits the target alone gave, 10.0 ms with 32 (1024 keys a split);
// batch 1 x 32768 keys already had 32.
constexpr uint64_t kGpuKeysPerSplit = 1024;
// Workgroups wanted in flight before splitting the key range for parallelism alone.
constexpr uint64_t kGpuTargetWorkgroups = 256;
// The same for the decode form on a GPU, whose workgroups are one subgroup each, and its most keys
// per split (the longest sequence of a batch spread over many workgroups).
constexpr uint64_t kGpuDecodeTargetWorkgroups = 2048;
constexpr uint64_t kGpuDecodeKeysPerSplit = 256;
constexpr uint64_t kGpuDecodeMinKeysPerSplit = 32;
constexpr uint64_t kCpuTargetWorkgroups = 16;
// The decode form on a CPU device, for sequences with their own key counts: at least this many splits,
// so that a work list cuts them by their keys even where the batch alone fills the target. Without
// one, the grid's z is the batch, and lavapipe's threads each take one contiguous run of it: one long
// sequence among short ones ran on one thread (batch 16384 + 2 x 256 keys, GQA 32/8, d128, f16: 31-41
// ms, against 16 ms for the 16384 keys alone; bench/results/README.md, issue 14).
constexpr uint64_t kCpuOwnLengthsMinSplits = 2;
// A work list on a CPU device (WorkListPlan): the fewest keys of an item. On lavapipe a workgroup costs
// about 5 us even with no key (seven 1-key sequences beside a 32k one, splits by capacity: 10 ms more
// for 1736 empty workgroups), one KV head's key about 0.2 us (GQA 32/8, d128, f16).
constexpr uint64_t kCpuMinKeysPerItem = 256;
// A fused call's split-KV workspace is at most its output's size in f32 divided by this (below
// fused_workspace_budget), so the fused path's memory stays linear in the sequence lengths...
constexpr uint64_t kOutputPerWorkspace = 4;
// ...unless that would leave a range of query tiles fewer than this many times the target workgroups.
constexpr uint64_t kRangeWorkgroupsPerTarget = 4;
std::string str(uint64_t v) { return std::to_string(v); }

TensorLayout rebase(TensorLayout l, int64_t b0, int64_t nb, int64_t h0, int64_t nh) {
  l.offset += b0 * l.stride_batch + h0 * l.stride_head;
  l.batch = nb;
  l.heads = nh;
  return l;
}

// Most bytes the binding of elements [first, end) spans, as attention.cpp binds it: from the first
// element's byte rounded down to the offset alignment (at most alignment - 1 bytes earlier: the
// bound holds for every chunk, whichever offset it starts at) to the last whole 32-bit word.
uint64_t binding_bytes(int64_t first, int64_t end, uint64_t esize, uint64_t alignment) {
  return alignment - 1 + (uint64_t(end - first) * esize + 3) / 4 * 4;
}
// The same for K or V (kv_storage.hpp: q8_0 blocks).
uint64_t kv_binding_bytes(const TensorLayout& t, KvQuant quant, uint64_t alignment) {
  return alignment - 1 + (kv_bytes(t.dtype, quant, t.required_elements()) - kv_bytes(t.dtype, quant, t.offset) + 3) / 4 * 4;
}

// Whether every binding of a chunk fits in one descriptor range (K and V whole, or only the others
// when K and V are bound by key range).
bool chunk_fits(const AttentionLayouts& a, uint64_t alignment, uint64_t max_range, bool with_kv = true) {
  const auto bytes = [&](const TensorLayout& l) {
    return binding_bytes(l.offset, l.required_elements(), dtype_size(l.dtype), alignment);
  };
  if (bytes(a.q) > max_range || bytes(a.out) > max_range) return false;
  if (with_kv && (kv_binding_bytes(a.k, a.kv_quant, alignment) > max_range ||
                  kv_binding_bytes(a.v, a.kv_quant, alignment) > max_range))
    return false;
  const uint64_t rows = uint64_t(a.q.batch * a.q.heads * a.q.seq);
  if (a.has_lse && rows * 4 + alignment > max_range) return false;
  return !a.mask || binding_bytes(a.mask->offset, a.mask->required_elements(), mask_type_size(a.mask->type),
                                  alignment) <= max_range;
}

// Keys per iteration of the subgroup kernel with one query row per invocation (decode), up to 128
// dims: measured on lavapipe (bench/results/README.md).
constexpr uint32_t kDecodeKeysPerIteration = 1;

// The subgroup kernel's decode form (attention_subgroup_decode.comp), measured on lavapipe (Mesa
// 22.3.6, bench/results/README.md): for packed tiles (a GQA group's heads x seq_q) of up to 16 rows,
// in workgroups of up to 4 rows that every lane holds whole (8 rows: about 10% faster, but a d128
// pipeline's first dispatch JITs for 2-2.5 s); the lanes-own-rows form is as fast or faster past 16.
// Keys per iteration: 4 for 1-2 rows, 2 for 4 (1 to 4 cost about the same at 4 rows; more keys per
// iteration count fewer loop iterations against lavapipe's limit), halved while a lane's 16-byte
// loads of K per iteration (keys x the lane's chunks of a row) pass 16, or those times the rows pass
// 32: the fast loop is unrolled over them, and Mesa 25.0.7's JIT time grows fast with them (d256
// f32, 8 chunks a lane: 4 rows at 2 keys JIT for 6.3 s there, at 1 key 3.8 s; one row at 4 keys 5.1 s,
// at 2 keys 2.6 s and 25% faster on 22.3.6: bench/results/README.md, "d256 f32 decode").
constexpr uint64_t kDecodeMaxRows = 4;
constexpr uint64_t kDecodeMaxTileRows = 16;
uint32_t decode_keys_per_iteration(uint32_t rows, uint64_t chunks_per_lane) {
  uint32_t keys = rows <= 2 ? 4 : 2;
  while (keys > 1 && (keys * chunks_per_lane > 16 || keys * chunks_per_lane * rows > 32)) keys /= 2;
  return keys;
}

// Four query rows per invocation and 8 invocations: llvmpipe runs 8 invocations per SIMD vector.
KernelConfig choose_rowwise_config(const DeviceInfo& device, const AttentionProblem& p) {
  KernelConfig c;
  c.rowwise = true;
  c.threads_per_row = 1;
  c.rows = 32;
  const uint64_t shared_budget = std::min<uint64_t>(device.max_shared_memory, 32768);
  for (uint32_t bc : {64u, 32u, 16u, 8u, 4u}) {
    c.keys_per_tile = bc;
    if (fused_shared_bytes(c, p.dim_qk, p.dim_v) <= shared_budget) return c;
  }
  throw unsupported("device: " + device.name + " has " + str(device.max_shared_memory) +
                    " bytes of shared memory, too little for dim_qk " + str(p.dim_qk) + " and dim_v " + str(p.dim_v));
}

// One workgroup = one subgroup of the device's size (the shader shuffles K and V across it), a few
// query rows per invocation and keys per iteration; lavapipe's JIT time grows with their product
// and the head dim (the unrolled body; docs/devices.md).
KernelConfig choose_subgroup_config(const DeviceInfo& device, const AttentionProblem& p, bool packing_allowed) {
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
  KernelConfig c;
  c.subgroup = true;
  c.threads_per_row = 1;
  c.lanes = lanes;
  // Rows per invocation x keys per iteration, by the padded head dim: measured on lavapipe (Mesa
  // 22.3.6, bench/results/README.md) for speed with a first-dispatch JIT time under 2 s. d64: 4 x 4
  // (4 x 8 spills, 8 x 2 and 8 x 4 JIT for 2.4-3.4 s); d128: 4 x 1 (4 x 2: 2.6 s); d256: 2 x 1 (4 x 1: 4.7 s).
  const uint64_t padded = ceil_div(std::max(p.dim_qk, p.dim_v), lanes) * lanes;
  uint32_t rows_per_invocation = padded <= 64 ? 4 : padded <= 128 ? 4 : 2;
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
  // Packed tiles of up to kDecodeMaxTileRows rows: the decode form, every lane holding all the rows
  // of its workgroup (1, 2 or 4) and the lanes splitting the head dims.
  if (c.pack_group && tile_rows <= kDecodeMaxTileRows) {
    c.decode = true;
    c.rows = static_cast<uint32_t>(std::min<uint64_t>(std::bit_ceil(tile_rows), kDecodeMaxRows));
    // Lanes per key: as many as the head dim has 16-byte chunks (a power of two), at most the
    // subgroup; the rest of the subgroup's lanes form more key groups, each taking its own keys of
    // an iteration (a GPU's 32 lanes at d128 f16: 2 groups of 16, not 16 idle lanes).
    const uint64_t chunks = ceil_div(std::max(p.dim_qk, p.dim_v), kDecodeChunkBytes / dtype_size(p.dtype));
    c.threads_per_row = static_cast<uint32_t>(std::min<uint64_t>(lanes, std::bit_ceil(chunks)));
    c.keys_per_tile = decode_keys_per_iteration(c.rows, ceil_div(chunks, c.threads_per_row)) * c.key_groups();
  }
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

KernelConfig choose_tiled_config(const DeviceInfo& device, const AttentionProblem& p, bool packing_allowed) {
  KernelConfig c;
  c.slot_bytes = p.dtype == DType::f32 ? 16 : 8;
  c.threads_per_row = tiled_lanes(device, p);
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
  const uint64_t shared_budget = std::min<uint64_t>(device.max_shared_memory, 32768);
  for (uint32_t bc : {32u, 16u, 8u, 4u, 2u, 1u}) {
    c.keys_per_tile = std::max(bc, tpr);
    if (fused_shared_bytes(c, p.dim_qk, p.dim_v) <= shared_budget) break;
  }
  // Fewer rows (whole row groups, whole heads) where the scores' tile does not fit.
  while (fused_shared_bytes(c, p.dim_qk, p.dim_v) > shared_budget && c.rows / 2 >= c.heads &&
         (c.rows / 2) % c.heads == 0 && (c.rows / 2) % c.rows_per_thread == 0)
    c.rows /= 2;
  if (fused_shared_bytes(c, p.dim_qk, p.dim_v) > shared_budget)
    throw unsupported("device: " + device.name + " has " + str(device.max_shared_memory) +
                      " bytes of shared memory, too little for dim_qk " + str(p.dim_qk) + " and dim_v " + str(p.dim_v));
  return c;
}

}  // namespace

AttentionLayouts chunk_layouts(const AttentionLayouts& layouts, int64_t group, int64_t b0, int64_t nb, int64_t h0,
                               int64_t nh) {
  AttentionLayouts l = layouts;
  l.q = rebase(layouts.q, b0, nb, h0, nh);
  l.out = rebase(layouts.out, b0, nb, h0, nh);
  l.k = rebase(layouts.k, b0, nb, h0 / group, nh / group);
  l.v = rebase(layouts.v, b0, nb, h0 / group, nh / group);
  if (l.mask) {
    MaskLayout& m = *l.mask;
    if (m.batch > 1) m.offset += b0 * m.stride_batch, m.batch = nb;
    if (m.heads > 1) m.offset += h0 * m.stride_head, m.heads = nh;
  }
  // Per-head values: the chunk's heads from h0 (the kernels index them by the chunk's heads; plan_fused
  // keeps per-batch slopes to one batch per chunk when it cuts the heads).
  if (l.alibi) {
    HeadValuesLayout& a = *l.alibi;
    if (a.batch > 1) a.offset += b0 * a.heads, a.batch = nb;
    a.offset += h0, a.heads = nh;
  }
  if (l.sinks) l.sinks->offset += h0, l.sinks->heads = nh;
  return l;
}

uint32_t fused_shared_bytes(const KernelConfig& c, int64_t dim_qk, int64_t dim_v) {
  // The shaders' own declarations (shaders/shader_abi.h): vec4 tiles of 16 bytes, scores of 4.
  const uint64_t dqk = uint64_t(dim_qk), dv = uint64_t(dim_v), br = c.rows, bc = c.keys_per_tile, tpr = c.threads_per_row;
  if (c.subgroup) return static_cast<uint32_t>(SUBGROUP_SHARED_BYTES(br, bc, dqk, dv));
  if (c.rowwise) return static_cast<uint32_t>(16 * (ROWWISE_K_TILE(bc, dqk) + ROWWISE_V_TILE(bc, dv)));
  return static_cast<uint32_t>(c.slot_bytes * (TILED_K_TILE(bc, dqk, tpr) + TILED_V_TILE(bc, dv, tpr)) +
                               4 * TILED_S_TILE(br, bc) + TILED_FLAG_BYTES);
}

uint64_t fused_loop_iterations(const KernelConfig& c, int64_t dim_qk, int64_t dim_v, uint64_t tiles) {
  const uint64_t wg = c.workgroup_size(), bc = c.keys_per_tile, tpr = c.threads_per_row;
  const uint64_t dqk4 = ceil_div(dim_qk, 4), dv4 = ceil_div(dim_v, 4);
  if (c.subgroup && c.decode) {
    // attention_subgroup_decode.comp: per tile of BC keys one iteration of the fast loop and, at
    // worst, BC / key groups of the careful loop (one key per group each); each loop also runs once
    // more than its count (lavapipe enters loops at least once). Its other loops are all unrolled; 64
    // to spare.
    return 2 + 64 + tiles * (1 + uint64_t(c.keys_per_tile / c.key_groups()));
  }
  if (c.subgroup) {
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
  if (c.rowwise) {
    const uint64_t per_tile = 1 + ceil_div(bc * dqk4, wg) + ceil_div(bc * dv4, wg)  // tile loop, K and V loads
                              + bc * (1 + 2 * dqk4)  // scores, each maybe twice (score.glsl: overflow)
                              + 4 * dv4                                             // rescale
                              + bc * (1 + dv4);                                     // p * V
    return dqk4 + 4 * dv4 + 4 * (1 + uint64_t(dim_v)) + 64 + tiles * per_tile;  // + Q load, init, writes
  }
  // attention_fused.comp (tiled): per tile the K and V loads, the score blocks of TPR keys (each
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

AttentionProblem check_attention_layouts(const DeviceInfo& device, const AttentionLayouts& layouts) {
  const AttentionProblem p = check_attention(layouts);
  if (p.dtype != DType::f32 && !device.storage_16bit)
    throw unsupported(std::string("dtype: ") + to_string(p.dtype) + " needs storageBuffer16BitAccess, which " +
                      device.name + " does not offer (or it was not enabled on the adopted device)");
  // The kernels compute a row's diagonal i + seq_k - seq_q, and the window's reach, in 32-bit ints.
  for (uint64_t s : {static_cast<uint64_t>(p.seq_q), static_cast<uint64_t>(p.seq_k)})
    if (s > kMaxSequence) throw Error("seq: " + str(s) + " exceeds the kernels' limit of 2^31 - 1");
  return p;
}

LaunchPlan plan_fused(const DeviceInfo& device, KernelVariant variant, const AttentionLayouts& layouts,
                      bool packing_allowed, const PagedKeys* paged, const VarlenRows* varlen) {
  LaunchPlan plan;
  plan.problem = check_attention_layouts(device, layouts);
  if (paged) plan.paged = *paged;
  if (varlen) plan.varlen = *varlen;
  const AttentionProblem& p = plan.problem;
  // The problem the kernel, tiles and splits are chosen for: p, or for a packed batch its sequences
  // as a dense batch of the longest lengths (every workgroup does at most that work).
  AttentionProblem shape = p;
  if (varlen) {
    shape.batch = varlen->batch;
    shape.seq_q = varlen->max_seq_q;
    shape.seq_k = varlen->max_seq_k;
  }

  // Chunks: everything at once when it fits; else as many whole batches as fit in one binding, and
  // when one batch alone does not, one batch at a time and as many whole GQA groups of heads as fit;
  // else (one KV head alone is larger than a binding) one GQA group with K and V bound by key range,
  // one range per dispatch (key_ranges below). The grid's y dimension (heads) caps the chunk too.
  plan.alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  // The combine's workgroup (a power of two): on a GPU enough invocations to share a row's hundreds
  // of splits (attention_combine.comp); on a CPU device 64.
  plan.combine_workgroup = device.is_cpu() ? 64u : std::bit_floor(std::min<uint32_t>(256u, device.max_workgroup_invocations));
  const uint64_t max_range = device.max_storage_buffer_range;
  const uint64_t max_x = device.max_workgroup_count[0], max_y = device.max_workgroup_count[1],
                 max_z = device.max_workgroup_count[2];
  const int64_t group = p.group_size();
  if (uint64_t(group) > max_y)
    throw unsupported("grid: a GQA group of " + str(group) + " query heads exceeds maxComputeWorkGroupCount[1] (" +
                      str(max_y) + ") of " + device.name);
  const int64_t max_heads = std::min<int64_t>(p.heads, int64_t(max_y) / group * group);
  plan.batch_chunk = std::min<int64_t>(p.batch, int64_t(max_z));
  plan.head_chunk = max_heads;
  bool key_ranges = false;
  // Per-batch ALiBi slopes are indexed b * heads + h with the chunk's heads: whole rows of them only.
  if (p.alibi_per_batch && plan.head_chunk < p.heads) plan.batch_chunk = 1;
  // A paged cache is bound whole (any key may sit in any page): plan_paged checked that it fits, and
  // only the other tensors are cut into chunks.
  const bool with_kv = !paged;
  if (varlen) {
    // A packed batch runs as one chunk: its sequences' rows are anywhere in the tensors, and each
    // workgroup's batch index is a sequence (the grid's z), not a batch of the tensors.
    if (plan.head_chunk < p.heads || !chunk_fits(layouts, plan.alignment, max_range, true))
      throw unsupported("binding: a packed variable-length call binds q, k, v, out and the LSE whole, and one of them "
                        "spans more than maxStorageBufferRange (" + str(max_range) + " bytes) of " + device.name +
                        " (q " + layouts.q.describe() + ", k " + layouts.k.describe() + ")");
    if (uint64_t(varlen->batch) > max_z)
      throw unsupported("grid: a packed batch of " + str(uint64_t(varlen->batch)) +
                        " sequences exceeds maxComputeWorkGroupCount[2] (" + str(max_z) + ") of " + device.name);
    plan.batch_chunk = varlen->batch;
  } else if (plan.head_chunk < p.heads || plan.batch_chunk < p.batch || !chunk_fits(layouts, plan.alignment, max_range, with_kv)) {
    // As many whole batches as fit (the bindings grow with the batches: a binary search).
    if (!chunk_fits(chunk_layouts(layouts, group, 0, plan.batch_chunk, 0, plan.head_chunk), plan.alignment, max_range, with_kv)) {
      int64_t fits = 1, fails = plan.batch_chunk;
      while (fails - fits > 1) {
        const int64_t mid = fits + (fails - fits) / 2;
        const bool ok = chunk_fits(chunk_layouts(layouts, group, 0, mid, 0, plan.head_chunk), plan.alignment, max_range, with_kv);
        (ok ? fits : fails) = mid;
      }
      plan.batch_chunk = fits;
    }
    while (plan.head_chunk > group &&
           !chunk_fits(chunk_layouts(layouts, group, 0, 1, 0, plan.head_chunk), plan.alignment, max_range, with_kv))
      plan.head_chunk -= group;
    if (!chunk_fits(chunk_layouts(layouts, group, 0, plan.batch_chunk, 0, plan.head_chunk), plan.alignment, max_range, with_kv)) {
      key_ranges = true;
      if (!chunk_fits(chunk_layouts(layouts, group, 0, 1, 0, group), plan.alignment, max_range, false))
        throw unsupported("binding: the queries, output, mask or LSE of one batch x one GQA group span more than "
                          "maxStorageBufferRange (" + str(max_range) + " bytes) of " + device.name + " (q " +
                          layouts.q.describe() + ")");
    }
  }

  // On CPU devices rowwise wins once its 32-row workgroups have rows to work on; below that (decode,
  // short chunks) the tiled kernel's lanes share few rows instead (measured on lavapipe, see
  // bench/results/README.md).
  // The subgroup kernel (where the device has subgroup shuffles) is about 5x faster than rowwise on
  // lavapipe for prefill at d64 and d128, 4-6x at d256, and for decode (seq_q < 16: a GQA group's
  // heads packed into its rows, one row per invocation) 4-15x faster than tiled
  // (bench/results/README.md). Every head dim takes it (up to kMaxHeadDim, padded to a subgroup of
  // at most 128 lanes, it always fits): at d256 each of its two prefill pipelines JITs in under 2 s on Mesa 22.3.6 (1.3 and 0.8 s),
  // where rowwise now takes 2.3 s or more ("d256 prefill: the subgroup kernel").
  // Decode (a packed tile of up to kDecodeMaxTileRows rows) runs the subgroup kernel's decode form
  // up to 256 dims (a GQA group's query rows in every lane, the lanes across the head dim and keys, K
  // and V read once in 16-byte loads): on GPUs whose subgroups have one size (NVIDIA's 32), or whose
  // pipelines can require one (AMD, Intel: 32 lanes, subgroup_kernel_lanes), where the tiled kernel's
  // decode tile is a prefill tile with the group's few useful rows (bench/results/README.md, "GPU
  // decode form"); and on CPU devices past 128 dims too, where it is 11x faster than tiled at d256
  // on lavapipe 22.3.6 and 4x on 25.0.7 (GQA 32/8, 32k keys) and JITs in about as long as the d128
  // prefill pipeline (bench/results/README.md, "d256 decode"). A CPU device's seq_q of 16 or more is
  // prefill.
  const bool cpu_auto = variant == KernelVariant::automatic && device.is_cpu();
  const bool cpu_prefill = cpu_auto && shape.seq_q >= 16;
  const uint32_t lanes = subgroup_kernel_lanes(device);
  const bool subgroup_runs = lanes != 0;
  const bool decode_form = variant == KernelVariant::automatic && lanes != 0 && packing_allowed && !cpu_prefill &&
                           uint64_t(shape.seq_q) * uint64_t(group) <= kDecodeMaxTileRows &&
                           std::max(p.dim_qk, p.dim_v) <= 256;
  const bool subgroup = variant == KernelVariant::subgroup || (cpu_auto && subgroup_runs) || decode_form;
  const bool rowwise = variant == KernelVariant::rowwise || (cpu_prefill && !subgroup);
  plan.config = subgroup  ? choose_subgroup_config(device, shape, packing_allowed)
                : rowwise ? choose_rowwise_config(device, shape)
                          : choose_tiled_config(device, shape, packing_allowed);
  // O's rows in whole 16-byte chunks (below: the decode form writes them so when the call is not split).
  bool out_chunked = false;
  if (plan.config.decode) {
    // 16-byte chunks: whole in every row when the dims and strides are multiples of a chunk (the
    // binding offsets are checked at replay: CommandList picks the element-wise pipeline there).
    const int64_t chunk = kDecodeChunkBytes / int64_t(dtype_size(p.dtype));
    const auto chunked = [&](const TensorLayout& t) {
      return t.dim % chunk == 0 && t.stride_batch % chunk == 0 && t.stride_head % chunk == 0 &&
             t.stride_seq % chunk == 0;
    };
    // (q8_0 K and V are read in runs of a block instead: kv_values.glsl.)
    plan.config.vec_loads = p.kv_quant == KvQuant::none && chunked(layouts.q) && chunked(layouts.k) && chunked(layouts.v);
    out_chunked = chunked(layouts.out);
    // (Dense K or V whose rows of a head have a row's length or more of other data between them:
    // BSHD tensors.)
    const auto interleaved = [](const TensorLayout& t) { return t.stride_seq >= 2 * t.dim; };
    if ((paged || varlen || interleaved(layouts.k) || interleaved(layouts.v)) && device.is_cpu())
      plan.config.prefetch_keys = kCpuPrefetchKeys;
  }
  const KernelConfig& c = plan.config;
  // Packed: the tiles cover the group's heads x seq_q rows, and the grid's y the KV heads.
  plan.query_tiles = static_cast<uint32_t>(ceil_div(shape.seq_q * int64_t(c.heads_per_workgroup(group)), c.rows));

  // Split the key range: for parallelism when (batch, head, query-tile) workgroups are few (decode),
  // on llvmpipe so that no invocation loops more than its limit allows, and by binding size when K
  // and V are bound by key range.
  // A window bounded on both sides (causal is a right side of 0): a workgroup's rows see at most their
  // band of keys, so the splits cut the band, counted from each workgroup's first key (MOD_BAND_SPLITS),
  // not the whole key range: the work per workgroup is the window's, however long the sequence. Not
  // with K and V bound by key range (binding_key counts splits from key 0).
  uint64_t keys_visited = uint64_t(shape.seq_k);
  if (p.window_left >= 0 && p.window_right >= 0 && !key_ranges) {
    // Query rows of one head a tile spans (packed tiles: at most seq_q).
    const uint64_t span =
        std::min<uint64_t>(uint64_t(shape.seq_q), c.pack_group ? uint64_t(shape.seq_q) : c.rows / c.heads);
    // (Sides are up to 2^63 - 1: each is capped at the keys, past which it bounds nothing, before the sum.)
    const uint64_t band = span + std::min<uint64_t>(uint64_t(p.window_left), keys_visited) +
                          std::min<uint64_t>(uint64_t(p.window_right), keys_visited);
    if (band < keys_visited) {
      keys_visited = band;
      plan.band_splits = true;
    }
  }
  // (A band starts anywhere: it may touch one tile more than its length fills.)
  const uint64_t tiles = ceil_div(keys_visited, c.keys_per_tile) + (plan.band_splits ? 1 : 0);
  uint64_t max_tiles = tiles;
  if (device.is_llvmpipe) {
    const uint64_t one = fused_loop_iterations(c, p.dim_qk, p.dim_v, 1);
    const uint64_t zero = fused_loop_iterations(c, p.dim_qk, p.dim_v, 0);
    max_tiles = std::max<uint64_t>(1, (kLlvmpipeLoopBudget - zero) / (one - zero));
  }
  uint64_t keys_per_binding = UINT64_MAX;
  if (key_ranges) {
    // Keys of one KV head that one binding holds from any start: (n - 1) * stride_seq + dim elements.
    // (q8_0: whole blocks, 34 bytes per 32 elements.)
    const uint64_t usable = max_range - plan.alignment - 4;
    const uint64_t elements = p.kv_quant == KvQuant::q8_0 ? usable / kQ8_0BlockBytes * kQ8_0BlockElements
                                                          : usable / dtype_size(p.dtype);
    for (const TensorLayout* t : {&layouts.k, &layouts.v}) {
      const uint64_t dim = uint64_t(t->dim), stride = std::max<uint64_t>(uint64_t(t->stride_seq), 1);
      keys_per_binding = std::min(keys_per_binding, elements < dim ? 0 : (elements - dim) / stride + 1);
    }
    if (keys_per_binding < c.keys_per_tile)
      throw unsupported("binding: one tile of " + str(c.keys_per_tile) + " keys of k " + layouts.k.describe() +
                        " spans more than maxStorageBufferRange (" + str(max_range) + " bytes) of " + device.name);
    max_tiles = std::min<uint64_t>(max_tiles, keys_per_binding / c.keys_per_tile);
  }
  const bool gpu_decode_form = !device.is_cpu() && c.decode;
  // Calls whose sequences have their own key counts, known only on the device (a work list follows
  // them when the call splits: below).
  const bool own_lengths = paged || varlen || (layouts.has_kv_lengths && !layouts.mask);
  const uint64_t target = device.is_cpu() ? kCpuTargetWorkgroups
                          : gpu_decode_form ? kGpuDecodeTargetWorkgroups
                                            : kGpuTargetWorkgroups;
  // The splits count from all query tiles of a chunk, not one range's: ranges are cut only when the
  // partials of all tiles exceed the workspace budget, and then one range's split dispatches still
  // hold about budget / (BR * (dim_v + 2) * 4) >= 1000 workgroups (BR <= 32, dim_v <= 256), far
  // above the target.
  auto split_chunk = [&]() {
    const uint64_t base_workgroups =
        uint64_t(plan.query_tiles) * (plan.head_chunk / c.heads_per_workgroup(group)) * plan.batch_chunk;
    uint64_t splits = ceil_div(tiles, max_tiles);
    // At least `n` splits, but never more than one per key tile.
    const auto at_least = [&](uint64_t n) { splits = std::max(splits, std::min(tiles, n)); };
    const auto keys_at_most = [&](uint64_t keys) { at_least(ceil_div(tiles * c.keys_per_tile, keys)); };
    if (p.num_splits > 0) {
      at_least(p.num_splits);  // the caller's request
    } else {
      if (base_workgroups < target) {
        uint64_t wanted = ceil_div(target, base_workgroups);
        // (A short key range stays in splits of enough keys to be worth the combine.)
        if (gpu_decode_form) wanted = std::min(wanted, ceil_div(tiles * c.keys_per_tile, kGpuDecodeMinKeysPerSplit));
        at_least(wanted);
        if (!device.is_cpu()) keys_at_most(gpu_decode_form ? kGpuDecodeKeysPerSplit : kGpuKeysPerSplit);
      }
      if ((paged || (varlen && c.decode)) && device.is_cpu()) keys_at_most(kCpuPagedKeysPerSplit);
      if (own_lengths && c.decode && device.is_cpu()) at_least(kCpuOwnLengthsMinSplits);
    }
    const uint64_t tiles_per_split = ceil_div(tiles, splits);
    plan.splits = static_cast<uint32_t>(ceil_div(tiles, tiles_per_split));
    plan.keys_per_split = static_cast<uint32_t>(tiles_per_split * c.keys_per_tile);
  };
  // Bytes of split-KV partials (O and LSE of every split) that one query tile of a chunk needs, and
  // the budget a range of query tiles must stay within: the workspace is align_up(partial O) +
  // partial LSE + one alignment (record_chunk's base), so two alignments are set aside.
  const auto tile_workspace_bytes = [&]() -> uint64_t {
    // (With the careful pass, its ballots too: 16 bytes a workgroup, shader_abi.h.)
    const uint64_t workgroups = uint64_t(plan.splits) * plan.batch_chunk * (plan.head_chunk / c.heads_per_workgroup(group));
    return (plan.splits > 1 ? workgroups * c.rows * (uint64_t(p.dim_v) + 2) * 4 : 0) + (c.careful_pass() ? workgroups * 16 : 0);
  };
  const uint64_t budget = std::min<uint64_t>(fused_workspace_budget, max_range);
  // (A third alignment for the careful pass's ballots, which start aligned after the rest.)
  const uint64_t reserved = (c.careful_pass() ? 3 : 2) * plan.alignment;
  const uint64_t usable = budget > reserved ? budget - reserved : 0;
  split_chunk();
  // One query tile of the chunk over budget (many heads, a long key range): fewer batches, then fewer
  // whole GQA groups per chunk, down to one query tile of one group, which runs even when it alone
  // exceeds the budget (the binding checks below still apply).
  // (A packed batch keeps its one chunk: its partials are sized by its rows, below.)
  if (!varlen && tile_workspace_bytes() > usable && plan.batch_chunk > 1) {
    plan.batch_chunk = 1;
    split_chunk();
  }
  while (!varlen && tile_workspace_bytes() > usable && plan.head_chunk > group) {
    plan.head_chunk -= group;
    split_chunk();
  }
  // An unsplit decode form writes O in chunks too; split, it writes the partials (whole chunks in the
  // workspace) and the combine writes O.
  if (plan.splits == 1 && !out_chunked) plan.config.vec_loads = false;
  // Query-tile ranges: the split dispatches and the combine run one range of query tiles at a time,
  // reusing one workspace sized for one range (record_chunk), so the workspace no longer grows with
  // seq_q x splits (that is, seq_q x seq_k). A range is also at most maxComputeWorkGroupCount[0]
  // tiles: the grid's x dimension, split or not.
  // Below the fixed budget a range's partials also stay proportional to the chunk's own output, so
  // that the fused path's memory grows linearly with the sequence at every size, not only past 32
  // MiB: at most O's bytes in f32 / kOutputPerWorkspace, but never less than the partials of
  // kRangeWorkgroupsPerTarget x the device's target workgroups (each with all its splits), so a range
  // still keeps the device as busy as the unsplit problem wants.
  const uint64_t o_f32_bytes = uint64_t(plan.batch_chunk) * plan.head_chunk * uint64_t(p.seq_q) * uint64_t(p.dim_v) * 4;
  const uint64_t busy_bytes = kRangeWorkgroupsPerTarget * target * (c.rows * (uint64_t(p.dim_v) + 2) * 4 + (c.careful_pass() ? 16 : 0));
  // Packed tiles (seq_q below one tile) keep one range within the fixed budget: see below.
  const uint64_t range_budget =
      c.heads_per_workgroup(group) > 1 ? usable : std::min(usable, std::max(busy_bytes, o_f32_bytes / kOutputPerWorkspace));
  uint64_t tiles_per_range = std::min<uint64_t>(plan.query_tiles, max_x);
  if (tile_workspace_bytes() > 0 && !varlen)
    tiles_per_range = std::min(tiles_per_range, std::max<uint64_t>(1, range_budget / tile_workspace_bytes()));
  // A packed batch's partials are indexed by packed row, which one range of query tiles (of every
  // sequence) covers only whole: one range, its workspace linear in total_q x splits.
  if (varlen && tiles_per_range < plan.query_tiles)
    throw unsupported("grid: " + str(plan.query_tiles) + " query tiles of max_seqlen_q " + str(uint64_t(shape.seq_q)) +
                      " exceed maxComputeWorkGroupCount[0] (" + str(max_x) + ") of " + device.name);
  plan.tiles_per_range = static_cast<uint32_t>(tiles_per_range);
  plan.query_ranges = static_cast<uint32_t>(ceil_div(plan.query_tiles, tiles_per_range));
  // The packed kernel's tiles are not query-row tiles: its partials (partial_row) and the combine
  // assume one range. Past that (a huge split count), plan without packing.
  // (So are the tiled kernel's when it packs heads.)
  if (c.heads_per_workgroup(group) > 1 && plan.query_ranges > 1)
    return plan_fused(device, variant, layouts, false, paged, varlen);
  // Rows per (batch, head) of the largest (first) range: the last may hold fewer.
  // (A packed batch's: every packed row of every head, batch 1.)
  const uint64_t range_rows = std::min<uint64_t>(tiles_per_range * c.rows, uint64_t(p.seq_q));
  const uint64_t chunk_range_rows =
      varlen ? uint64_t(p.heads) * uint64_t(p.seq_q) : uint64_t(plan.batch_chunk) * plan.head_chunk * range_rows;
  plan.partial_o_bytes = plan.splits > 1 ? plan.splits * chunk_range_rows * uint64_t(p.dim_v) * 4 : 0;
  plan.partial_lse_bytes = plan.splits > 1 ? plan.splits * chunk_range_rows * 8 : 0;  // (max, sum) per row

  // Splits per dispatch: those whose keys one binding holds, and as many as the grid's z dimension
  // (batches x splits) allows; the rest go to further dispatches (split_base in the shaders).
  plan.splits_per_dispatch = plan.splits;
  if (key_ranges) plan.splits_per_dispatch = uint32_t(std::min<uint64_t>(plan.splits, keys_per_binding / plan.keys_per_split));
  plan.splits_per_dispatch = uint32_t(std::min<uint64_t>(plan.splits_per_dispatch, max_z / plan.batch_chunk));
  // The workspace holds, each region aligned: the split-KV partials (O, then LSE), the work list, and
  // the careful pass's ballots (one uvec4 per workgroup of the largest dispatch, shader_abi.h) after
  // everything else. `used`: the bytes before the ballots.
  const uint64_t redo_bytes =
      c.careful_pass() ? uint64_t(plan.tiles_per_range) *
                             (uint64_t(plan.head_chunk) / c.heads_per_workgroup(group)) *
                             (varlen ? uint64_t(varlen->batch) : uint64_t(plan.batch_chunk)) * plan.splits_per_dispatch * 16
                       : 0;
  const auto workspace_for = [&](uint64_t used) -> uint64_t {
    if (redo_bytes == 0) return used ? used + plan.alignment : 0;
    return align_up(used, plan.alignment) + redo_bytes + plan.alignment;
  };
  uint64_t used = plan.splits > 1 ? align_up(plan.partial_o_bytes, plan.alignment) + plan.partial_lse_bytes : 0;
  plan.workspace_bytes = workspace_for(used);

  if (plan.splits > 1) {
    for (auto [name, bytes] : {std::pair{"partial O", plan.partial_o_bytes}, std::pair{"partial LSE", plan.partial_lse_bytes}})
      if (bytes > device.max_storage_buffer_range || bytes / 4 > kMaxIndex)
        throw unsupported(std::string("workspace: split-KV ") + name + " of one query tile of one GQA group (" +
                          str(plan.splits) + " splits) needs " + str(bytes) +
                          " bytes, more than one binding can hold on " + device.name + " (" +
                          str(device.max_storage_buffer_range) + ")");
    // The splits of a paged call, a packed batch, or a dense call with key lengths (and no mask: the
    // list takes the mask's binding), follow each sequence's own keys (WorkListPlan), where one dispatch per
    // range covers them and the items fit the list's (sequence << 16 | split) words and the grid.
    const uint64_t max_items = uint64_t(plan.batch_chunk) * plan.splits;
    if (own_lengths && !plan.band_splits && plan.splits_per_dispatch == plan.splits && plan.splits < 65536 &&
        plan.batch_chunk < 65536 && max_items <= max_z) {
      WorkListPlan w;
      w.max_items = uint32_t(max_items);
      // Items as short as kCpuMinKeysPerItem on a CPU device, and on a GPU as the decode form's least
      // split (or a key tile), so that the items come near the device's target however short the
      // sequences; and at most the planned keys per split (lavapipe's loop limit, the paged cap).
      const uint64_t least = device.is_cpu() ? kCpuMinKeysPerItem
                             : gpu_decode_form ? kGpuDecodeMinKeysPerSplit
                                               : c.keys_per_tile;
      w.min_keys = uint32_t(std::min<uint64_t>(align_up(least, c.keys_per_tile), plan.keys_per_split));
      const uint64_t workgroups_per_item =
          uint64_t(plan.tiles_per_range) * (plan.head_chunk / c.heads_per_workgroup(group));
      w.target_items = uint32_t(std::clamp<uint64_t>(ceil_div(target, workgroups_per_item), 1,
                                                     max_items - uint64_t(plan.batch_chunk)));
      w.offset = align_up(used, plan.alignment);
      w.words = WORK_LIST_ITEMS + max_items + uint64_t(plan.batch_chunk) + 1;
      // (Only within the workspace bound: the list is 4 bytes a slot, a partial row at least 12.)
      const uint64_t with_list = workspace_for(w.offset + w.words * 4);
      if (with_list <= budget) {
        used = w.offset + w.words * 4;
        plan.workspace_bytes = with_list;
        plan.work_list = w;
      }
    }
    if (ceil_div(chunk_range_rows, max_x) > max_y)
      throw unsupported("grid: " + str(chunk_range_rows) + " rows exceed what the combine dispatch can cover on " +
                        device.name);
  }
  if (redo_bytes > 0) {
    if (redo_bytes > max_range)
      throw unsupported("workspace: the careful pass's " + str(redo_bytes / 16) + " workgroups need " + str(redo_bytes) +
                        " bytes, more than one binding can hold on " + device.name + " (" + str(max_range) + ")");
    plan.redo_offset = align_up(used, plan.alignment);
    plan.redo_bytes = redo_bytes;
  }
  return plan;
}

}  // namespace vkattn::detail
