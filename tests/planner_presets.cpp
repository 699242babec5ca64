// The planner tests' shapes and check_plan (planner_presets.hpp).
#include "planner_presets.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <sstream>

#include "llvmpipe_limits.hpp"
#include "support.hpp"
#include "vkattn/error.hpp"

namespace vkattn::test::planner {

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

std::string describe(const FusedPlan& p) {
  std::ostringstream s;
  s << p.config.name() << " rows " << p.config.rows << " x heads " << p.config.heads << " RPT " << p.config.rows_per_thread
    << " TPR " << p.config.threads_per_row << (p.config.vec_loads ? " chunked" : "")
    << " BC " << p.config.keys_per_tile << " wg " << p.config.workgroup_size() << ", " << p.splits << " splits of "
    << p.keys_per_split << " keys (" << p.splits_per_dispatch << " per dispatch), " << p.query_tiles << " query tiles in "
    << p.query_ranges << " ranges of " << p.tiles_per_range << ", chunks " << p.batch_chunk << " x " << p.head_chunk
    << ", workspace " << p.workspace_bytes;
  return s.str();
}

namespace {

// Bytes one binding of `l` cut to nb batches x nh heads x seq rows spans at worst: the elements
// from the first to the last, rounded up to whole 32-bit words, plus the up to alignment - 1 bytes
// binding from an aligned offset adds in front (the planner's own accounting, restated).
uint64_t binding_bytes(TensorLayout l, int64_t nb, int64_t nh, int64_t seq, uint64_t alignment) {
  l.offset = 0;
  l.batch = nb, l.heads = nh, l.seq = seq;
  return alignment - 1 + ceil_div(uint64_t(l.required_elements()) * dtype_size(l.dtype), 4) * 4;
}

// Shared memory and invocations; workgroups of whole subgroups.
void check_workgroup([[maybe_unused]] const DeviceInfo& d, [[maybe_unused]] const AttentionLayouts& l, const FusedPlan& plan) {
  [[maybe_unused]] const AttentionProblem& p = plan.problem;
  [[maybe_unused]] const detail::KernelConfig& c = plan.config;
  // Shared memory and invocations (the combine pass's workgroup too).
  CHECK(detail::fused_shared_bytes(c, p.dim_qk, p.dim_v) <= d.max_shared_memory);
  const uint32_t wg = c.workgroup_size();
  CHECK(wg >= 1);
  CHECK(wg <= d.max_workgroup_invocations);
  if (plan.splits > 1) CHECK(plan.combine_workgroup <= d.max_workgroup_invocations);
  if (c.is(detail::FusedKernel::rowwise)) CHECK(c.rows % 4 == 0);  // four rows per invocation (a vec4)
  // No subgroup is left partly empty by the workgroup's shape beyond one: a power of two is a whole
  // number of subgroups of every (power-of-two) size the driver may pick, or lies within one.
  CHECK(std::has_single_bit(wg));
}

// The subgroup kernels: one subgroup per workgroup, and the decode form's lanes and keys.
void check_subgroup_tiles([[maybe_unused]] const DeviceInfo& d, [[maybe_unused]] const AttentionLayouts& l, const FusedPlan& plan) {
  [[maybe_unused]] const AttentionProblem& p = plan.problem;
  [[maybe_unused]] const detail::KernelConfig& c = plan.config;
  // One workgroup is one subgroup: of the device's one size, or of a size its pipelines can
  // require (a power of two in [min, max]); whole rows per invocation.
  const bool one_size = d.min_subgroup_size == d.subgroup_size && d.max_subgroup_size == d.subgroup_size;
  if (one_size) CHECK(c.lanes == d.subgroup_size);
  else
    CHECK((d.required_subgroup_size && std::has_single_bit(c.lanes) && c.lanes >= d.min_subgroup_size &&
           c.lanes <= d.max_subgroup_size));
  CHECK(c.workgroup_size() == c.lanes);
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
    // Its K and V in 16-byte chunks where every lane's share of a row is whole chunks, never q8_0.
    const int64_t lane_elements = int64_t(c.lanes) * (16 / int64_t(dtype_size(p.dtype)));
    if (c.vec_loads) CHECK((p.kv_quant == KvQuant::none && p.dim_qk % lane_elements == 0 && p.dim_v % lane_elements == 0));
  }
}

// The tiled kernel's row groups.
void check_tiled_tiles([[maybe_unused]] const DeviceInfo& d, [[maybe_unused]] const AttentionLayouts& l, const FusedPlan& plan) {
  [[maybe_unused]] const AttentionProblem& p = plan.problem;
  [[maybe_unused]] const detail::KernelConfig& c = plan.config;
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
  if (!d.is_cpu() && p.seq_q >= 1024) CHECK(c.workgroup_size() % d.max_subgroup_size == 0);
}

// GQA packing and 16-byte chunks.
void check_packing([[maybe_unused]] const DeviceInfo& d, [[maybe_unused]] const AttentionLayouts& l, const FusedPlan& plan) {
  [[maybe_unused]] const AttentionProblem& p = plan.problem;
  [[maybe_unused]] const detail::KernelConfig& c = plan.config;
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
    // The decode form's rows: all the tile's, or 4; fewer where a lane's values of a key times its
    // rows would pass 160 (the JIT bound of the head dims past 256).
    const uint64_t lane_values = ceil_div(ceil_div(uint64_t(std::max(p.dim_qk, p.dim_v)) * dtype_size(p.dtype), 16), c.threads_per_row) *
                                 (16 / dtype_size(p.dtype));
    const uint64_t lane_loads = lane_values / (16 / dtype_size(p.dtype));
    if (c.decode())
      CHECK((c.rows == 4 || uint64_t(c.rows) >= tile_rows || lane_values * c.rows * 2 > 160 || lane_loads * c.rows * 2 > 32));
    if (c.decode()) CHECK((c.rows == 1 || (lane_values * c.rows <= 160 && lane_loads * c.rows <= 32)));
  }
  // 16-byte chunks only where every row they read is whole chunks at chunk-aligned strides: Q, K and
  // V for the decode form, K and V for the subgroup kernel.
  if (c.vec_loads) {
    CHECK((c.decode() || c.is(detail::FusedKernel::subgroup)));
    const int64_t chunk = 16 / int64_t(dtype_size(p.dtype));
    for (const TensorLayout* t : {&l.q, &l.k, &l.v})
      if (c.decode() || t != &l.q)
        CHECK((t->dim % chunk == 0 && t->stride_batch % chunk == 0 && t->stride_head % chunk == 0 &&
               t->stride_seq % chunk == 0));
  }
}

