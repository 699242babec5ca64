// The fused planner on every device class, without the device: plan_fused is a pure function of the
// layouts and a DeviceInfo, so each preset of device_presets.hpp (published limits) is planned for a
// grid of shapes and every plan is checked against that device's limits: shared memory, invocations,
// subgroup fit, grid, binding range, workspace bound, and lavapipe's loop budget. A shape a device
// cannot run must be refused with a vkattn::Error that says why, never planned past a limit.
//
// The table the planner produces for three reference shapes on every preset is printed by the
// skipped case at the end: vkattn_tests -tc="planner table*" --no-skip
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <iostream>
#include <string>
#include <vector>

#include "llvmpipe_limits.hpp"
#include "planner_presets.hpp"
#include "support.hpp"
#include "varlen_plan.hpp"
#include "vkattn/error.hpp"

using namespace vkattn;
using namespace vkattn::test;
using namespace vkattn::test::planner;
using vkattn::conform::device_profiles;

namespace {

const char* variant_name(KernelVariant v) { return to_string(v); }

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("planner presets: every plan fits the limits of every device class") {
    for (const DeviceProfile& preset : device_profiles()) {
      for (const Shape& s : shapes()) {
        for (KernelVariant v :
             {KernelVariant::automatic, KernelVariant::tiled, KernelVariant::rowwise, KernelVariant::subgroup}) {
          INFO("device: " << preset.info.name << ", shape: " << s.name << ", kernel " << variant_name(v));
          const AttentionLayouts l = layouts_of(s);
          if (s.dtype != DType::f32 && !preset.info.storage_16bit) {
            // No 16-bit storage (the Vulkan 1.2 minimums): refused by name, before any planning.
            expect_unsupported(preset.info, v, l, "storageBuffer16BitAccess");
            continue;
          }
          if (uint64_t(s.heads / s.kv_heads) > preset.info.max_workgroup_count[1]) {
            expect_unsupported(preset.info, v, l, "maxComputeWorkGroupCount[1]");
            continue;
          }
          if (v == KernelVariant::subgroup && !preset.info.subgroup_shuffle) {
            expect_unsupported(preset.info, v, l, "subgroup shuffles");
            continue;
          }
          const bool one_subgroup_size = preset.info.min_subgroup_size == preset.info.subgroup_size &&
                                         preset.info.max_subgroup_size == preset.info.subgroup_size;
          // The subgroup kernel's lanes: the one size, or where a pipeline can require a size (RDNA3
          // 32..64, Arc 8..32), 32; else it cannot run.
          const uint32_t lanes = one_subgroup_size ? preset.info.subgroup_size
                                 : preset.info.required_subgroup_size ? 32u
                                                                      : 0u;
          if (lanes == 32u && !one_subgroup_size)
            REQUIRE((preset.info.min_subgroup_size <= 32u && preset.info.max_subgroup_size >= 32u));
          if (v == KernelVariant::subgroup && lanes == 0) {
            // Its workgroup is one subgroup: a driver that may compile smaller ones (Apple, Adreno:
            // no size control here) would split it.
            expect_unsupported(preset.info, v, l, "needs every subgroup to have one size");
            continue;
          }
          FusedPlan plan;
          REQUIRE_NOTHROW(plan = detail::plan_fused(preset.info, v, l));
          // automatic: on CPU devices the subgroup kernel where shuffles exist (at every head dim),
          // else rowwise for prefill (seq_q >= 16). The subgroup kernel packs a GQA group below one
          // tile of query rows.
          const bool cpu_auto = v == KernelVariant::automatic && preset.info.is_cpu();
          const bool cpu_prefill = cpu_auto && s.seq_q >= 16;
          const bool subgroup_runs = preset.info.subgroup_shuffle && lanes != 0;
          // Wherever the subgroup kernel can run (on GPUs: one subgroup size, or a size required), decode
          // (a GQA group's rows up to 16, not a CPU device's prefill) takes the decode form at every head dim.
          const bool decode_form = v == KernelVariant::automatic && !cpu_prefill && preset.info.subgroup_shuffle &&
                                   lanes != 0 && s.seq_q * (s.heads / s.kv_heads) <= 16;
          // Past 256 dims a CPU device runs the decode form or rowwise (the subgroup kernel's JIT time).
          const bool cpu_wide = cpu_auto && std::max(s.dim_qk, s.dim_v) > 256;
          CHECK(plan.config.one_subgroup() ==
                (v == KernelVariant::subgroup || (cpu_auto && subgroup_runs && !cpu_wide) || decode_form));
          if (decode_form) CHECK(plan.config.decode());
          if (plan.config.one_subgroup()) CHECK(plan.config.lanes == lanes);
          CHECK(plan.config.is(detail::FusedKernel::rowwise) ==
                (v == KernelVariant::rowwise || (!decode_form && (cpu_wide || (cpu_prefill && !subgroup_runs)))));
          if (plan.config.one_subgroup() && s.seq_q < 16) CHECK(plan.config.pack_group);
          if (plan.config.pack_group) CHECK(uint64_t(s.seq_q) < uint64_t(4) * plan.config.lanes);  // below one tile
          check_plan(preset, l, plan);
        }
      }
    }
  }

