// The tiled form of the backward pass's dK/dV and dQ kernels (attention_backward_kv_tiled.comp,
// attention_backward_q_tiled.comp): the tile sizes a device takes, and the splits that keep each
// invocation's loop iterations within lavapipe's budget. A pure function of the device description
// and the problem's sizes, like the rest of the planner; none where no tile fits (a tiny shared
// memory), and the portable kernels run instead.
#pragma once

#include <cstdint>
#include <optional>

#include "vkattn/context.hpp"

namespace vkattn::detail {

// One configuration for both kernels: they hold the same blocks (BACKWARD_TILE_FLOATS, shader_abi.h).
struct BackwardTiles {
  uint32_t rows = 0;       // BR: query rows per block (the dQ kernel's workgroup owns one)
  uint32_t keys = 0;       // BC: keys per block (the dK/dV kernel's workgroup owns one)
  uint32_t workgroup = 0;  // invocations, a multiple of both
  uint64_t shared_bytes = 0;
};

// The largest tiles (BR x BC pairs) that fit `device`'s shared memory and invocations at these head
// dims, with each invocation's accumulators and tile pairs few enough for its registers; nullopt where
// none fits.
std::optional<BackwardTiles> choose_backward_tiles(const DeviceInfo& device, uint32_t dim_qk, uint32_t dim_v);

// The shared memory of a configuration, in bytes (BACKWARD_TILE_FLOATS).
uint64_t backward_tile_shared_bytes(uint32_t rows, uint32_t keys, uint32_t dim_qk, uint32_t dim_v);

// Upper bounds of one invocation's loop iterations, counted as lavapipe counts them (every iteration
// of every loop, one more for each loop entered): the dK/dV kernel's per row block of one query head
// and its own before the walk, the dQ kernel's per key block and before the walk.
struct BackwardTileIterations {
  uint64_t kv_per_block = 0, kv_fixed = 0;
  uint64_t q_per_block = 0, q_fixed = 0;
};
BackwardTileIterations backward_tile_iterations(const BackwardTiles& tiles, uint32_t dim_qk, uint32_t dim_v);

// The query rows of one split of the dK/dV kernel's walk (a multiple of BR, each of `group` heads
// walked) and the keys of one split of the dQ kernel's (a multiple of BC), such that an invocation's
// iterations stay within `budget`; at least one block each, and at most `rows` (`keys`) rounded up.
uint32_t tiled_split_rows(const BackwardTiles& tiles, uint32_t dim_qk, uint32_t dim_v, uint64_t group, uint32_t rows,
                          uint64_t budget);
uint32_t tiled_split_keys(const BackwardTiles& tiles, uint32_t dim_qk, uint32_t dim_v, uint32_t keys, uint64_t budget);

}  // namespace vkattn::detail