// Coverage of the whole problem, and the grids.
void check_coverage_and_grid([[maybe_unused]] const DeviceInfo& d, [[maybe_unused]] const AttentionLayouts& l, const FusedPlan& plan) {
  [[maybe_unused]] const AttentionProblem& p = plan.problem;
  [[maybe_unused]] const detail::KernelConfig& c = plan.config;
  const uint64_t tile_rows = uint64_t(p.seq_q) * c.heads_per_workgroup(p.group_size());
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
}

// The bindings of one dispatch.
void check_bindings([[maybe_unused]] const DeviceInfo& d, [[maybe_unused]] const AttentionLayouts& l, const FusedPlan& plan) {
  [[maybe_unused]] const AttentionProblem& p = plan.problem;
  [[maybe_unused]] const detail::KernelConfig& c = plan.config;
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
}

// The workspace, the careful pass's ballots and lavapipe's loop budget.
void check_workspace([[maybe_unused]] const DeviceInfo& d, [[maybe_unused]] const AttentionLayouts& l, const FusedPlan& plan) {
  [[maybe_unused]] const AttentionProblem& p = plan.problem;
  [[maybe_unused]] const detail::KernelConfig& c = plan.config;
  const uint64_t range = d.max_storage_buffer_range;
  const uint64_t alignment = std::max<uint64_t>(d.min_storage_buffer_offset_alignment, 16);
  const int64_t nb = plan.batch_chunk, nh = plan.head_chunk;
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

}  // namespace

// Every limit the plan must respect on `d`, and that it covers the whole problem.
void check_plan(const DeviceProfile& preset, const AttentionLayouts& l, const FusedPlan& plan) {
  const DeviceInfo& d = preset.info;
  INFO("plan: " << describe(plan));
  check_workgroup(d, l, plan);
  if (plan.config.one_subgroup()) check_subgroup_tiles(d, l, plan);
  if (plan.config.is(detail::FusedKernel::tiled)) check_tiled_tiles(d, l, plan);
  check_packing(d, l, plan);
  check_coverage_and_grid(d, l, plan);
  check_bindings(d, l, plan);
  check_workspace(d, l, plan);
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
    // Head dims past 256: Gemma's 512 prefill and decode, MLA's 576/512 decode (MQA 16:1) and prefill.
    v.push_back(shape("prefill " + ts + " d512 seq 2048", t, 1, 8, 8, 2048, 2048, 512, 512));
    v.push_back(shape("decode " + ts + " H16/KV8 d512 seq_k 8192", t, 1, 16, 8, 1, 8192, 512, 512));
    v.push_back(shape("MLA decode " + ts + " H16/KV1 576/512 seq_k 8192", t, 1, 16, 1, 1, 8192, 576, 512));
    v.push_back(shape("MLA prefill " + ts + " H16/KV1 576/512 seq 1000", t, 1, 16, 1, 1000, 1000, 576, 512));
    v.push_back(shape("dim_qk 288 dim_v 320 " + ts, t, 2, 4, 2, 37, 300, 288, 320));
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

// plan_fused refuses `l` on `device` as beyond what the device can do (ErrorCode::unsupported), with
// a message containing `part`.
void expect_unsupported(const DeviceInfo& device, KernelVariant v, const AttentionLayouts& l, const std::string& part) {
  const ThrownError e = thrown_error([&] { detail::plan_fused(device, v, l); });
  INFO("message: " << e.message);
  CHECK_MESSAGE(contains(e.message, part), "expected '" << part << "'");
  CHECK(e.code == code_name(ErrorCode::unsupported));
}

}  // namespace vkattn::test::planner
