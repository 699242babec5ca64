// The backward pass's plan on every device class, without the device: plan_backward is a pure function
// of the spec and a DeviceInfo, so each preset of conform/device_profiles.cpp (published limits) is
// planned for head dims 32..256, dim_v != dim_qk among them. GPUs take the tiled form where a tile fits
// (its shared memory and workgroup within the device's limits), else the portable kernels; lavapipe's
// tiled form (forced) keeps every invocation's loop iterations within its budget.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "backward_plan.hpp"
#include "backward_tiles.hpp"
#include "conform/device_profiles.hpp"
#include "int_math.hpp"
#include "llvmpipe_limits.hpp"
#include "shader_abi.h"

using namespace vkattn;
using vkattn::conform::device_profiles;
using vkattn::conform::DeviceProfile;

namespace {

AttentionSpec backward_spec(const DeviceInfo& device, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k,
                            int64_t dim_qk, int64_t dim_v) {
  const DType dtype = device.storage_16bit ? DType::f16 : DType::f32;
  AttentionLayouts l;
  l.q = TensorLayout::bhsd(dtype, 2, heads, seq_q, dim_qk);
  l.k = TensorLayout::bhsd(dtype, 2, kv_heads, seq_k, dim_qk);
  l.v = TensorLayout::bhsd(dtype, 2, kv_heads, seq_k, dim_v);
  l.out = TensorLayout::bhsd(dtype, 2, heads, seq_q, dim_v);
  l.has_lse = true;
  l.options.causal = Causal::bottom_right;
  return AttentionSpec::dense(l);
}

const std::vector<std::pair<int64_t, int64_t>>& head_dims() {
  static const std::vector<std::pair<int64_t, int64_t>> dims = {
      {32, 32}, {64, 64}, {80, 80}, {96, 96}, {128, 128}, {192, 192}, {256, 256},
      {64, 128}, {128, 64}, {192, 128}, {256, 128}, {40, 72}, {32, 256}};
  return dims;
}

// The tiles' every limit on `device`: invocations, shared memory (the shaders' own formula), the
// workgroup a multiple of both blocks (each key or row gets whole lanes).
void check_tiles(const DeviceInfo& device, const detail::BackwardTiles& t, int64_t dim_qk, int64_t dim_v) {
  CHECK(t.workgroup <= device.max_workgroup_invocations);
  CHECK(t.workgroup % t.rows == 0);
  CHECK(t.workgroup % t.keys == 0);
  const uint64_t BR = t.rows, BC = t.keys, DQK = uint64_t(dim_qk), DV = uint64_t(dim_v);
  CHECK(t.shared_bytes == BACKWARD_TILE_FLOATS(BR, BC, DQK, DV) * 4);
  CHECK(t.shared_bytes <= device.max_shared_memory);
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("backward tiles: every preset's plan fits its limits, the portable kernels where no tile fits") {
    int fallbacks = 0, tiled = 0;
    for (const DeviceProfile& preset : device_profiles()) {
      const DeviceInfo& device = preset.info;
      for (const auto& [dim_qk, dim_v] : head_dims()) {
        INFO("device: " << device.name << ", dims " << dim_qk << " / " << dim_v);
        const AttentionSpec spec = backward_spec(device, 8, 2, 300, 500, dim_qk, dim_v);
        const std::optional<detail::BackwardTiles> tiles =
            detail::choose_backward_tiles(device, uint32_t(dim_qk), uint32_t(dim_v));
        if (tiles) check_tiles(device, *tiles, dim_qk, dim_v);

        // The device's own choice: GPUs tiled where a tile fits; CPU devices their subgroup forms.
        const detail::BackwardCallPlan automatic = detail::plan_backward(device, KernelVariant::automatic, spec);
        if (device.is_cpu()) {
          CHECK(std::string(automatic.report.kernel) == "subgroup");
          CHECK(automatic.report.workgroup == device.subgroup_size);  // one subgroup a workgroup
        } else if (tiles) {
          ++tiled;
          CHECK(std::string(automatic.report.kernel) == "tiled");
          REQUIRE(automatic.tiles);
          CHECK(automatic.report.workgroup == tiles->workgroup);
          CHECK(automatic.report.tile_rows == tiles->rows);
          CHECK(automatic.report.tile_keys == tiles->keys);
          CHECK(automatic.kv_tile() == tiles->keys);
          CHECK(automatic.q_tile() == tiles->rows);
        } else {
          ++fallbacks;
          CHECK(std::string(automatic.report.kernel) == "portable");
          CHECK_FALSE(automatic.tiles);
        }

        // Forced: tiled where it fits (lavapipe too), the portable kernels with rowwise.
        const detail::BackwardCallPlan forced = detail::plan_backward(device, KernelVariant::tiled, spec);
        CHECK(std::string(forced.report.kernel) == (tiles ? "tiled" : "portable"));
        const detail::BackwardCallPlan rowwise = detail::plan_backward(device, KernelVariant::rowwise, spec);
        CHECK(std::string(rowwise.report.kernel) == "portable");
        CHECK_FALSE(rowwise.tiles);

        // lavapipe: each split's walk within the loop budget, the splits covering every row and key.
        if (device.is_llvmpipe && forced.tiles) {
          const detail::BackwardTiles& t = *forced.tiles;
          const detail::BackwardTileIterations it = detail::backward_tile_iterations(t, uint32_t(dim_qk), uint32_t(dim_v));
          const uint64_t group = 4;
          CHECK(forced.split_rows % t.rows == 0);
          CHECK(forced.split_keys % t.keys == 0);
          CHECK(it.kv_fixed + group * (2 + detail::ceil_div(forced.split_rows, t.rows) * it.kv_per_block) <=
                detail::kLlvmpipeLoopBudget);
          CHECK(it.q_fixed + detail::ceil_div(forced.split_keys, t.keys) * it.q_per_block <= detail::kLlvmpipeLoopBudget);
          CHECK(uint64_t(forced.query_splits) * forced.split_rows >= 300);
          CHECK(uint64_t(forced.key_splits) * forced.split_keys >= 500);
        }
      }
    }
    CHECK(tiled > 0);
    CHECK(fallbacks > 0);  // (the Vulkan 1.2 minimums' 16 KiB hold no tile at d256)
  }

  TEST_CASE("backward tiles: the named devices' choices") {
    const auto profile = [](const char* id) -> const DeviceInfo& { return conform::find_device_profile(id).info; };
    // 48 KiB and 1024 invocations: d64 and d128 tile, so does d256 in smaller blocks.
    for (int64_t d : {64, 128, 256}) CHECK(detail::choose_backward_tiles(profile("h100"), uint32_t(d), uint32_t(d)));
    // The Vulkan 1.2 minimums (16 KiB, 128 invocations): d64 tiles, d256 does not.
    CHECK(detail::choose_backward_tiles(profile("vulkan12-min"), 64, 64));
    CHECK_FALSE(detail::choose_backward_tiles(profile("vulkan12-min"), 256, 256));
    const DeviceInfo& minimums = profile("vulkan12-min");
    CHECK(std::string(detail::plan_backward(minimums, KernelVariant::automatic, backward_spec(minimums, 4, 4, 64, 64, 256, 256))
                          .report.kernel) == "portable");
    // No shared memory worth the name: no tile at all.
    DeviceInfo tiny = profile("h100");
    tiny.max_shared_memory = 1024;
    CHECK_FALSE(detail::choose_backward_tiles(tiny, 32, 32));
  }
}
