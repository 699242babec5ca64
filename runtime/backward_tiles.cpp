#include "backward_tiles.hpp"

#include <algorithm>
#include <cstdlib>

#include "int_math.hpp"
#include "shader_abi.h"

namespace vkattn::detail {
namespace {

// What an invocation holds in registers: at most this many f32 accumulators (the dK/dV kernel's dK and
// dV slices, the dQ kernel's dQ slice). Past it a GPU spills, and lavapipe's JIT time grows with
// private arrays' size (docs/devices.md).
constexpr uint64_t kMaxAccumulators = 64;

bool fits(const DeviceInfo& device, const BackwardTiles& t, uint32_t dim_qk, uint32_t dim_v) {
  if (t.workgroup > device.max_workgroup_invocations) return false;
  if (t.workgroup % t.rows != 0 || t.workgroup % t.keys != 0) return false;
  if (t.workgroup > uint64_t(t.rows) * t.keys) return false;  // (an invocation without a pair would idle in the tile)
  if (t.shared_bytes > device.max_shared_memory) return false;
  const uint64_t lanes_per_key = t.workgroup / t.keys, lanes_per_row = t.workgroup / t.rows;
  const uint64_t kv_accumulators = ceil_div(dim_qk, lanes_per_key) + ceil_div(dim_v, lanes_per_key);
  return kv_accumulators <= kMaxAccumulators && ceil_div(dim_qk, lanes_per_row) <= kMaxAccumulators;
}

// Prefer more pairs per tile (each K, V, Q, dO value loaded into shared memory serves more of them),
// then square tiles (both kernels reuse both blocks), then on GPUs wider workgroups (more invocations
// to hide the loads behind), on CPU devices narrower ones (lavapipe runs a workgroup of several
// subgroups far slower, docs/devices.md: 2.5x faster at 32 than at 256 invocations, d64 f16).
bool better(const DeviceInfo& device, const BackwardTiles& a, const BackwardTiles& b) {
  const uint64_t pairs_a = uint64_t(a.rows) * a.keys, pairs_b = uint64_t(b.rows) * b.keys;
  if (pairs_a != pairs_b) return pairs_a > pairs_b;
  const uint32_t short_a = std::min(a.rows, a.keys), short_b = std::min(b.rows, b.keys);
  if (short_a != short_b) return short_a > short_b;
  return device.is_cpu() ? a.workgroup < b.workgroup : a.workgroup > b.workgroup;
}

}  // namespace

uint64_t backward_tile_shared_bytes(uint32_t rows, uint32_t keys, uint32_t dim_qk, uint32_t dim_v) {
  const uint64_t BR = rows, BC = keys, DQK = dim_qk, DV = dim_v;
  return BACKWARD_TILE_FLOATS(BR, BC, DQK, DV) * sizeof(float);
}

std::optional<BackwardTiles> choose_backward_tiles(const DeviceInfo& device, uint32_t dim_qk, uint32_t dim_v) {
  std::optional<BackwardTiles> best;
  for (uint32_t workgroup : {256u, 128u, 64u, 32u})
    for (uint32_t rows : {64u, 32u, 16u, 8u, 4u})
      for (uint32_t keys : {64u, 32u, 16u, 8u, 4u}) {
        const BackwardTiles t{rows, keys, workgroup, backward_tile_shared_bytes(rows, keys, dim_qk, dim_v)};
        if (fits(device, t, dim_qk, dim_v) && (!best || better(device, t, *best))) best = t;
      }
  return best;
}

BackwardTileIterations backward_tile_iterations(const BackwardTiles& t, uint32_t dim_qk, uint32_t dim_v) {
  // A strided cooperative load of n values: ceil(n / workgroup) iterations and the loop's entry.
  const auto load = [&](uint64_t n) { return ceil_div(n, t.workgroup) + 1; };
  const uint64_t tile_steps = ceil_div(uint64_t(t.rows) * t.keys, t.workgroup) + 1;
  // The loops over dims and slices are unrolled (their bounds are constants), so they do not count
  // (the portable kernels' splits, one iteration a row or key, rely on the same); the zeroing and the
  // stores of the accumulators are counted all the same, to be safe.
  const uint64_t lanes_per_key = t.workgroup / t.keys, lanes_per_row = t.workgroup / t.rows;
  const uint64_t kv_slices = ceil_div(dim_qk, lanes_per_key) + ceil_div(dim_v, lanes_per_key);
  const uint64_t q_slices = ceil_div(dim_qk, lanes_per_row);
  BackwardTileIterations it;
  // The dK/dV kernel: the key block's loads, the accumulators' zeroing and stores, the head loop; per
  // row block its iteration, the query block's loads, the tile, and the accumulation over BR rows.
  it.kv_fixed = load(uint64_t(t.keys) * dim_qk) + load(uint64_t(t.keys) * dim_v) + 3 * kv_slices + 4;
  it.kv_per_block = 1 + load(uint64_t(t.rows) * dim_qk) + load(uint64_t(t.rows) * dim_v) + tile_steps + t.rows + 1;
  // The dQ kernel: the row block's loads, zeroing and stores, the walk's entry; per key block its
  // iteration, the key block's loads, the tile, and the accumulation over BC keys.
  it.q_fixed = load(uint64_t(t.rows) * dim_qk) + load(uint64_t(t.rows) * dim_v) + 3 * q_slices + 4;
  it.q_per_block = 1 + load(uint64_t(t.keys) * dim_qk) + load(uint64_t(t.keys) * dim_v) + tile_steps + t.keys + 1;
  return it;
}

uint32_t tiled_split_rows(const BackwardTiles& t, uint32_t dim_qk, uint32_t dim_v, uint64_t group, uint32_t rows,
                          uint64_t budget) {
  const BackwardTileIterations it = backward_tile_iterations(t, dim_qk, dim_v);
  const uint64_t overhead = it.kv_fixed + 2 * group;  // (each head's loop iteration and its block loop's entry)
  const uint64_t blocks = budget > overhead ? (budget - overhead) / (group * it.kv_per_block) : 0;
  const uint64_t all_blocks = ceil_div(std::max<uint32_t>(rows, 1), t.rows);
  return uint32_t(std::clamp<uint64_t>(blocks, 1, all_blocks) * t.rows);
}

uint32_t tiled_split_keys(const BackwardTiles& t, uint32_t dim_qk, uint32_t dim_v, uint32_t keys, uint64_t budget) {
  const BackwardTileIterations it = backward_tile_iterations(t, dim_qk, dim_v);
  const uint64_t blocks = budget > it.q_fixed ? (budget - it.q_fixed) / it.q_per_block : 0;
  const uint64_t all_blocks = ceil_div(std::max<uint32_t>(keys, 1), t.keys);
  return uint32_t(std::clamp<uint64_t>(blocks, 1, all_blocks) * t.keys);
}

}  // namespace vkattn::detail
