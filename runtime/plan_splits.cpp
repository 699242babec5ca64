// Steps plan_key_tiles, split_rules and split_keys (plan_steps.hpp): the key range is split (split-KV)
// for parallelism when (batch, head, query-tile) workgroups are few (decode), on llvmpipe so that no
// invocation loops more than its limit allows, and by binding size when K and V are bound by key range.
#include <algorithm>
#include <string>

#include "int_math.hpp"
#include "kv_storage.hpp"
#include "llvmpipe_limits.hpp"
#include "plan_steps.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// A paged cache, or a packed batch's decode, on a CPU device: at most this many keys per split.
// Inside a page (and in a packed batch's (total_k, kv_heads, dim) K and V) the keys of one KV head
// are kv_heads * dim elements apart, and a decode workgroup streams one head: over a long key
// range it reads 256 of every 2048 bytes (8 KV heads, d128, f16), which the CPU's prefetchers do not
// follow. With short splits, the workgroups of all KV heads (consecutive in the grid) read one narrow
// window of the cache at about the same time. Measured on lavapipe (the benchmark notebook (docs/performance.md), issue
// 14): batch 1, 32k keys, GQA 32/8, d128, f16, page 16: 75-102 ms with the default splits, 54 ms
// with 1024 keys per split, 53-58 ms for dense K/V. A packed batch (32k + 7 x 512 keys, the same
// heads), decode: 100 -> 50 ms (2 splits before).
constexpr uint64_t kCpuPagedKeysPerSplit = 1024;
// Workgroups a CPU device wants in flight before splitting the key range for parallelism alone.
constexpr uint64_t kCpuTargetWorkgroups = 16;
// A work list on a CPU device (WorkListPlan): the fewest keys of an item. On lavapipe a workgroup costs
// about 5 us even with no key (seven 1-key sequences beside a 32k one, splits by capacity: 10 ms more
// for 1736 empty workgroups), one KV head's key about 0.2 us (GQA 32/8, d128, f16).
constexpr uint64_t kCpuMinKeysPerItem = 256;

// A window bounded on both sides (causal is a right side of 0): a workgroup's rows see at most their
// band of keys, so the splits cut the band, counted from each workgroup's first key (MOD_BAND_SPLITS),
// not the whole key range: the work per workgroup is the window's, however long the sequence. Not
// with K and V bound by key range (binding_key counts splits from key 0).
void visit_band(const PlanInputs& in, const KernelConfig& c, uint64_t& keys_visited, bool& band_splits) {
  const AttentionProblem& p = in.problem;
  const AttentionProblem& shape = in.shape;
  // Query rows of one head a tile spans (packed tiles: at most seq_q).
  const uint64_t span = std::min<uint64_t>(uint64_t(shape.seq_q), c.pack_group ? uint64_t(shape.seq_q) : c.rows / c.heads);
  // (Sides are up to 2^63 - 1: each is capped at the keys, past which it bounds nothing, before the sum.)
  const uint64_t band = span + std::min<uint64_t>(uint64_t(p.window_left), keys_visited) +
                        std::min<uint64_t>(uint64_t(p.window_right), keys_visited);
  if (band < keys_visited) {
    keys_visited = band;
    band_splits = true;
  }
}

// Keys of one KV head that one binding holds from any start: (n - 1) * stride_seq + dim elements.
// (q8_0: whole blocks, 34 bytes per 32 elements.)
uint64_t keys_per_binding(const PlanInputs& in, const KernelConfig& c, uint64_t alignment) {
  const uint64_t max_range = in.device.max_storage_buffer_range;
  const uint64_t usable = max_range - alignment - 4;
  const uint64_t elements = in.problem.kv_quant == KvQuant::q8_0 ? usable / kQ8_0BlockBytes * kQ8_0BlockElements
                                                                 : usable / dtype_size(in.problem.dtype);
  uint64_t keys = UINT64_MAX;
  for (const TensorLayout* t : {&in.layouts.k, &in.layouts.v}) {
    const uint64_t dim = uint64_t(t->dim), stride = std::max<uint64_t>(uint64_t(t->stride_seq), 1);
    keys = std::min(keys, elements < dim ? 0 : (elements - dim) / stride + 1);
  }
  if (keys < c.keys_per_tile)
    throw unsupported("binding: one tile of " + str(c.keys_per_tile) + " keys of k " + in.layouts.k.describe() +
                      " spans more than maxStorageBufferRange (" + str(max_range) + " bytes) of " + in.device.name);
  return keys;
}

}  // namespace

