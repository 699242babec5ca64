// The fused planner's steps one by one (runtime/plan_steps.hpp) and the kernel table
// (runtime/fused_kernels.hpp), on the device presets: what each step decides for representative shapes.
// The composed plans are checked against every limit in unit_planner_presets.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "llvmpipe_limits.hpp"
#include "plan_steps.hpp"
#include "planner_presets.hpp"
#include "support.hpp"
#include "vkattn/error.hpp"

using namespace vkattn;
using namespace vkattn::test;
using namespace vkattn::test::planner;
using detail::FusedKernel;
using detail::PlanInputs;

namespace {

const DeviceInfo& preset(const char* id) { return conform::find_device_profile(id).info; }

// The step inputs of a dense call (its checked problem kept alive alongside).
struct Call {
  AttentionLayouts layouts;
  AttentionProblem problem;
  Call(const DeviceInfo& device, const AttentionLayouts& l) : layouts(l), problem(detail::check_attention_layouts(device, l)) {}
  PlanInputs in(const DeviceInfo& device, const detail::PagedKeys* paged = nullptr,
                const detail::VarlenRows* varlen = nullptr) const {
    return detail::plan_inputs(device, layouts, problem, paged, varlen);
  }
};

detail::KernelConfig kernel_of(const DeviceInfo& d, KernelVariant v, const Shape& s, bool packing = true) {
  const Call call(d, layouts_of(s));
  return detail::choose_kernel(call.in(d), v, packing).config;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("planner steps: the kernel table has one row per kernel, each with its own shader and name") {
    std::set<detail::Shader> shaders;
    std::set<std::string> names;
    for (FusedKernel k : {FusedKernel::tiled, FusedKernel::rowwise, FusedKernel::subgroup, FusedKernel::subgroup_decode}) {
      const detail::FusedKernelTraits& t = detail::kernel_traits(k);
      CHECK(t.kernel == k);
      shaders.insert(t.shader);
      names.insert(t.name);
      // Every fused kernel runs paged, packed and q8_0 calls with every modifier; none writes P.
      CHECK((t.paged && t.packed && t.q8_0 && t.modifiers && !t.weights));
      // The kernels whose workgroup is one subgroup shuffle across it.
      CHECK(t.one_subgroup_workgroup == t.needs_subgroup_shuffle);
      CHECK(t.variant != KernelVariant::automatic);
    }
    CHECK(shaders.size() == 4);
    CHECK(names == std::set<std::string>{"tiled", "rowwise", "subgroup", "subgroup-decode"});
    // Only the subgroup kernel runs a careful pass; only the decode form reads rows in 16-byte chunks.
    CHECK(detail::kernel_traits(FusedKernel::subgroup).careful_pass);
    CHECK_FALSE(detail::kernel_traits(FusedKernel::subgroup_decode).careful_pass);
    CHECK(detail::kernel_traits(FusedKernel::subgroup_decode).chunked_rows);
    CHECK_FALSE(detail::kernel_traits(FusedKernel::tiled).chunked_rows);
    // What the rows ask of the device: the tiled and rowwise kernels run anywhere; the subgroup
    // kernels need shuffles and one subgroup size (or size control for 32 lanes).
    for (const char* id : {"h100", "rdna3", "arc", "mali", "llvmpipe"})
      CHECK(detail::device_runs(preset(id), FusedKernel::subgroup_decode));
    for (const char* id : {"apple", "adreno", "vulkan12-min"}) {
      INFO(id);
      CHECK_FALSE(detail::device_runs(preset(id), FusedKernel::subgroup));
      CHECK(detail::device_runs(preset(id), FusedKernel::tiled));
      CHECK(detail::device_runs(preset(id), FusedKernel::rowwise));
    }
    // The GPU decode form wants more workgroups in flight, in shorter splits.
    CHECK(detail::kernel_traits(FusedKernel::subgroup_decode).gpu_target_workgroups >
          detail::kernel_traits(FusedKernel::tiled).gpu_target_workgroups);
  }

  TEST_CASE("planner steps: plan_chunks keeps a call that fits whole, and cuts by bindings and the grid") {
    const DeviceInfo& h100 = preset("h100");
    const DeviceInfo& llvmpipe = preset("llvmpipe");
    {  // Fits everywhere: one chunk, K and V bound whole.
      const Call call(h100, layouts_of(shape("prefill", DType::f16, 2, 16, 4, 512, 512, 128, 128)));
      const detail::ChunkPlan c = detail::plan_chunks(call.in(h100));
      CHECK(c.batch_chunk == 2);
      CHECK(c.head_chunk == 16);
      CHECK_FALSE(c.key_ranges);
      CHECK(c.alignment == 16);
    }
    {  // 64 batches of 8 KV heads x 32768 keys d128 f16: 64 MiB of K per batch, beyond 2^27 / 2 bytes.
      const Call call(llvmpipe, layouts_of(shape("decode", DType::f16, 64, 32, 8, 1, 32768, 128, 128)));
      const detail::ChunkPlan c = detail::plan_chunks(call.in(llvmpipe));
      CHECK(c.batch_chunk == 1);
      CHECK(c.head_chunk == 32);  // one batch's 64 MiB K and V fit 2^27 bytes
      CHECK_FALSE(c.key_ranges);
      // H100's 2^32 - 1 bytes hold 63 batches' K (64 MiB each), not 64.
      CHECK(detail::plan_chunks(call.in(h100)).batch_chunk == 63);
    }
    {  // One KV head of 600000 keys d128 f16 (153.6 MB) exceeds 2^27: one GQA group, K and V by key range.
      const Call call(llvmpipe, layouts_of(shape("long", DType::f16, 1, 8, 1, 1, 600000, 128, 128)));
      const detail::ChunkPlan c = detail::plan_chunks(call.in(llvmpipe));
      CHECK(c.key_ranges);
      CHECK(c.batch_chunk == 1);
      CHECK(c.head_chunk == 8);
    }
    {  // The grid's y (65535) and z (65535) cap heads and batches.
      const Call heads(llvmpipe, layouts_of(shape("heads", DType::f16, 1, 70000, 70000, 2, 64, 8, 8)));
      CHECK(detail::plan_chunks(heads.in(llvmpipe)).head_chunk == 65535);
      const Call batches(llvmpipe, layouts_of(shape("batches", DType::f32, 70000, 1, 1, 1, 16, 8, 8)));
      CHECK(detail::plan_chunks(batches.in(llvmpipe)).batch_chunk == 65535);
      // Apple's grid (2^30) holds them all.
      CHECK(detail::plan_chunks(batches.in(preset("apple"))).batch_chunk == 70000);
    }
    {  // Per-batch ALiBi slopes with the heads cut: one batch per chunk (all 3 batches fit without them).
      AttentionLayouts l = layouts_of(shape("alibi", DType::f16, 3, 70000, 70000, 2, 16, 8, 8));
      const Call plain(llvmpipe, l);
      CHECK(detail::plan_chunks(plain.in(llvmpipe)).batch_chunk == 3);
      l.alibi = HeadValuesLayout{3, 70000, 0};
      const Call call(llvmpipe, l);
      const detail::ChunkPlan c = detail::plan_chunks(call.in(llvmpipe));
      CHECK(c.head_chunk == 65535);
      CHECK(c.batch_chunk == 1);
      l.alibi = HeadValuesLayout{1, 70000, 0};  // slopes per head only: whole batches again
      const Call per_head(llvmpipe, l);
      CHECK(detail::plan_chunks(per_head.in(llvmpipe)).batch_chunk == 3);
    }
    {  // A packed batch is one chunk of its sequences.
      const Call call(llvmpipe, layouts_of(shape("packed", DType::f16, 1, 8, 2, 100, 1000, 64, 64)));
      const detail::VarlenRows varlen{5, 40, 300};
      const detail::ChunkPlan c = detail::plan_chunks(call.in(llvmpipe, nullptr, &varlen));
      CHECK(c.batch_chunk == 5);
      CHECK(c.head_chunk == 8);
    }
    {  // A GQA group wider than the grid's y: refused by name.
      const Call call(llvmpipe, layouts_of(shape("group", DType::f32, 1, 70000, 1, 1, 64, 8, 8)));
      CHECK(contains(error_message([&] { (void)detail::plan_chunks(call.in(llvmpipe)); }),
                     "exceeds maxComputeWorkGroupCount[1]"));
    }
  }

  TEST_CASE("planner steps: choose_kernel by device class, shape and variant") {
    const Shape prefill = shape("prefill", DType::f16, 1, 16, 16, 512, 512, 128, 128);
    const Shape decode = shape("decode", DType::f16, 1, 32, 8, 1, 8192, 128, 128);
    const DeviceInfo& llvmpipe = preset("llvmpipe");
    // lavapipe: the subgroup kernel for prefill, its decode form (4 heads of a group in every lane) for decode.
    CHECK(kernel_of(llvmpipe, KernelVariant::automatic, prefill).kernel == FusedKernel::subgroup);
    const detail::KernelConfig dec = kernel_of(llvmpipe, KernelVariant::automatic, decode);
    CHECK(dec.kernel == FusedKernel::subgroup_decode);
    CHECK(dec.rows == 4);
    CHECK(dec.lanes == 8);
    CHECK(dec.vec_loads);
    CHECK(dec.prefetch_keys == 0);  // dense BHSD K and V
    // Without the packing, decode stays on the subgroup kernel's lanes-own-rows form.
    CHECK(kernel_of(llvmpipe, KernelVariant::automatic, decode, false).kernel == FusedKernel::subgroup);
    // A CPU device without shuffles: rowwise for prefill, tiled (one lane per row) for decode.
    DeviceInfo no_shuffle = llvmpipe;
    no_shuffle.subgroup_shuffle = false;
    CHECK(kernel_of(no_shuffle, KernelVariant::automatic, prefill).kernel == FusedKernel::rowwise);
    const detail::KernelConfig tiled_decode = kernel_of(no_shuffle, KernelVariant::automatic, decode);
    CHECK(tiled_decode.kernel == FusedKernel::tiled);
    CHECK(tiled_decode.threads_per_row == 1);
    CHECK(tiled_decode.heads == 4);  // the GQA group's heads share the workgroup
    // H100: tiled prefill (8 lanes a row), the decode form on 32 lanes (2 key groups of 16 at d128 f16).
    const DeviceInfo& h100 = preset("h100");
    const detail::KernelConfig gpu_prefill = kernel_of(h100, KernelVariant::automatic, prefill);
    CHECK(gpu_prefill.kernel == FusedKernel::tiled);
    CHECK(gpu_prefill.threads_per_row == 8);
    const detail::KernelConfig gpu_decode = kernel_of(h100, KernelVariant::automatic, decode);
    CHECK(gpu_decode.kernel == FusedKernel::subgroup_decode);
    CHECK(gpu_decode.lanes == 32);
    CHECK(gpu_decode.threads_per_row == 16);
    CHECK(gpu_decode.key_groups() == 2);
    // Apple (SIMD groups of 4 to 32, no size control): no subgroup kernels; tiled rows of 4 lanes.
    const detail::KernelConfig apple = kernel_of(preset("apple"), KernelVariant::automatic, decode);
    CHECK(apple.kernel == FusedKernel::tiled);
    CHECK(apple.threads_per_row == 4);
    // A forced variant picks its family's kernel wherever it runs.
    for (KernelVariant v : {KernelVariant::tiled, KernelVariant::rowwise, KernelVariant::subgroup}) {
      INFO("variant " << to_string(v));
      CHECK(kernel_of(h100, v, prefill).traits().variant == v);
      CHECK(kernel_of(llvmpipe, v, decode).traits().variant == v);
    }
    CHECK(contains(error_message([&] { (void)kernel_of(preset("apple"), KernelVariant::subgroup, decode); }),
                   "needs every subgroup to have one size"));
  }

  TEST_CASE("planner steps: choose_kernel's decode form touches strided K and V rows ahead on a CPU device") {
    const DeviceInfo& llvmpipe = preset("llvmpipe");
    Shape s = shape("decode", DType::f16, 1, 32, 8, 1, 8192, 128, 128);
    s.bshd = true;  // a head's rows 8 heads apart
    CHECK(kernel_of(llvmpipe, KernelVariant::automatic, s).prefetch_keys == 16);
    CHECK(kernel_of(preset("h100"), KernelVariant::automatic, s).prefetch_keys == 0);
    const Call call(llvmpipe, layouts_of(shape("decode", DType::f16, 1, 32, 8, 1, 8192, 128, 128)));
    const detail::PagedKeys paged{16};
    CHECK(detail::choose_kernel(call.in(llvmpipe, &paged), KernelVariant::automatic, true).config.prefetch_keys == 16);
  }

  TEST_CASE("planner steps: plan_key_tiles counts a window's band and holds lavapipe's splits to its loop limit") {
    const DeviceInfo& h100 = preset("h100");
    const DeviceInfo& llvmpipe = preset("llvmpipe");
    AttentionLayouts l = layouts_of(shape("window", DType::f16, 1, 16, 16, 4096, 65536, 128, 128));
    l.options.window = Window{128, 0};
    const Call call(h100, l);
    const detail::KernelConfig c = detail::choose_kernel(call.in(h100), KernelVariant::automatic, true).config;
    const detail::KeyTiles band = detail::plan_key_tiles(call.in(h100), c, false, 16);
    CHECK(band.band_splits);
    // Its rows of one head (c.rows / c.heads), the window's 128 keys to the left, and one tile more.
    CHECK(band.tiles == ceil_div(c.rows / c.heads + 128, c.keys_per_tile) + 1);
    CHECK(band.max_tiles == band.tiles);  // no loop limit on a GPU
    CHECK(band.keys_per_binding == UINT64_MAX);
    // Bound by key range: the splits count from key 0, no band.
    CHECK_FALSE(detail::plan_key_tiles(call.in(h100), c, true, 16).band_splits);
    // lavapipe: as many tiles as fit its loop budget, not one more.
    const Call decode(llvmpipe, layouts_of(shape("decode", DType::f16, 1, 32, 8, 1, 65536, 128, 128)));
    const detail::KernelConfig dc = detail::choose_kernel(decode.in(llvmpipe), KernelVariant::automatic, true).config;
    const detail::KeyTiles keys = detail::plan_key_tiles(decode.in(llvmpipe), dc, false, 16);
    CHECK_FALSE(keys.band_splits);
    CHECK(keys.tiles == ceil_div(65536, dc.keys_per_tile));
    CHECK(keys.max_tiles < keys.tiles);
    CHECK(detail::fused_loop_iterations(dc, 128, 128, keys.max_tiles) <= detail::kLlvmpipeLoopBudget);
    CHECK(detail::fused_loop_iterations(dc, 128, 128, keys.max_tiles + 1) > detail::kLlvmpipeLoopBudget);
  }

  TEST_CASE("planner steps: split_rules take the device class and the kernel's row") {
    const Shape decode = shape("decode", DType::f16, 1, 32, 8, 1, 8192, 128, 128);
    const auto rules = [&](const DeviceInfo& d, const detail::PagedKeys* paged = nullptr, bool kv_lengths = false) {
      Shape s = decode;
      s.kv_lengths = kv_lengths;
      const Call call(d, layouts_of(s));
      const PlanInputs in = call.in(d, paged);
      const detail::KernelConfig c = detail::choose_kernel(in, KernelVariant::automatic, true).config;
      return std::pair{c, detail::split_rules(in, c, detail::plan_key_tiles(in, c, false, 16))};
    };
    const auto [gpu_c, gpu] = rules(preset("h100"));
    REQUIRE(gpu_c.decode());
    CHECK(gpu.target_workgroups == 2048);
    CHECK(gpu.max_keys_below_target == 256);
    CHECK(gpu.min_parallel_keys == 32);
    CHECK(gpu.max_keys == 0);
    CHECK(gpu.work_list_min_keys == 32);
    const auto [tiled_c, tiled] = rules(preset("apple"));
    REQUIRE(tiled_c.is(FusedKernel::tiled));
    CHECK(tiled.target_workgroups == 256);
    CHECK(tiled.max_keys_below_target == 1024);
    CHECK(tiled.min_parallel_keys == 0);
    CHECK(tiled.work_list_min_keys == tiled_c.keys_per_tile);
    const auto [cpu_c, cpu] = rules(preset("llvmpipe"));
    CHECK(cpu.target_workgroups == 16);
    CHECK(cpu.max_keys_below_target == 0);
    CHECK(cpu.max_keys == 0);    // dense K and V
    CHECK(cpu.min_splits == 0);  // without key lengths
    CHECK(cpu.work_list_min_keys == 256);
    const detail::PagedKeys paged{16};
    CHECK(rules(preset("llvmpipe"), &paged).second.max_keys == 1024);
    CHECK(rules(preset("llvmpipe"), &paged).second.min_splits == 2);  // the decode form, own lengths
    CHECK(rules(preset("llvmpipe"), nullptr, true).second.min_splits == 2);
  }

  TEST_CASE("planner steps: split_keys splits whole key tiles by the rules") {
    detail::SplitRules r;
    r.tiles = 100, r.max_tiles = 100, r.keys_per_tile = 32, r.target_workgroups = 256;
    // Enough workgroups: one split; a loop limit of 30 tiles: 4 splits of 25 tiles.
    CHECK(detail::split_keys(r, 256).splits == 1);
    CHECK(detail::split_keys(r, 256).keys_per_split == 3200);
    r.max_tiles = 30;
    CHECK(detail::split_keys(r, 256).splits == 4);
    CHECK(detail::split_keys(r, 256).keys_per_split == 25 * 32);
    r.max_tiles = 100;
    // Few workgroups: splits for the target, never more than one per tile.
    CHECK(detail::split_keys(r, 64).splits == 4);
    CHECK(detail::split_keys(r, 1).splits == 100);
    // ... unless each split would hold fewer keys than the least worth the combine.
    r.min_parallel_keys = 320;
    CHECK(detail::split_keys(r, 1).splits == 10);
    r.min_parallel_keys = 0;
    // A request wins over the target, capped at the tiles and rounded to whole tiles per split.
    r.requested = 3;
    CHECK(detail::split_keys(r, 1).splits == 3);
    CHECK(detail::split_keys(r, 1).keys_per_split == 34 * 32);
    r.requested = 1000;
    CHECK(detail::split_keys(r, 256).splits == 100);
    r.requested = 0;
    // Caps on the keys per split, and a least split count.
    r.max_keys_below_target = 1024;
    CHECK(detail::split_keys(r, 128).splits == 4);  // 2 for the target, 4 for 1024 keys
    CHECK(detail::split_keys(r, 256).splits == 1);  // at the target: no cap
    r.max_keys = 640;
    CHECK(detail::split_keys(r, 256).splits == 5);
    r.max_keys = 0, r.min_splits = 2;
    CHECK(detail::split_keys(r, 256).splits == 2);
  }

  TEST_CASE("planner steps: fit_chunk_to_workspace and plan_query_ranges keep a range's partials in the budget") {
    const DeviceInfo& h100 = preset("h100");
    // 16 batches x 64 heads, 128 splits of d256: one query tile's partials of the whole call exceed 32 MiB.
    AttentionLayouts l = layouts_of(shape("wide", DType::f16, 16, 64, 64, 64, 65536, 256, 256));
    l.options.num_splits = 128;
    const Call call(h100, l);
    const PlanInputs in = call.in(h100);
    const detail::KernelConfig c = detail::choose_kernel(in, KernelVariant::automatic, true).config;
    const detail::SplitRules rules = detail::split_rules(in, c, detail::plan_key_tiles(in, c, false, 16));
    const detail::WorkspaceBudget budget = detail::workspace_budget(in, c, 16);
    CHECK(budget.budget == fused_workspace_budget);
    CHECK(budget.usable == fused_workspace_budget - (c.careful_pass() ? 3 : 2) * 16);
    const uint32_t tiles = detail::query_tiles(in, c);
    REQUIRE(detail::tile_workspace_bytes(in, c, 128, 16, 64) > budget.usable);
    const detail::FittedChunk f = detail::fit_chunk_to_workspace(in, c, rules, budget, tiles, 16, 64);
    CHECK(f.batch_chunk == 1);
    CHECK(f.splits.splits == 128);
    CHECK(detail::tile_workspace_bytes(in, c, 128, 1, f.head_chunk) <= budget.usable);
    CHECK(detail::tile_workspace_bytes(in, c, 128, 1, f.head_chunk + 1) > budget.usable);  // the most heads that fit
    // The ranges of that chunk: each range's partials within the budget, all tiles covered.
    detail::FusedPlan plan;
    plan.problem = call.problem;
    plan.config = c;
    plan.query_tiles = tiles;
    plan.batch_chunk = f.batch_chunk, plan.head_chunk = f.head_chunk;
    plan.splits = f.splits.splits, plan.keys_per_split = f.splits.keys_per_split;
    const detail::QueryRanges r = detail::plan_query_ranges(in, plan, rules, budget);
    CHECK(uint64_t(r.tiles_per_range) * r.query_ranges >= tiles);
    CHECK(uint64_t(r.tiles_per_range) * detail::tile_workspace_bytes(in, c, plan.splits, 1, f.head_chunk) <= budget.usable);
    // Unsplit: one range of every tile.
    plan.splits = 1;
    CHECK(detail::plan_query_ranges(in, plan, rules, budget).query_ranges == 1);
  }

  TEST_CASE("planner steps: plan_workspace lays out partials, work list and ballots") {
    const DeviceInfo& llvmpipe = preset("llvmpipe");
    // lavapipe prefill: the subgroup kernel unsplit, only its ballots (16 bytes a workgroup) from 0.
    const Shape prefill = shape("prefill", DType::f16, 1, 16, 16, 512, 512, 64, 64);
    const detail::FusedPlan p = detail::plan_fused(llvmpipe, KernelVariant::automatic, layouts_of(prefill));
    REQUIRE(p.config.careful_pass());
    REQUIRE(p.splits == 1);
    CHECK(p.redo_offset == 0);
    CHECK(p.redo_bytes == uint64_t(p.query_tiles) * 16 * 16);
    CHECK(p.workspace_bytes == p.redo_bytes + p.alignment);
    CHECK_FALSE(p.work_list.has_value());
    // H100 decode with key lengths: split, the work list after the partials, no ballots.
    Shape decode = shape("decode", DType::f16, 4, 32, 8, 1, 32768, 128, 128);
    decode.kv_lengths = true;
    const detail::FusedPlan d = detail::plan_fused(preset("h100"), KernelVariant::automatic, layouts_of(decode));
    REQUIRE(d.splits > 1);
    CHECK(d.partial_o_bytes == uint64_t(d.splits) * 4 * 32 * 128 * 4);
    CHECK(d.partial_lse_bytes == uint64_t(d.splits) * 4 * 32 * 8);
    REQUIRE(d.work_list.has_value());
    CHECK(d.work_list->offset == (d.partial_o_bytes + d.partial_lse_bytes + 15) / 16 * 16);
    CHECK(d.workspace_bytes == d.work_list->offset + d.work_list->words * 4 + d.alignment);
    CHECK(d.redo_bytes == 0);
    // Recomputed from the plan so far, the step decides the same.
    const Call call(preset("h100"), layouts_of(decode));
    const PlanInputs in = call.in(preset("h100"));
    const detail::KeyTiles keys = detail::plan_key_tiles(in, d.config, false, d.alignment);
    const detail::SplitRules rules = detail::split_rules(in, d.config, keys);
    const detail::WorkspaceLayout ws =
        detail::plan_workspace(in, d, keys, false, rules, detail::workspace_budget(in, d.config, d.alignment));
    CHECK(ws.workspace_bytes == d.workspace_bytes);
    CHECK(ws.splits_per_dispatch == d.splits);
    // K and V by key range: a dispatch covers the splits whose keys one binding holds.
    const DeviceInfo& mali = preset("mali");
    const detail::FusedPlan r =
        detail::plan_fused(mali, KernelVariant::automatic, layouts_of(shape("long", DType::f16, 1, 8, 1, 1, 600000, 128, 128)));
    CHECK(r.splits_per_dispatch < r.splits);
    CHECK(uint64_t(r.splits_per_dispatch) * r.keys_per_split * 128 * 2 <= mali.max_storage_buffer_range);
  }
}