  TEST_CASE("planner presets: decode on CPU devices packs a GQA group into the subgroup kernel's rows") {
    // H32/KV8 d128 decode: one workgroup per (KV head, split) reads each K/V row once for the group's 4
    // query heads, every lane holding the 4 rows (the decode form, 16-byte chunks); the key range split
    // only as far as the loop budget and the device's target workgroups ask.
    for (const DeviceProfile& preset : device_profiles()) {
      if (!preset.info.is_llvmpipe) continue;
      INFO("device: " << preset.info.name);
      for (int64_t seq_k : {8192, 16384, 32768, 65536}) {
        for (int64_t batch : {1, 8}) {
          INFO("seq_k " << seq_k << ", batch " << batch);
          Shape s = shape("decode", DType::f16, batch, 32, 8, 1, seq_k, 128, 128);
          s.causal = Causal::bottom_right;
          const AttentionLayouts l = layouts_of(s);
          const FusedPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
          INFO("plan: " << describe(plan));
          CHECK(std::string(plan.config.name()) == "subgroup-decode");
          CHECK(plan.config.pack_group);
          CHECK(plan.config.decode());
          CHECK(plan.config.vec_loads);
          CHECK(plan.config.rows == 4);  // the 4 heads of the group, in every lane
          CHECK(plan.query_tiles == 1);
          CHECK(plan.query_ranges == 1);
          if (seq_k * batch <= 16384) CHECK(plan.batch_chunk * plan.head_chunk == batch * 32);  // K/V fit a binding
          CHECK(detail::fused_loop_iterations(plan.config, 128, 128, plan.keys_per_split / plan.config.keys_per_tile) <=
                detail::kLlvmpipeLoopBudget);
          // Workgroups: 8 KV heads x batch x splits, at least the CPU target (16) when keys allow.
          CHECK(uint64_t(8) * batch * plan.splits >= 16);
          check_plan(preset, l, plan);
        }
      }
      // seq_q 2..15: the rows are the group's heads x seq_q: up to 16 rows the decode form (tiles of
      // 4 rows), past that the lanes own rows again (2, 4 rows per invocation as needed).
      for (int64_t seq_q : {2, 4, 7, 15}) {
        const FusedPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic,
                                                   layouts_of(shape("decode", DType::f16, 2, 32, 8, seq_q, 20000, 128, 128)));
        INFO("seq_q " << seq_q << ": " << describe(plan));
        CHECK(plan.config.pack_group);
        CHECK(plan.query_tiles == ceil_div(uint64_t(seq_q) * 4, plan.config.rows));
        CHECK(plan.config.decode() == (seq_q <= 4));
        if (seq_q <= 4) CHECK(plan.config.rows == 4);
        else CHECK(plan.config.rows == std::min<uint32_t>(4, std::bit_ceil(uint32_t(ceil_div(seq_q * 4, 8)))) * 8);
      }
      // MHA decode: a group of one head, the decode form with one row.
      const FusedPlan mha = detail::plan_fused(preset.info, KernelVariant::automatic,
                                                layouts_of(shape("mha decode", DType::f16, 1, 8, 8, 1, 8192, 128, 128)));
      CHECK(mha.config.one_subgroup());
      CHECK(mha.config.pack_group);
      CHECK(mha.config.decode());
      CHECK(mha.config.rows == 1);
      CHECK(mha.query_tiles == 1);
      // Chunked reads only where dims and strides are whole 16-byte chunks: f16 d72 (9 chunks of 8),
      // yes; f16 d100 (12.5), no; f32 d100 (25 chunks of 4), yes; bf16 d36 (4.5), no.
      for (const auto& [dtype, dim, want] : {std::tuple{DType::f16, 72, true}, std::tuple{DType::f16, 100, false},
                                             std::tuple{DType::f32, 100, true}, std::tuple{DType::bf16, 36, false}}) {
        const FusedPlan p = detail::plan_fused(preset.info, KernelVariant::automatic,
                                                layouts_of(shape("chunks", dtype, 1, 8, 2, 1, 4096, dim, dim)));
        INFO(to_string(dtype) << " d" << dim << ": " << describe(p));
        CHECK(p.config.decode());
        CHECK(p.config.vec_loads == want);
        check_plan(preset, layouts_of(shape("chunks", dtype, 1, 8, 2, 1, 4096, dim, dim)), p);
      }
      // f16 d64 (whole chunks) with K rows padded to 68 elements: K's rows start off the chunk grid.
      AttentionLayouts padded = layouts_of(shape("padded K rows", DType::f16, 1, 8, 2, 1, 4096, 64, 64));
      padded.k.stride_seq = 68, padded.k.stride_head = 68 * 4096, padded.k.stride_batch = 2 * 68 * 4096;
      const FusedPlan p = detail::plan_fused(preset.info, KernelVariant::automatic, padded);
      CHECK(p.config.decode());
      CHECK_FALSE(p.config.vec_loads);
      // The same with O's rows padded: an unsplit call (one key: one split on every device) writes O
      // in chunks too, so it reads element by element; a split one writes the partials instead.
      for (const int64_t seq_k : {1, 4096}) {
        AttentionLayouts padded_o = layouts_of(shape("padded O rows", DType::f16, 1, 8, 2, 1, seq_k, 64, 64));
        padded_o.out.stride_seq = 68, padded_o.out.stride_head = 68, padded_o.out.stride_batch = 8 * 68;
        const FusedPlan po = detail::plan_fused(preset.info, KernelVariant::automatic, padded_o);
        INFO("seq_k " << seq_k << ": " << describe(po));
        CHECK(po.config.decode());
        if (seq_k == 1) CHECK(po.splits == 1);
        CHECK(po.config.vec_loads == (po.splits > 1));
      }
    }
  }

  TEST_CASE("planner presets: num_splits is honoured, capped at the key tiles and raised by device limits") {
    for (const DeviceProfile& preset : device_profiles()) {
      INFO("device: " << preset.info.name);
      const DType dtype = preset.info.supports_f16() ? DType::f16 : DType::f32;
      Shape s = shape("decode", dtype, 1, 32, 8, 1, 32768, 128, 128);
      s.causal = Causal::bottom_right;
      AttentionLayouts l = layouts_of(s);
      const FusedPlan automatic = detail::plan_fused(preset.info, KernelVariant::automatic, l);
      const uint64_t tiles = ceil_div(32768, automatic.config.keys_per_tile);
      for (uint32_t requested : {1u, 3u, 64u, 200u, 100000u}) {
        INFO("num_splits " << requested << ", automatic: " << describe(automatic));
        l.options.num_splits = requested;
        const FusedPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
        INFO("plan: " << describe(plan));
        check_plan(preset, l, plan);
        // Whole key tiles per split: the count the request rounds to.
        const uint64_t wanted = std::min<uint64_t>(tiles, requested);
        const uint64_t rounded = ceil_div(tiles, ceil_div(tiles, wanted));
        if (preset.info.is_llvmpipe) {
          // The loop limit bounds each split's keys: at least as many splits as that needs.
          CHECK(plan.splits >= rounded);
          CHECK(detail::fused_loop_iterations(plan.config, 128, 128, plan.keys_per_split / plan.config.keys_per_tile) <=
                detail::kLlvmpipeLoopBudget);
        } else {
          CHECK(plan.splits == rounded);
        }
      }
    }
  }

  TEST_CASE("planner presets: GPU decode splits the longest sequence into parts of at most 1024 keys") {
    // A batch with few workgroups: the key range is cut by length too, not only up to the target
    // workgroups (4 splits of 8192 keys here before; measured 1.5x slower on an H100).
    for (const DeviceProfile& preset : device_profiles()) {
      if (preset.info.is_cpu() || !preset.info.supports_f16()) continue;
      INFO("device: " << preset.info.name);
      Shape s = shape("decode", DType::f16, 8, 32, 8, 1, 32768, 128, 128);
      s.causal = Causal::bottom_right;
      s.kv_lengths = true;
      const AttentionLayouts l = layouts_of(s);
      const FusedPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
      INFO("plan: " << describe(plan));
      check_plan(preset, l, plan);
      CHECK(plan.keys_per_split <= 1024);
      CHECK(plan.splits >= 32);
      // A prefill that fills the device is not split for length.
      const FusedPlan prefill = detail::plan_fused(preset.info, KernelVariant::automatic,
                                                    layouts_of(shape("prefill", DType::f16, 8, 32, 8, 4096, 4096, 128, 128)));
      INFO("prefill: " << describe(prefill));
      CHECK(prefill.splits == 1);
    }
  }

  TEST_CASE("planner presets: a GPU's decode form splits keys finely and fills the device") {
    // The decode form's workgroups are one subgroup each: a GPU wants about 2048 of them, in splits of
    // 32 to 256 keys (H100, the benchmark notebook (docs/performance.md) "GPU decode form": batch 1 x 8192 keys 0.072 ms
    // with 64 splits, 0.054 with 256; the combine shares a row's splits over 256 invocations).
    for (const DeviceProfile& preset : device_profiles()) {
      if (preset.info.is_cpu() || !preset.info.supports_f16()) continue;
      for (int64_t seq_k : {1024, 8192, 32768, 131072}) {
        const Shape s = shape("decode", DType::f16, 1, 32, 8, 1, seq_k, 128, 128);
        const AttentionLayouts l = layouts_of(s);
        const FusedPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
        INFO("device: " << preset.info.name << ", seq_k " << seq_k << ", plan: " << describe(plan));
        check_plan(preset, l, plan);
        if (!plan.config.decode()) continue;  // subgroups of several sizes: the tiled kernel
        CHECK(plan.keys_per_split <= 256);
        CHECK(plan.keys_per_split >= 32);
        CHECK((uint64_t(plan.splits) * 8 >= 2048 || plan.keys_per_split <= 32 + plan.config.keys_per_tile));
        CHECK(plan.combine_workgroup == std::bit_floor(std::min<uint32_t>(256, preset.info.max_workgroup_invocations)));
      }
    }
  }

  TEST_CASE("planner presets: decode on AMD and Intel requires 32-lane subgroups, and needs size control for it") {
    // RDNA3 (wave32/64) and Arc (SIMD8/16/32) may compile a pipeline with any of their sizes: the
    // decode form runs there only as a pipeline that requires 32 lanes (subgroup size control). The
    // same device without it (or an adopted device that did not enable it) decodes on the tiled kernel.
    const Shape s = shape("decode", DType::f16, 1, 32, 8, 1, 8192, 128, 128);
    const AttentionLayouts l = layouts_of(s);
    for (const char* id : {"rdna3", "arc"}) {
      DeviceInfo d = conform::find_device_profile(id).info;
      INFO("device: " << d.name);
      REQUIRE(d.required_subgroup_size);
      const FusedPlan plan = detail::plan_fused(d, KernelVariant::automatic, l);
      CHECK(std::string(plan.config.name()) == "subgroup-decode");
      CHECK(plan.config.lanes == 32);
      CHECK(plan.config.workgroup_size() == 32);
      CHECK(plan.config.threads_per_row == 16);  // d128 f16: 16 chunks of 16 bytes
      d.required_subgroup_size = false;
      const FusedPlan tiled = detail::plan_fused(d, KernelVariant::automatic, l);
      CHECK(std::string(tiled.config.name()) == "tiled");
      expect_unsupported(d, KernelVariant::subgroup, l, "offers no subgroup size control for compute shaders");
    }
    // A size it cannot require is no plan: RDNA3's smallest is 32, so a 16-lane plan does not fit.
    DeviceInfo rdna3 = conform::find_device_profile("rdna3").info;
    CHECK(detail::runs_subgroup_lanes(rdna3, 32));
    CHECK(detail::runs_subgroup_lanes(rdna3, 64));
    CHECK_FALSE(detail::runs_subgroup_lanes(rdna3, 16));
    CHECK_FALSE(detail::runs_subgroup_lanes(rdna3, 48));
    rdna3.required_subgroup_size = false;
    CHECK_FALSE(detail::runs_subgroup_lanes(rdna3, 32));
  }

  TEST_CASE("planner presets: a GQA group larger than the grid's y dimension is refused by name") {
    const Shape s = shape("one KV head for 70000 query heads", DType::f32, 1, 70000, 1, 1, 64, 8, 8);
    for (const DeviceProfile& preset : device_profiles()) {
      INFO("device: " << preset.info.name);
      if (preset.info.max_workgroup_count[1] >= 70000) continue;
      expect_unsupported(preset.info, KernelVariant::automatic, layouts_of(s),
                         "a GQA group of 70000 query heads exceeds maxComputeWorkGroupCount[1]");
    }
  }

  TEST_CASE("planner presets: a device with too little shared memory for the head dims is refused by name") {
    DeviceInfo d = device_profiles().back().info;  // any preset: only the shared memory matters
    d.max_shared_memory = 1024;
    const Shape s = shape("d256", DType::f32, 1, 1, 1, 64, 64, 256, 256);
    for (KernelVariant v : {KernelVariant::tiled, KernelVariant::rowwise})
      expect_unsupported(d, v, layouts_of(s), "1024 bytes of shared memory, too little for dim_qk 256 and dim_v 256");
  }

  // The table of issue 11: three reference shapes on every preset. Skipped by default (it only
  // prints, and the case above already checks these plans); run with --no-skip.
  TEST_CASE("planner table: chosen tiles, workgroup, shared memory, splits and workspace per preset" *
            doctest::skip()) {
    std::vector<Shape> table = {
        shape("prefill B1 H16 S4096 d128", DType::f16, 1, 16, 16, 4096, 4096, 128, 128),
        shape("decode B1 H32/KV8 Sk8192 d128", DType::f16, 1, 32, 8, 1, 8192, 128, 128),
        shape("prefill B1 H8 S2048 d256", DType::f16, 1, 8, 8, 2048, 2048, 256, 256),
    };
    std::cout << "| device | shape | kernel | rows (of all its heads) x heads, RPT x TPR, BC | workgroup | shared bytes | splits | workspace bytes |\n"
              << "|---|---|---|---|---|---|---|---|\n";
    for (const DeviceProfile& preset : device_profiles())
      for (Shape s : table) {
        if (!preset.info.storage_16bit) s.dtype = DType::f32, s.name += " (f32)";
        const AttentionLayouts l = layouts_of(s);
        const FusedPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
        check_plan(preset, l, plan);
        const detail::KernelConfig& c = plan.config;
        std::cout << "| " << preset.info.name << " | " << s.name << " | " << c.name() << " | "
                  << c.rows << " x " << c.heads << ", " << c.rows_per_thread << " x " << c.threads_per_row << ", "
                  << c.keys_per_tile << " | " << c.workgroup_size()
                  << " | " << detail::fused_shared_bytes(c, s.dim_qk, s.dim_v) << " | " << plan.splits << " | "
                  << plan.workspace_bytes << " |\n";
      }
  }
}
