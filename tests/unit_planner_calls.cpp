// Paged and packed variable-length calls on the planner (plan_paged, plan_varlen): the dense planner
// on the caches' view and on the packed tensors, checked against every device class like a dense call
// (planner_presets.hpp).
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


TEST_SUITE("unit") {
  // A paged call (plan_paged) is the dense planner on the caches' view: its plan must fit every
  // device class like a dense one, bind the caches whole (one dispatch per range of splits, none by
  // key range), and a cache that no binding can hold must be refused by name.
  TEST_CASE("planner presets: paged decode (batch 8, GQA 32/8, d128, 32k capacity) fits every device class") {
    PagedAttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f16, 8, 32, 1, 128);
    l.out = l.q;
    l.k_cache = PagedKvLayout::dense(DType::f16, 2272, 16, 8, 128);
    l.v_cache = l.k_cache;
    l.max_pages = 2048;
    l.options.causal = Causal::bottom_right;
    for (const DeviceProfile& preset : device_profiles()) {
      INFO("device: " << preset.info.name);
      if (!preset.info.storage_16bit) {
        CHECK(contains(error_message([&] { (void)detail::plan_paged(preset.info, KernelVariant::automatic, l); }),
                       "storageBuffer16BitAccess"));
        continue;
      }
      detail::PagedCall call;
      REQUIRE_NOTHROW(call = detail::plan_paged(preset.info, KernelVariant::automatic, l));
      REQUIRE(call.planned.fused.has_value());
      const detail::FusedPlan& plan = *call.planned.fused;
      REQUIRE(plan.paged.has_value());
      CHECK(plan.paged->page_size == 16u);
      CHECK(plan.problem.seq_k == 2048 * 16);  // splits sized by the capacity
      CHECK(plan.splits > 1);
      CHECK(plan.splits_per_dispatch == plan.splits);  // caches bound whole, never by key range
      check_plan(preset, call.dense, plan);
      // The splits follow each sequence's own keys through a work list: at most the planned splits
      // per sequence, items of at least a CPU's 256 or a GPU decode form's 32 keys (whole key tiles),
      // and about the device's wanted workgroups (a CPU's 16, a GPU's 256, its decode form's 2048).
      REQUIRE(plan.work_list.has_value());
      const detail::WorkListPlan& w = *plan.work_list;
      const detail::KernelConfig& c = plan.config;
      CHECK(w.max_items == 8 * plan.splits);
      CHECK(w.min_keys <= plan.keys_per_split);
      CHECK(w.min_keys % c.keys_per_tile == 0);
      CHECK(w.min_keys >= std::min<uint64_t>(preset.info.is_cpu() ? 256 : c.decode() ? 32 : c.keys_per_tile, plan.keys_per_split));
      const uint64_t per_item = uint64_t(plan.tiles_per_range) * (8 * 4 / c.heads_per_workgroup(4));
      const uint64_t wanted = preset.info.is_cpu() ? 16 : c.decode() ? 2048 : 256;
      CHECK(w.target_items == std::clamp<uint64_t>((wanted + per_item - 1) / per_item, 1, w.max_items - 8));
      CHECK(w.offset % plan.alignment == 0);
      CHECK(w.offset >= plan.partial_o_bytes + plan.partial_lse_bytes);
      CHECK(w.offset + w.words * 4 + plan.alignment <= plan.workspace_bytes);
      CHECK(w.words == WORK_LIST_ITEMS + w.max_items + 8 + 1);
      // On a CPU device the decode form touches the rows 16 keys ahead (nhd pages' rows are far
      // apart); on a GPU, and for dense K/V (below), it does not.
      CHECK(c.prefetch_keys == (preset.info.is_cpu() && c.decode() ? 16u : 0u));
      if (preset.info.is_cpu()) CHECK(c.decode());
      // A dense call with key lengths has one too; without them, or with a mask (whose binding the
      // list takes), its splits stay by seq_k.
      AttentionLayouts dense = call.dense;
      dense.k = dense.v = TensorLayout::bhsd(DType::f16, 8, 8, 2048 * 16, 128);
      CHECK(detail::plan_fused(preset.info, KernelVariant::automatic, dense).work_list.has_value());
      CHECK(detail::plan_fused(preset.info, KernelVariant::automatic, dense).config.prefetch_keys == 0);
      {  // BSHD K and V (a head's rows 8 heads apart): touched ahead on a CPU device, as nhd pages are
        AttentionLayouts bshd = dense;
        bshd.k = bshd.v = TensorLayout::bshd(DType::f16, 8, 2048 * 16, 8, 128);
        const FusedPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, bshd);
        CHECK(plan.config.prefetch_keys == (preset.info.is_cpu() && plan.config.decode() ? 16u : 0u));
      }
      dense.has_kv_lengths = false;
      CHECK_FALSE(detail::plan_fused(preset.info, KernelVariant::automatic, dense).work_list.has_value());
      dense.has_kv_lengths = true;
      dense.mask = MaskLayout::dense(MaskType::boolean, 8, 32, 1, 2048 * 16);
      CHECK_FALSE(detail::plan_fused(preset.info, KernelVariant::automatic, dense).work_list.has_value());
    }
    // 2^27 bytes is lavapipe's binding range: a cache of 2^27 bytes (plus the offset alignment) is refused.
    const DeviceProfile& llvmpipe = conform::find_device_profile("llvmpipe");
    PagedAttentionLayouts big = l;
    big.k_cache = PagedKvLayout::dense(DType::f16, 32768, 16, 8, 16);
    big.v_cache = big.k_cache;
    big.q = TensorLayout::bhsd(DType::f16, 8, 32, 1, 16);
    big.out = big.q;
    REQUIRE(llvmpipe.info.max_storage_buffer_range == (uint64_t(1) << 27));
    CHECK(contains(error_message([&] { (void)detail::plan_paged(llvmpipe.info, KernelVariant::automatic, big); }),
                   "a paged cache is bound whole and must fit one binding"));
  }
}