KeyTiles plan_key_tiles(const PlanInputs& in, const KernelConfig& c, bool key_ranges, uint64_t alignment) {
  const AttentionProblem& p = in.problem;
  KeyTiles keys;
  uint64_t keys_visited = uint64_t(in.shape.seq_k);
  if (p.window_left >= 0 && p.window_right >= 0 && !key_ranges) visit_band(in, c, keys_visited, keys.band_splits);
  // (A band starts anywhere: it may touch one tile more than its length fills.)
  keys.tiles = ceil_div(keys_visited, c.keys_per_tile) + (keys.band_splits ? 1 : 0);
  keys.max_tiles = keys.tiles;
  // lavapipe ends an invocation's loops silently past its limit: a split's tiles stay under it.
  if (in.device.is_llvmpipe) {
    const uint64_t one = fused_loop_iterations(c, p.dim_qk, p.dim_v, 1);
    const uint64_t zero = fused_loop_iterations(c, p.dim_qk, p.dim_v, 0);
    keys.max_tiles = std::max<uint64_t>(1, (kLlvmpipeLoopBudget - zero) / (one - zero));
  }
  if (key_ranges) {
    keys.keys_per_binding = keys_per_binding(in, c, alignment);
    keys.max_tiles = std::min<uint64_t>(keys.max_tiles, keys.keys_per_binding / c.keys_per_tile);
  }
  return keys;
}

SplitRules split_rules(const PlanInputs& in, const KernelConfig& c, const KeyTiles& keys) {
  const FusedKernelTraits& kernel = c.traits();
  const bool cpu = in.device.is_cpu();
  SplitRules r;
  r.tiles = keys.tiles;
  r.max_tiles = keys.max_tiles;
  r.keys_per_tile = c.keys_per_tile;
  r.requested = in.problem.num_splits;
  r.target_workgroups = cpu ? kCpuTargetWorkgroups : kernel.gpu_target_workgroups;
  if (!cpu) {
    r.min_parallel_keys = kernel.gpu_min_keys_per_split;
    r.max_keys_below_target = kernel.gpu_max_keys_per_split;
  }
  if (cpu && (in.paged || (in.varlen && kernel.cpu_packed_keys_cap))) r.max_keys = kCpuPagedKeysPerSplit;
  if (cpu && in.own_lengths()) r.min_splits = kernel.cpu_own_lengths_min_splits;
  // Items as short as kCpuMinKeysPerItem on a CPU device, and on a GPU as the kernel's least split
  // for parallelism (or a key tile), so that a work list's items come near the device's target
  // however short the sequences.
  r.work_list_min_keys = cpu                             ? kCpuMinKeysPerItem
                         : kernel.gpu_min_keys_per_split ? kernel.gpu_min_keys_per_split
                                                         : c.keys_per_tile;
  return r;
}

KeySplits split_keys(const SplitRules& r, uint64_t base_workgroups) {
  uint64_t splits = ceil_div(r.tiles, r.max_tiles);
  // At least `n` splits, but never more than one per key tile.
  const auto at_least = [&](uint64_t n) { splits = std::max(splits, std::min(r.tiles, n)); };
  const auto keys_at_most = [&](uint64_t keys) { at_least(ceil_div(r.tiles * r.keys_per_tile, keys)); };
  if (r.requested > 0) {
    at_least(r.requested);  // the caller's request
  } else {
    if (base_workgroups < r.target_workgroups) {
      uint64_t wanted = ceil_div(r.target_workgroups, base_workgroups);
      // (A short key range stays in splits of enough keys to be worth the combine.)
      if (r.min_parallel_keys) wanted = std::min(wanted, ceil_div(r.tiles * r.keys_per_tile, r.min_parallel_keys));
      at_least(wanted);
      if (r.max_keys_below_target) keys_at_most(r.max_keys_below_target);
    }
    if (r.max_keys) keys_at_most(r.max_keys);
    if (r.min_splits) at_least(r.min_splits);
  }
  const uint64_t tiles_per_split = ceil_div(r.tiles, splits);
  KeySplits s;
  s.splits = static_cast<uint32_t>(ceil_div(r.tiles, tiles_per_split));
  s.keys_per_split = static_cast<uint32_t>(tiles_per_split * r.keys_per_tile);
  return s;
}

}  // namespace vkattn::detail
