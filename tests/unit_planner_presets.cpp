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
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "attention_plan.hpp"
#include "varlen_plan.hpp"
#include "conform/device_profiles.hpp"
#include "llvmpipe_limits.hpp"
#include "support.hpp"
#include "vkattn/error.hpp"

using namespace vkattn;
using namespace vkattn::test;
using vkattn::conform::DeviceProfile;
using vkattn::conform::device_profiles;
using detail::LaunchPlan;

namespace {

struct Shape {
  std::string name;
  DType dtype = DType::f16;
  int64_t batch = 1, heads = 16, kv_heads = 16, seq_q = 512, seq_k = 512, dim_qk = 128, dim_v = 128;
  Causal causal = Causal::none;
  bool bshd = false, lse = false, kv_lengths = false;
  bool mask = false;  // dense f16 (1, 1, seq_q, seq_k), broadcast over batch and heads
};

AttentionLayouts layouts_of(const Shape& s) {
  const auto layout = [&](int64_t heads, int64_t seq, int64_t dim) {
    return s.bshd ? TensorLayout::bshd(s.dtype, s.batch, seq, heads, dim)
                  : TensorLayout::bhsd(s.dtype, s.batch, heads, seq, dim);
  };
  AttentionLayouts l;
  l.q = layout(s.heads, s.seq_q, s.dim_qk);
  l.k = layout(s.kv_heads, s.seq_k, s.dim_qk);
  l.v = layout(s.kv_heads, s.seq_k, s.dim_v);
  l.out = layout(s.heads, s.seq_q, s.dim_v);
  if (s.mask) l.mask = MaskLayout::dense(MaskType::f16, 1, 1, s.seq_q, s.seq_k);
  l.has_lse = s.lse;
  l.has_kv_lengths = s.kv_lengths;
  l.options.causal = s.causal;
  return l;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

std::string describe(const LaunchPlan& p) {
  std::ostringstream s;
  s << p.config.name() << " rows " << p.config.rows << " x heads " << p.config.heads << " RPT " << p.config.rows_per_thread
    << " TPR " << p.config.threads_per_row << (p.config.vec_loads ? " chunked" : "")
    << " BC " << p.config.keys_per_tile << " wg " << p.config.workgroup_size() << ", " << p.splits << " splits of "
    << p.keys_per_split << " keys (" << p.splits_per_dispatch << " per dispatch), " << p.query_tiles << " query tiles in "
    << p.query_ranges << " ranges of " << p.tiles_per_range << ", chunks " << p.batch_chunk << " x " << p.head_chunk
    << ", workspace " << p.workspace_bytes;
  return s.str();
}

// Bytes one binding of `l` cut to nb batches x nh heads x seq rows spans at worst: the elements
// from the first to the last, rounded up to whole 32-bit words, plus the up to alignment - 1 bytes
// binding from an aligned offset adds in front (the planner's own accounting, restated).
uint64_t binding_bytes(TensorLayout l, int64_t nb, int64_t nh, int64_t seq, uint64_t alignment) {
  l.offset = 0;
  l.batch = nb, l.heads = nh, l.seq = seq;
  return alignment - 1 + ceil_div(uint64_t(l.required_elements()) * dtype_size(l.dtype), 4) * 4;
}

// Every limit the plan must respect on `d`, and that it covers the whole problem.
void check_plan(const DeviceProfile& preset, const AttentionLayouts& l, const LaunchPlan& plan) {
  const DeviceInfo& d = preset.info;
  const AttentionProblem& p = plan.problem;
  const detail::KernelConfig& c = plan.config;
  INFO("plan: " << describe(plan));

  // Shared memory and invocations (the combine pass's workgroup too).
  CHECK(detail::fused_shared_bytes(c, p.dim_qk, p.dim_v) <= d.max_shared_memory);
  const uint32_t wg = c.workgroup_size();
  CHECK(wg >= 1);
  CHECK(wg <= d.max_workgroup_invocations);
  if (plan.splits > 1) CHECK(plan.combine_workgroup <= d.max_workgroup_invocations);
  if (c.is(detail::FusedKernel::rowwise)) CHECK(c.rows % 4 == 0);  // four rows per invocation (a vec4)
  if (c.one_subgroup()) {
    // One workgroup is one subgroup: of the device's one size, or of a size its pipelines can
    // require (a power of two in [min, max]); whole rows per invocation.
    const bool one_size = d.min_subgroup_size == d.subgroup_size && d.max_subgroup_size == d.subgroup_size;
    if (one_size) CHECK(c.lanes == d.subgroup_size);
    else
      CHECK((d.required_subgroup_size && std::has_single_bit(c.lanes) && c.lanes >= d.min_subgroup_size &&
             c.lanes <= d.max_subgroup_size));
    CHECK(wg == c.lanes);
    CHECK(d.subgroup_shuffle);
    if (c.decode()) {
      // The decode form: every lane holds all rows (1, 2 or 4), groups of TPR lanes split the head
      // dims (all lanes, or enough 16-byte chunks to cover them), each group its own keys of an
      // iteration.
      CHECK(c.pack_group);
      CHECK(std::has_single_bit(c.rows));
      CHECK(c.rows <= 4);
      const uint32_t tpr = c.threads_per_row;
      CHECK(std::has_single_bit(tpr));
      CHECK(c.lanes % tpr == 0);
      const int64_t chunk = int64_t(detail::kDecodeChunkBytes / dtype_size(p.dtype));
      CHECK((tpr == c.lanes || int64_t(tpr) * chunk >= std::max(p.dim_qk, p.dim_v)));
      CHECK((tpr == 1 || int64_t(tpr / 2) * chunk < std::max(p.dim_qk, p.dim_v)));  // no lane idles
      CHECK(c.key_groups() == c.lanes / tpr);
      CHECK(c.keys_per_tile % c.key_groups() == 0);
      // The 16-byte K loads a lane's fast loop unrolls per iteration (keys x its chunks of a row):
      // at most 16, and 32 times the rows (attention_plan.cpp: Mesa 25.0.7's JIT time).
      const uint64_t keys = c.keys_per_tile / c.key_groups();
      const uint64_t per_lane = ceil_div(ceil_div(uint64_t(std::max(p.dim_qk, p.dim_v)), uint64_t(chunk)), uint64_t(tpr));
      CHECK((keys == 1 || (keys * per_lane <= 16 && keys * per_lane * c.rows <= 32)));
    } else {
      CHECK(c.rows % c.lanes == 0);
      CHECK(!c.vec_loads);
    }
  }
  if (!c.is(detail::FusedKernel::rowwise) && !c.one_subgroup()) {
    // tiled: row groups of TPR lanes exchange partial dot products with subgroupShuffleXor, so TPR
    // divides every subgroup size the driver may pick (min_subgroup_size), and 8 (lavapipe's, where
    // every preset's plans are proven by conform --profile); 1 (no subgroup operations) otherwise.
    const uint32_t tpr = c.threads_per_row;
    CHECK(std::has_single_bit(tpr));
    CHECK(8 % tpr == 0);
    if (tpr > 1) {
      CHECK(d.subgroup_shuffle);
      CHECK(d.min_subgroup_size % tpr == 0);
    }
    CHECK(c.keys_per_tile % tpr == 0);
    CHECK(c.rows_per_thread >= 1);
    CHECK(c.rows % c.rows_per_thread == 0);
    CHECK(c.rows % c.heads == 0);
    CHECK(c.slot_bytes == (p.dtype == DType::f32 ? 16u : 8u));
    if (c.heads > 1) CHECK(c.heads == uint32_t(p.group_size()));
    // Prefill workgroups are whole subgroups of every size the device may pick.
    if (!d.is_cpu() && p.seq_q >= 1024) CHECK(wg % d.max_subgroup_size == 0);
  }
  // No subgroup is left partly empty by the workgroup's shape beyond one: a power of two is a whole
  // number of subgroups of every (power-of-two) size the driver may pick, or lies within one.
  CHECK(std::has_single_bit(wg));

  // GQA packing (the subgroup kernel, decode): a workgroup's rows are a group's heads x seq_q, in one
  // range of tiles (the kernel's partial rows assume it), with no fewer rows per invocation than
  // needed and no more than one tile's worth of rows left empty. The tiled kernel's packed rows
  // (KernelConfig::heads) count the same way.
  const uint64_t tile_rows = uint64_t(p.seq_q) * c.heads_per_workgroup(p.group_size());
  if (c.heads > 1) CHECK(plan.query_ranges == 1);
  if (c.pack_group) {
    CHECK(c.one_subgroup());
    CHECK(plan.query_ranges == 1);
    CHECK(c.heads_per_workgroup(p.group_size()) == uint32_t(p.group_size()));
    if (c.rows > c.lanes) CHECK(uint64_t(c.rows / 2) < tile_rows);
    if (c.decode()) CHECK(tile_rows <= 16);
    if (c.decode()) CHECK((c.rows == 4 || uint64_t(c.rows) >= tile_rows));
  }
  // 16-byte chunks only where every row of Q, K and V is whole chunks at chunk-aligned strides.
  if (c.vec_loads) {
    CHECK(c.decode());
    const int64_t chunk = 16 / int64_t(dtype_size(p.dtype));
    for (const TensorLayout* t : {&l.q, &l.k, &l.v})
      CHECK((t->dim % chunk == 0 && t->stride_batch % chunk == 0 && t->stride_head % chunk == 0 &&
             t->stride_seq % chunk == 0));
  }
  // The whole problem is covered: query tiles and their ranges, splits of whole key tiles.
  CHECK(uint64_t(plan.query_tiles) * c.rows >= tile_rows);
  CHECK(uint64_t(plan.query_tiles - 1) * c.rows < tile_rows);
  CHECK(uint64_t(plan.tiles_per_range) * plan.query_ranges >= plan.query_tiles);
  CHECK(plan.keys_per_split % c.keys_per_tile == 0);
  CHECK(uint64_t(plan.splits) * plan.keys_per_split >= uint64_t(p.seq_k));
  CHECK(uint64_t(plan.splits - 1) * plan.keys_per_split < uint64_t(p.seq_k));
  CHECK(plan.splits_per_dispatch >= 1);
  CHECK(plan.batch_chunk >= 1);
  CHECK(plan.head_chunk >= 1);
  CHECK(plan.head_chunk % p.group_size() == 0);  // whole GQA groups

  // The grid of each dispatch (attention.cpp): (tiles of a range, heads of a chunk, batches of a
  // chunk x splits of a dispatch); the combine covers a range's rows of a chunk in (x, y).
  CHECK(plan.tiles_per_range <= d.max_workgroup_count[0]);
  CHECK(uint64_t(plan.head_chunk) <= d.max_workgroup_count[1]);
  CHECK(uint64_t(plan.batch_chunk) <= d.max_workgroup_count[2]);
  CHECK(uint64_t(plan.batch_chunk) * plan.splits_per_dispatch <= d.max_workgroup_count[2]);
  const uint64_t range_rows = std::min<uint64_t>(uint64_t(plan.tiles_per_range) * c.rows, p.seq_q);
  const uint64_t combine_rows = uint64_t(plan.batch_chunk) * plan.head_chunk * range_rows;
  if (plan.splits > 1) {
    const uint64_t gx = std::min<uint64_t>(combine_rows, d.max_workgroup_count[0]);
    CHECK(ceil_div(combine_rows, gx) <= d.max_workgroup_count[1]);
  }

  // Every binding of one dispatch: Q and O of a chunk, K and V of a chunk's KV heads over the keys of
  // one dispatch's splits, the LSE rows and mask of the chunk, the split partials.
  const uint64_t range = d.max_storage_buffer_range;
  const uint64_t alignment = std::max<uint64_t>(d.min_storage_buffer_offset_alignment, 16);
  const int64_t nb = plan.batch_chunk, nh = plan.head_chunk, nkv = nh / p.group_size();
  const int64_t keys = std::min<int64_t>(p.seq_k, int64_t(plan.splits_per_dispatch) * plan.keys_per_split);
  CHECK(binding_bytes(l.q, nb, nh, p.seq_q, alignment) <= range);
  CHECK(binding_bytes(l.out, nb, nh, p.seq_q, alignment) <= range);
  CHECK(binding_bytes(l.k, nb, nkv, keys, alignment) <= range);
  CHECK(binding_bytes(l.v, nb, nkv, keys, alignment) <= range);
  if (l.has_lse) CHECK(uint64_t(nb * nh * p.seq_q) * 4 + alignment <= range);
  if (l.mask) {
    MaskLayout m = *l.mask;
    m.offset = 0;
    if (m.batch > 1) m.batch = nb;
    if (m.heads > 1) m.heads = nh;
    CHECK(uint64_t(m.required_elements()) * mask_type_size(m.type) + alignment <= range);
  }
  CHECK(plan.partial_o_bytes <= range);
  CHECK(plan.partial_lse_bytes <= range);

  // The workspace: none without splits and without the careful pass; else within
  // min(fused_workspace_budget, binding range), except when one query tile of one GQA group of one
  // batch alone exceeds it (attention.hpp).
  const uint64_t bound = std::min(fused_workspace_budget, range);
  if (plan.splits == 1 && !c.careful_pass()) CHECK(plan.workspace_bytes == 0);
  // The careful pass's ballots: 16 bytes per workgroup of the largest dispatch, aligned, after the
  // partials and the work list, inside the workspace.
  CHECK(c.careful_pass() == (c.one_subgroup() && !c.decode()));
  if (c.careful_pass()) {
    const uint64_t batches = plan.varlen ? uint64_t(plan.varlen->batch) : uint64_t(nb);
    CHECK(plan.redo_bytes == uint64_t(plan.tiles_per_range) * uint64_t(nh / c.heads_per_workgroup(p.group_size())) *
                                 batches * plan.splits_per_dispatch * 16);
    CHECK(plan.redo_offset % alignment == 0);
    CHECK(plan.redo_offset >= (plan.splits > 1 ? plan.partial_o_bytes + plan.partial_lse_bytes : 0));
    if (plan.work_list) CHECK(plan.redo_offset >= plan.work_list->offset + plan.work_list->words * 4);
    CHECK(plan.workspace_bytes >= plan.redo_offset + plan.redo_bytes + alignment);
  } else {
    CHECK(plan.redo_bytes == 0);
  }
  const bool single_tile = plan.tiles_per_range == 1 && nb == 1 && nh == p.group_size();
  if (!single_tile) CHECK(plan.workspace_bytes <= bound);
  CHECK(plan.workspace_bytes >= plan.partial_o_bytes + plan.partial_lse_bytes);

  // lavapipe ends each invocation's loops silently past its limit: every split stays under budget.
  if (d.is_llvmpipe)
    CHECK(detail::fused_loop_iterations(c, p.dim_qk, p.dim_v, plan.keys_per_split / c.keys_per_tile) <=
          detail::kLlvmpipeLoopBudget);
}

Shape shape(std::string name, DType dtype, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k,
            int64_t dim_qk, int64_t dim_v) {
  Shape s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.batch = batch, s.heads = heads, s.kv_heads = kv_heads, s.seq_q = seq_q, s.seq_k = seq_k;
  s.dim_qk = dim_qk, s.dim_v = dim_v;
  return s;
}

std::vector<Shape> shapes() {
  std::vector<Shape> v;
  for (DType t : {DType::f16, DType::f32}) {
    const std::string ts = to_string(t);
    for (int64_t d : {64, 128, 256})
      for (int64_t seq : {512, 4096})
        v.push_back(shape("prefill " + ts + " d" + std::to_string(d) + " seq " + std::to_string(seq), t, 1, 16, 16, seq,
                          seq, d, d));
    for (int64_t seq_k : {4096, 65536})
      v.push_back(shape("decode " + ts + " H32/KV8 d128 seq_k " + std::to_string(seq_k), t, 1, 32, 8, 1, seq_k, 128, 128));
    v.push_back(shape("decode " + ts + " H32/KV8 d128 seq_q 4 seq_k 8192", t, 4, 32, 8, 4, 8192, 128, 128));
    // d256 decode in groups of 1, 2 and 4 query heads: a CPU device's lane holds 4 (f16) or 8 (f32)
    // of a row's 16-byte chunks, so the keys per iteration shrink with the rows and chunks.
    for (int64_t heads : {8, 16, 32})
      v.push_back(shape("decode " + ts + " H" + std::to_string(heads) + "/KV8 d256 seq_k 8192", t, 1, heads, 8, 1, 8192,
                        256, 256));
    for (int64_t d : {1, 21, 203}) v.push_back(shape("odd " + ts + " d" + std::to_string(d), t, 2, 3, 3, 37, 300, d, d));
    v.push_back(shape("dim_qk 203 dim_v 21 " + ts, t, 2, 4, 2, 37, 300, 203, 21));
    v.push_back(shape("dim_qk 21 dim_v 256 " + ts, t, 2, 4, 2, 37, 300, 21, 256));
    v.push_back(shape("dim_qk 256 dim_v 8 " + ts, t, 1, 4, 4, 1000, 1000, 256, 8));
  }
  Shape causal = shape("causal bottom-right bshd, LSE, mask, kv_lengths", DType::f16, 3, 8, 2, 100, 1000, 128, 128);
  causal.causal = Causal::bottom_right;
  causal.bshd = causal.lse = causal.mask = causal.kv_lengths = true;
  v.push_back(causal);
  Shape top_left = shape("causal top-left long prefill", DType::f32, 2, 8, 8, 16384, 16384, 64, 64);
  top_left.causal = Causal::top_left;
  top_left.lse = true;
  v.push_back(top_left);
  // Beyond maxComputeWorkGroupCount[2] batches, and (for 65535-head devices) [1] heads.
  v.push_back(shape("batch 70000", DType::f32, 70000, 1, 1, 1, 16, 8, 8));
  v.push_back(shape("heads 70000 (MHA)", DType::f16, 1, 70000, 70000, 2, 64, 8, 8));
  // K and V of one KV head beyond a 2^27-byte binding (key ranges), and many splits of the output.
  v.push_back(shape("decode seq_k 600000 d128 f16", DType::f16, 1, 8, 1, 1, 600000, 128, 128));
  v.push_back(shape("prefill seq 32768 d256 f16 (workspace ranges)", DType::f16, 1, 8, 8, 32768, 32768, 256, 256));
  v.push_back(shape("batch 64 x 32 heads decode seq_k 32768", DType::f16, 64, 32, 8, 1, 32768, 128, 128));
  return v;
}

const char* variant_name(KernelVariant v) { return to_string(v); }

// plan_fused refuses `l` on `device` as beyond what the device can do (ErrorCode::unsupported), with
// a message containing `part`.
void expect_unsupported(const DeviceInfo& device, KernelVariant v, const AttentionLayouts& l, const std::string& part) {
  const ThrownError e = thrown_error([&] { detail::plan_fused(device, v, l); });
  INFO("message: " << e.message);
  CHECK_MESSAGE(contains(e.message, part), "expected '" << part << "'");
  CHECK(e.code == code_name(ErrorCode::unsupported));
}

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
          LaunchPlan plan;
          REQUIRE_NOTHROW(plan = detail::plan_fused(preset.info, v, l));
          // automatic: on CPU devices the subgroup kernel where shuffles exist (at every head dim),
          // else rowwise for prefill (seq_q >= 16). The subgroup kernel packs a GQA group below one
          // tile of query rows.
          const bool cpu_auto = v == KernelVariant::automatic && preset.info.is_cpu();
          const bool cpu_prefill = cpu_auto && s.seq_q >= 16;
          const bool subgroup_runs = preset.info.subgroup_shuffle && lanes != 0;
          // Wherever the subgroup kernel can run (on GPUs: one subgroup size, or a size required), decode
          // (a GQA group's rows up to 16, not a CPU device's prefill) takes the decode form up to 256 dims.
          const bool decode_form = v == KernelVariant::automatic && !cpu_prefill && preset.info.subgroup_shuffle &&
                                   lanes != 0 && s.seq_q * (s.heads / s.kv_heads) <= 16 &&
                                   std::max(s.dim_qk, s.dim_v) <= 256;
          CHECK(plan.config.one_subgroup() == (v == KernelVariant::subgroup || (cpu_auto && subgroup_runs) || decode_form));
          if (decode_form) CHECK(plan.config.decode());
          if (plan.config.one_subgroup()) CHECK(plan.config.lanes == lanes);
          CHECK(plan.config.is(detail::FusedKernel::rowwise) == (v == KernelVariant::rowwise || (cpu_prefill && !subgroup_runs)));
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
          const LaunchPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
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
        const LaunchPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic,
                                                   layouts_of(shape("decode", DType::f16, 2, 32, 8, seq_q, 20000, 128, 128)));
        INFO("seq_q " << seq_q << ": " << describe(plan));
        CHECK(plan.config.pack_group);
        CHECK(plan.query_tiles == ceil_div(uint64_t(seq_q) * 4, plan.config.rows));
        CHECK(plan.config.decode() == (seq_q <= 4));
        if (seq_q <= 4) CHECK(plan.config.rows == 4);
        else CHECK(plan.config.rows == std::min<uint32_t>(4, std::bit_ceil(uint32_t(ceil_div(seq_q * 4, 8)))) * 8);
      }
      // MHA decode: a group of one head, the decode form with one row.
      const LaunchPlan mha = detail::plan_fused(preset.info, KernelVariant::automatic,
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
        const LaunchPlan p = detail::plan_fused(preset.info, KernelVariant::automatic,
                                                layouts_of(shape("chunks", dtype, 1, 8, 2, 1, 4096, dim, dim)));
        INFO(to_string(dtype) << " d" << dim << ": " << describe(p));
        CHECK(p.config.decode());
        CHECK(p.config.vec_loads == want);
        check_plan(preset, layouts_of(shape("chunks", dtype, 1, 8, 2, 1, 4096, dim, dim)), p);
      }
      // f16 d64 (whole chunks) with K rows padded to 68 elements: K's rows start off the chunk grid.
      AttentionLayouts padded = layouts_of(shape("padded K rows", DType::f16, 1, 8, 2, 1, 4096, 64, 64));
      padded.k.stride_seq = 68, padded.k.stride_head = 68 * 4096, padded.k.stride_batch = 2 * 68 * 4096;
      const LaunchPlan p = detail::plan_fused(preset.info, KernelVariant::automatic, padded);
      CHECK(p.config.decode());
      CHECK_FALSE(p.config.vec_loads);
      // The same with O's rows padded: an unsplit call (one key: one split on every device) writes O
      // in chunks too, so it reads element by element; a split one writes the partials instead.
      for (const int64_t seq_k : {1, 4096}) {
        AttentionLayouts padded_o = layouts_of(shape("padded O rows", DType::f16, 1, 8, 2, 1, seq_k, 64, 64));
        padded_o.out.stride_seq = 68, padded_o.out.stride_head = 68, padded_o.out.stride_batch = 8 * 68;
        const LaunchPlan po = detail::plan_fused(preset.info, KernelVariant::automatic, padded_o);
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
      const LaunchPlan automatic = detail::plan_fused(preset.info, KernelVariant::automatic, l);
      const uint64_t tiles = ceil_div(32768, automatic.config.keys_per_tile);
      for (uint32_t requested : {1u, 3u, 64u, 200u, 100000u}) {
        INFO("num_splits " << requested << ", automatic: " << describe(automatic));
        l.options.num_splits = requested;
        const LaunchPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
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
      const LaunchPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
      INFO("plan: " << describe(plan));
      check_plan(preset, l, plan);
      CHECK(plan.keys_per_split <= 1024);
      CHECK(plan.splits >= 32);
      // A prefill that fills the device is not split for length.
      const LaunchPlan prefill = detail::plan_fused(preset.info, KernelVariant::automatic,
                                                    layouts_of(shape("prefill", DType::f16, 8, 32, 8, 4096, 4096, 128, 128)));
      INFO("prefill: " << describe(prefill));
      CHECK(prefill.splits == 1);
    }
  }

  TEST_CASE("planner presets: a GPU's decode form splits keys finely and fills the device") {
    // The decode form's workgroups are one subgroup each: a GPU wants about 2048 of them, in splits of
    // 32 to 256 keys (H100, bench/results/README.md "GPU decode form": batch 1 x 8192 keys 0.072 ms
    // with 64 splits, 0.054 with 256; the combine shares a row's splits over 256 invocations).
    for (const DeviceProfile& preset : device_profiles()) {
      if (preset.info.is_cpu() || !preset.info.supports_f16()) continue;
      for (int64_t seq_k : {1024, 8192, 32768, 131072}) {
        const Shape s = shape("decode", DType::f16, 1, 32, 8, 1, seq_k, 128, 128);
        const AttentionLayouts l = layouts_of(s);
        const LaunchPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
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
      const LaunchPlan plan = detail::plan_fused(d, KernelVariant::automatic, l);
      CHECK(std::string(plan.config.name()) == "subgroup-decode");
      CHECK(plan.config.lanes == 32);
      CHECK(plan.config.workgroup_size() == 32);
      CHECK(plan.config.threads_per_row == 16);  // d128 f16: 16 chunks of 16 bytes
      d.required_subgroup_size = false;
      const LaunchPlan tiled = detail::plan_fused(d, KernelVariant::automatic, l);
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
        const LaunchPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, l);
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
      REQUIRE(call.plan.paged.has_value());
      CHECK(call.plan.paged->page_size == 16u);
      CHECK(call.plan.problem.seq_k == 2048 * 16);  // splits sized by the capacity
      CHECK(call.plan.splits > 1);
      CHECK(call.plan.splits_per_dispatch == call.plan.splits);  // caches bound whole, never by key range
      check_plan(preset, call.dense, call.plan);
      // The splits follow each sequence's own keys through a work list: at most the planned splits
      // per sequence, items of at least a CPU's 256 or a GPU decode form's 32 keys (whole key tiles),
      // and about the device's wanted workgroups (a CPU's 16, a GPU's 256, its decode form's 2048).
      REQUIRE(call.plan.work_list.has_value());
      const detail::WorkListPlan& w = *call.plan.work_list;
      const detail::KernelConfig& c = call.plan.config;
      CHECK(w.max_items == 8 * call.plan.splits);
      CHECK(w.min_keys <= call.plan.keys_per_split);
      CHECK(w.min_keys % c.keys_per_tile == 0);
      CHECK(w.min_keys >= std::min<uint64_t>(preset.info.is_cpu() ? 256 : c.decode() ? 32 : c.keys_per_tile, call.plan.keys_per_split));
      const uint64_t per_item = uint64_t(call.plan.tiles_per_range) * (8 * 4 / c.heads_per_workgroup(4));
      const uint64_t wanted = preset.info.is_cpu() ? 16 : c.decode() ? 2048 : 256;
      CHECK(w.target_items == std::clamp<uint64_t>((wanted + per_item - 1) / per_item, 1, w.max_items - 8));
      CHECK(w.offset % call.plan.alignment == 0);
      CHECK(w.offset >= call.plan.partial_o_bytes + call.plan.partial_lse_bytes);
      CHECK(w.offset + w.words * 4 + call.plan.alignment <= call.plan.workspace_bytes);
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
        const LaunchPlan plan = detail::plan_fused(preset.info, KernelVariant::automatic, bshd);
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
        const LaunchPlan& plan = *call.planned.fused;
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
    const detail::LaunchPlan q8 = *detail::plan_varlen(llvmpipe.info, KernelVariant::automatic, l).planned.fused;
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