TEST_SUITE("unit") {
  // A packed variable-length call (plan_varlen) is the dense planner on the packed tensors, sized by
  // the longest sequence: one chunk, one range of query tiles covering max_seqlen_q rows, splits
  // covering max_seqlen_k keys within lavapipe's loop budget, and split-KV partials for every packed
  // row of every head (the combine's batch-1 view).
  TEST_CASE("planner presets: varlen decode and prefill fit every device class") {
    struct VarlenShape {
      const char* name;
      int64_t batch, total_q, total_k, max_q, max_k;
    };
    for (const VarlenShape& s : {VarlenShape{"decode", 16, 16, 16 * 2048, 1, 4096},
                                 VarlenShape{"prefill", 4, 4096, 4096, 2048, 2048}}) {
      VarlenAttentionLayouts l;
      l.q = packed_layout(DType::f16, s.total_q, 32, 128);
      l.out = l.q;
      l.k = packed_layout(DType::f16, s.total_k, 8, 128);
      l.v = l.k;
      l.batch = s.batch;
      l.max_seqlen_q = s.max_q;
      l.max_seqlen_k = s.max_k;
      l.has_lse = true;
      l.options.causal = Causal::bottom_right;
      for (const DeviceProfile& preset : device_profiles()) {
        INFO("device: " << preset.info.name << ", " << s.name);
        const DeviceInfo& d = preset.info;
        if (!d.storage_16bit) {
          CHECK(contains(error_message([&] { (void)detail::plan_varlen(d, KernelVariant::automatic, l); }),
                         "storageBuffer16BitAccess"));
          continue;
        }
        detail::VarlenCall call;
        REQUIRE_NOTHROW(call = detail::plan_varlen(d, KernelVariant::automatic, l));
        REQUIRE(call.planned.fused.has_value());
        const FusedPlan& plan = *call.planned.fused;
        const detail::KernelConfig& c = plan.config;
        INFO("plan: " << describe(plan));
        REQUIRE(plan.varlen.has_value());
        CHECK(plan.problem.batch == 1);
        CHECK(plan.problem.seq_q == s.total_q);
        CHECK(plan.batch_chunk == s.batch);
        CHECK(plan.head_chunk == 32);
        CHECK(plan.query_ranges == 1);
        CHECK(plan.tiles_per_range == plan.query_tiles);
        CHECK(uint64_t(plan.query_tiles) * c.rows >= uint64_t(s.max_q) * c.heads_per_workgroup(4));
        CHECK(uint64_t(plan.splits) * plan.keys_per_split >= uint64_t(s.max_k));
        CHECK(uint64_t(plan.splits - 1) * plan.keys_per_split < uint64_t(s.max_k));
        CHECK(plan.splits_per_dispatch >= 1);
        CHECK(uint64_t(s.batch) * plan.splits_per_dispatch <= d.max_workgroup_count[2]);
        CHECK(plan.query_tiles <= d.max_workgroup_count[0]);
        // A head's packed K/V rows are 8 heads apart: on a CPU device decode touches them 16 keys
        // ahead and splits the longest sequence into runs of at most 1024 keys.
        CHECK(c.prefetch_keys == (d.is_cpu() && c.decode() ? 16u : 0u));
        if (d.is_cpu() && c.decode()) CHECK(plan.keys_per_split <= 1024);
        if (plan.splits > 1) {
          CHECK(plan.partial_o_bytes == uint64_t(plan.splits) * 32 * uint64_t(s.total_q) * 128 * 4);
          CHECK(plan.partial_lse_bytes == uint64_t(plan.splits) * 32 * uint64_t(s.total_q) * 8);
          CHECK(plan.partial_o_bytes <= d.max_storage_buffer_range);
          // Split by each sequence's own keys (the work list), within the split-indexed partials.
          REQUIRE(plan.work_list.has_value());
          CHECK(plan.work_list->max_items == uint32_t(s.batch) * plan.splits);
          CHECK(plan.workspace_bytes >= plan.work_list->offset + plan.work_list->words * 4);
        } else {
          CHECK(plan.workspace_bytes == (c.careful_pass() ? plan.redo_offset + plan.redo_bytes + plan.alignment : 0));
          CHECK_FALSE(plan.work_list.has_value());
        }
        if (d.is_llvmpipe)
          CHECK(detail::fused_loop_iterations(c, 128, 128, plan.keys_per_split / c.keys_per_tile) <=
                detail::kLlvmpipeLoopBudget);
      }
    }
  }

  TEST_CASE("planner: varlen plans q8_0 K and V without vector reads, and refuses max_seqlen past the totals") {
    const DeviceProfile& llvmpipe = conform::find_device_profile("llvmpipe");
    VarlenAttentionLayouts l;
    l.q = packed_layout(DType::f32, 8, 4, 64);
    l.out = l.q;
    l.k = packed_layout(DType::f32, 8, 1, 64);
    l.v = l.k;
    l.batch = 2;
    l.max_seqlen_q = 9;
    CHECK(contains(error_message([&] { (void)detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l); }),
                   "max_seqlen_q (9) must be in [0, total_q (8)]"));
    l.max_seqlen_q = 0;
    l.q = l.out = packed_layout(DType::f16, 2, 4, 64);  // decode: the subgroup kernel's decode form
    l.k = l.v = packed_layout(DType::f16, 4000, 1, 64);
    l.kv_quant = KvQuant::none;
    CHECK(detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l).planned.fused->config.vec_loads);
    l.kv_quant = KvQuant::q8_0;  // read block by block (kv_values.glsl), never as 16-byte vectors
    const detail::FusedPlan q8 = *detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l).planned.fused;
    CHECK(q8.config.decode());
    CHECK_FALSE(q8.config.vec_loads);
    CHECK(q8.problem.kv_quant == KvQuant::q8_0);
  }

  TEST_CASE("planner: varlen with the weights plans the three-stage path for the packed batch") {
    const DeviceProfile& llvmpipe = conform::find_device_profile("llvmpipe");
    VarlenAttentionLayouts l;
    l.q = l.out = packed_layout(DType::f16, 40, 8, 64);
    l.k = l.v = packed_layout(DType::f16, 300, 2, 64);
    l.batch = 5;
    l.weights = true;
    detail::VarlenCall call = detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l);
    REQUIRE(call.planned.unfused.has_value());
    CHECK_FALSE(call.planned.fused.has_value());
    CHECK(call.planned.unfused->varlen_batch == 5);
    CHECK(call.planned.unfused->weights);
    CHECK(call.planned.problem().seq_q == 40);
    CHECK(call.planned.problem().seq_k == 300);
    CHECK(call.planned.workspace_bytes() == 0);  // the scores are P, in the caller's buffer
    l.weights = false;
    l.path = AttentionPath::unfused;  // asked for: the scores go to the workspace
    call = detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l);
    REQUIRE(call.planned.unfused.has_value());
    CHECK(call.planned.workspace_bytes() >= uint64_t(8 * 40 * 300 * 4));
    l.weights = true;
    l.path = AttentionPath::fused;
    CHECK(contains(error_message([&] { (void)detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l); }),
                   "path: fused, but the weights P were requested"));
    l.path = AttentionPath::automatic;
    l.k = l.v = packed_layout(DType::f16, 320, 2, 64);
    l.kv_quant = KvQuant::q8_0;
    CHECK(contains(error_message([&] { (void)detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l); }),
                   "run on the fused path only"));
  }
}
