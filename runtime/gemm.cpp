#include "gemm.hpp"
#include "int_math.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>

#include "llvmpipe_limits.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

// gemm.comp's specialization constants: a BM x BN tile of C per workgroup, TM x TN per invocation,
// k in steps of BK (the same BK everywhere, so the loop-limit check does not depend on the tile).
constexpr uint32_t kTileK = 8;
struct GemmTile {
  uint32_t bm, bn, tm, tn;
  uint32_t workgroup() const { return (bm / tm) * (bn / tn); }
};

// An 8 x 8 register tile per invocation: on lavapipe 64 multiply-adds per 16 shared-memory reads ran
// the scores and P·V of a 512-token, 8-head problem in 430 ms, against 820 ms with 4 x 4 tiles
// (bench --path unfused, 2026-11-22). Few rows (decode) take a short tile instead of computing
// rows that do not exist.
GemmTile choose_tile(int64_t m) {
  if (m >= 128) return {128, 64, 8, 8};  // 128 invocations
  if (m > 16) return {64, 64, 8, 8};     // 64 invocations
  return {16, 64, 2, 8};                 // 64 invocations
}

// gemm_subgroup.comp's tile (CPU devices): BM rows, CJ columns per invocation, the workgroup one
// subgroup of `lanes`, so BM x (CJ x lanes) of C per workgroup. Each step of `lanes` k loads BM values
// of A and CJ x lanes of B per lane (B by vec4 where the layout allows) for BM x CJ x lanes
// multiply-adds. 32 x 8 (a 32 x 64 tile on 8 lanes): 64 x 8 and 32 x 12 ran 5-8% faster on lavapipe
// but took 1.0 s and more to JIT against 0.6 s, and 64 columns fit P·V's dim_v 64 and 128 exactly
// (the benchmark notebook's lavapipe-2026-11-25-gemm.txt, docs/performance.md). Fewer rows (decode: one query row, or
// a GQA group's 4 or 8 heads, the three-stage path's packed rows) or columns (a small dim_v) take a
// short tile rather than compute what does not exist (GQA 32/8 d128 decode over 8192 keys on the
// three-stage path: 155 ms a head at a time, 50 ms packed on 4-row tiles, where 16-row tiles took
// 69 in a first run; bench/results, comparison unfused-gqa-packing-2026-12-03).
// Where B is read along n (P·V's V, read transposed) a tile of 16 rows or fewer holds 4 columns per
// invocation, not 8: on lavapipe 22.3.6 such a P·V over 8192 keys ran 1.5-1.6x faster so (16 x 512
// f16, one thread: 6.4-6.8 ms against 10.3-10.7; 4 x 128, 8 matrices: 6.5-6.9 against 9.1-9.7;
// tools/probes/gemm_bench.cpp) and three-stage decode 1.1-1.4x, on 25.0.7 within noise for P·V alone;
// the scores (B along k) ran 5% (22.3.6) and 12% (25.0.7) slower with 4, and 32-row tiles (prefill)
// 1.1-1.3x slower (bench/results, comparison gemm-pv-columns-2026-12-04).
// Few sizes keep the number of pipelines, each JIT-compiled on its first dispatch, small.
struct SubgroupTile {
  uint32_t rows, cols;  // BM, CJ (a multiple of 4: quads of columns)
  uint32_t groups() const { return rows < 8 ? 1 : rows / 8; }  // the write-out loop's
};
// The tallest tile whose GEMM reads A and B through texel buffers where it can (emit_gemm).
constexpr uint32_t kTexelMaxRows = 16;
// The tallest tile whose skip-zero GEMM (P·V) skips the zeros by a redo pass rather than a select per
// multiply-add (GEMM_SG_FLAG_SKIP_ZERO_BY_REDO): P·V 16 x 512 x 8192 f16 ran 1.2-1.3x faster so on
// lavapipe, one thread (22.3.6: 5.2-5.3 ms against 6.4-6.6; 25.0.7: 10.3 against 11.7-12.2; 4 x 128
// x 8192 within noise; comparison gemm-skip-zero-redo-probe-2026-12-04), whole three-stage decodes
// 0.99-1.25x (gemm-skip-zero-redo-2026-12-04). Its k loop, compiled in both forms, doubles the
// JIT of pipelines that took 0.4 s (22.3.6) and 0.7 s (25.0.7); 32-row tiles (prefill) already take
// 1.2-2.0 s on 22.3.6 and keep the selects.
constexpr uint32_t kSkipZeroRedoMaxRows = 16;

// `b_along_n`: B's rows contiguous, read along n (b_read_along_n).
SubgroupTile choose_subgroup_tile(uint32_t lanes, int64_t m, int64_t n, bool b_along_n) {
  const uint32_t rows = m <= 1 ? 1 : m <= 4 ? 4 : m <= 8 ? 8 : m <= 16 ? 16 : 32;
  const uint32_t cols = n <= int64_t(4 * lanes) || (b_along_n && rows <= 16) ? 4 : 8;
  return {rows, cols};
}

// B holds k along its columns' stride and n along unit stride (P·V's V, a paged V cache): the
// subgroup kernel reads it along n.
bool b_read_along_n(const GemmCall& call) {
  return call.paged_b ? call.paged_b->keys_are_columns : call.b.stride_row == 1 && call.b.stride_col != 1;
}

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

bool multiple_of_4(int64_t v) { return v % 4 == 0; }

// Which operands gemm_subgroup.comp may read or write four elements at a time (GEMM_SG_VEC_*), from
// the strides and sizes; the element offsets of the bindings are checked at replay.
uint32_t subgroup_vec(const GemmCall& call, uint32_t lanes) {
  const GemmOperand &a = call.a, &b = call.b, &c = call.c;
  // A paged B's keys start at its pages: vec4 reads need the pages at multiples of 4 too, and keys
  // as rows read along k only (the scores), keys as columns along n only (P·V).
  const bool paged_rows = call.paged_b && !call.paged_b->keys_are_columns;
  const bool paged_cols = call.paged_b && call.paged_b->keys_are_columns;
  const bool pages_ok = !call.paged_b || multiple_of_4(call.paged_b->page_elements);
  uint32_t vec = 0;
  if (pages_ok && !paged_cols && b.stride_col == 1 && b.col_block == 0 && call.k > 0 && multiple_of_4(call.k) && multiple_of_4(b.stride_row) &&
      multiple_of_4(b.stride_batch) && multiple_of_4(b.stride_head))
    vec |= GEMM_SG_VEC_B_K;
  else if (pages_ok && !paged_rows && b.stride_row == 1 && call.n > 0 && multiple_of_4(call.n) && multiple_of_4(b.stride_col) &&
           (b.col_block == 0 || multiple_of_4(b.stride_block)) && multiple_of_4(b.stride_batch) &&
           multiple_of_4(b.stride_head))
    vec |= GEMM_SG_VEC_B_N;
  if (c.stride_col == 1 && (c.col_block == 0 || (multiple_of_4(c.col_block) && multiple_of_4(c.stride_block))) &&
      call.n > 0 && multiple_of_4(call.n) && multiple_of_4(c.stride_row) && multiple_of_4(c.stride_batch) &&
      multiple_of_4(c.stride_head))
    vec |= GEMM_SG_VEC_C;
  // A's quads are spread over the lanes, a step's LANES k being whole quads.
  if (lanes % 4 == 0 && a.stride_col == 1 && a.col_block == 0 && call.k > 0 && multiple_of_4(call.k) &&
      multiple_of_4(a.stride_row) && multiple_of_4(a.stride_batch) && multiple_of_4(a.stride_head))
    vec |= GEMM_SG_VEC_A_K;
  return vec;
}

// The column-block fields: no blocks is one block wider than any column index.
uint32_t col_block(const GemmOperand& o) {
  return o.col_block > 0 ? u32(o.col_block) : std::numeric_limits<uint32_t>::max();
}

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

GemmChoice choose_gemm(const DeviceInfo& device) {
  // The subgroup kernel's workgroup is one subgroup: the device must run every pipeline with the one
  // subgroup size it reports (as the subgroup attention kernel, attention_plan.cpp), with shuffles,
  // and 64-bit integers (its four-element loads, element_types.glsl).
  // Vulkan's subgroup sizes are powers of two; 4 to 32 lanes keep its tile within 64 columns.
  const uint32_t lanes = device.subgroup_size;
  if (device.is_cpu() && device.subgroup_shuffle && device.shader_int64 && lanes >= 4 && lanes <= 32 && device.min_subgroup_size == lanes &&
      device.max_subgroup_size == lanes && device.max_workgroup_invocations >= lanes)
    return {GemmKernel::subgroup, lanes};
  return {};
}

uint32_t gemm_vec_bits(const GemmChoice& choice, const GemmCall& call) {
  return choice.kernel == GemmKernel::subgroup ? subgroup_vec(call, choice.lanes) : 0;
}

std::string gemm_description(const GemmChoice& choice, const GemmCall& call) {
  const int64_t m = call.m;
  if (choice.kernel == GemmKernel::subgroup) {
    const SubgroupTile tile = choose_subgroup_tile(choice.lanes, m, call.n, b_read_along_n(call));
    return "subgroup " + str(tile.rows) + "x" + str(tile.cols * choice.lanes) + "/" + str(tile.rows) + "x" +
           str(tile.cols) + "x" + str(choice.lanes) + "lanes";
  }
  const GemmTile tile = choose_tile(m);
  return "tiled " + str(tile.bm) + "x" + str(tile.bn) + "/" + str(tile.tm) + "x" + str(tile.tn);
}

uint64_t gemm_loop_iterations(const GemmChoice& choice, int64_t m, int64_t n, int64_t k) {
  const uint64_t kk = uint64_t(std::max<int64_t>(k, 1));
  if (choice.kernel == GemmKernel::subgroup) {
    // gemm_subgroup.comp: per pass, the k steps of `lanes` and their blocks of 16 steps; the row
    // groups of the write-out and the rows of pass 1's (each loop at least once, masked or not); a
    // second pass when some sum overflowed (only for k <= 16384).
    const SubgroupTile tile = choose_subgroup_tile(choice.lanes, m, n, false);  // (the loops do not depend on the columns)
    // With skip-zero by a redo pass, each pass also steps once, masked, through the k loop's other
    // form (one step, one block).
    const uint64_t passes = kk <= 16384 ? 2 : 1;
    return passes * (ceil_div(kk, choice.lanes) + ceil_div(kk, 16ull * choice.lanes) + tile.groups() + tile.rows + 1 + 2);
  }
  // gemm.comp: about k / kTileK (the BK step is unrolled). Its recomputation of overflowing elements
  // (k / 8 each, 16 at most: 2k more) runs only up to k = 16384, far within the budget there.
  return ceil_div(kk, kTileK) + 16;
}

void check_gemm_shape(const DeviceInfo& device, const std::string& what, int64_t m, int64_t n, int64_t k) {
  check_gemm_shape(device, choose_gemm(device), what, m, n, k);
}

void check_gemm_shape(const DeviceInfo& device, const GemmChoice& choice, const std::string& what, int64_t m, int64_t n,
                      int64_t k) {
  // A plan made for another device (a profile) runs here: its kernel must be one this device runs.
  if (choice.kernel == GemmKernel::subgroup &&
      (!device.subgroup_shuffle || device.min_subgroup_size != choice.lanes || device.max_subgroup_size != choice.lanes ||
       device.max_workgroup_invocations < choice.lanes))
    throw unsupported(what + ": the subgroup GEMM of " + str(choice.lanes) + " lanes needs subgroup shuffles and subgroups of exactly " +
                      str(choice.lanes) + " lanes; " + device.name + " has sizes " + str(device.min_subgroup_size) + " to " +
                      str(device.max_subgroup_size));
  // The grid's z (batch x heads matrices) is split across dispatches by emit_gemm; x and y are not.
  uint64_t bm = 0, bn = 0;
  if (choice.kernel == GemmKernel::subgroup) {
    // The narrower of the tiles B's layout may take (4 columns per lane where B is read along n):
    // at most 2x too strict, for products of at most 16 rows and over 2 million columns.
    const SubgroupTile tile = choose_subgroup_tile(choice.lanes, m, n, true);
    bm = tile.rows, bn = uint64_t(tile.cols) * choice.lanes;
  } else {
    const GemmTile tile = choose_tile(m);
    bm = tile.bm, bn = tile.bn;
  }
  const uint64_t gx = ceil_div(n, bn), gy = ceil_div(m, bm);
  if (gx > device.max_workgroup_count[0] || gy > device.max_workgroup_count[1])
    throw unsupported(what + ": a (" + std::to_string(m) + " x " + std::to_string(n) + ") product needs a grid of (" +
                str(gx) + ", " + str(gy) + ") workgroups per matrix, beyond " + device.name);
  if (device.is_llvmpipe && gemm_loop_iterations(choice, m, n, k) > kLlvmpipeLoopBudget) {
    int64_t most = 1;  // the longest k within the limit, for the message (the count grows with k)
    while (gemm_loop_iterations(choice, m, n, most * 2) <= kLlvmpipeLoopBudget) most *= 2;
    for (int64_t step = most / 2; step >= 1; step /= 2)
      if (gemm_loop_iterations(choice, m, n, most + step) <= kLlvmpipeLoopBudget) most += step;
    throw unsupported(what + ": a reduction over " + std::to_string(k) +
                " elements exceeds lavapipe's per-invocation loop limit (at most " + std::to_string(most) + ")");
  }
}

void emit_gemm(ContextImpl& c, CommandList& list, const GemmCall& call, const GemmChoice& choice) {
  // More matrices than the grid's z allows: whole batches per dispatch, operands rebased.
  const uint64_t max_z = c.info.max_workgroup_count[2];
  if (uint64_t(call.batch * call.heads) > max_z) {
    if (uint64_t(call.heads) > max_z)
      throw unsupported("gemm: " + std::to_string(call.heads) + " heads exceed maxComputeWorkGroupCount[2] of " + c.info.name);
    const int64_t per_dispatch = int64_t(max_z) / call.heads;
    for (int64_t b0 = 0; b0 < call.batch; b0 += per_dispatch) {
      GemmCall part = call;
      part.batch = std::min(per_dispatch, call.batch - b0);
      // Each operand bound from the part's first batch to its last batch's end (the last batch's
      // extent in the whole operand, shifted), so that the parts' C bindings do not overlap where
      // the batches do not (the barrier check, synchronization validation).
      for (GemmOperand* o : {&part.a, &part.b, &part.c}) {
        const int64_t last_extent = o->end - (o->offset + (call.batch - 1) * o->stride_batch);
        o->offset += b0 * o->stride_batch;
        o->end = o->offset + (part.batch - 1) * o->stride_batch + last_extent;
      }
      if (part.paged_b) {
        part.paged_b->table_base += uint64_t(b0 * call.paged_b->entries_per_batch) * 4;
        part.paged_b->lengths_base += uint64_t(b0) * 4;
      }
      emit_gemm(c, list, part, choice);
    }
    return;
  }
  const auto bind_operand = [](const GemmOperand& o) {
    const uint64_t esize = dtype_size(o.dtype);
    return Binding{o.slot, o.base + uint64_t(o.offset) * esize, esize, uint64_t(o.end - o.offset)};
  };
  Dispatch d;
  d.use(c.pipelines->layout(KernelKind::gemm));
  d.bind(GEMM_A_BINDING, bind_operand(call.a), offsetof(GemmPush, a_off));
  d.bind(GEMM_B_BINDING, bind_operand(call.b), offsetof(GemmPush, b_off));
  d.bind(GEMM_C_BINDING, bind_operand(call.c), offsetof(GemmPush, c_off));
  if (call.has_bias && call.paged_b) throw Error("gemm: a bias and a paged B share a binding; give one");
  Binding bias_or_table = kPlaceholder;
  if (call.has_bias) bias_or_table = Binding{call.bias_slot, call.bias_base, dtype_size(call.b.dtype), uint64_t(call.n)};
  if (call.paged_b)
    bias_or_table = Binding{call.paged_b->table_slot, call.paged_b->table_base, 4,
                            uint64_t(call.batch * call.paged_b->entries_per_batch)};
  d.bind(GEMM_BIAS_BINDING, bias_or_table, offsetof(GemmPush, bias_off));
  d.bind(GEMM_LENGTHS_BINDING,
         call.paged_b ? Binding{call.paged_b->lengths_slot, call.paged_b->lengths_base, 4, uint64_t(call.batch)} : kPlaceholder,
         offsetof(GemmPush, lens_off));

  GemmPush push{};
  push.m = u32(call.m), push.n = u32(call.n), push.k = u32(call.k);
  push.heads = u32(call.heads), push.group = u32(call.group), push.head_base = u32(call.head_base);
  push.flags = (call.has_bias ? kGemmBias : 0u) | (call.skip_zero_a ? kGemmSkipZeroA : 0u);
  if (call.paged_b) {
    if (call.paged_b->appended < 0 || call.paged_b->appended >= (int64_t(1) << (32 - GEMM_FLAGS_APPENDED_SHIFT)))
      throw unsupported("gemm: " + std::to_string(call.paged_b->appended) +
                        " appended tokens; a paged B takes fewer than 2^24 (use the fused path)");
    push.flags |= (call.paged_b->keys_are_columns ? kGemmBPagedCols : kGemmBPagedRows) |
                  u32(call.paged_b->appended) << GEMM_FLAGS_APPENDED_SHIFT;
  }
  push.alpha = call.alpha;
  // The element offsets (word 0 of each operand's fields) are filled in at replay.
  const auto fill = [](const GemmOperand& o, uint32_t* f) {
    f[1] = u32(o.stride_batch), f[2] = u32(o.stride_head), f[3] = u32(o.stride_row), f[4] = u32(o.stride_col);
    f[5] = col_block(o), f[6] = u32(o.stride_block);
  };
  fill(call.a, &push.a_off);
  fill(call.b, &push.b_off);
  fill(call.c, &push.c_off);
  if (call.paged_b) {  // the key axis's blocks are the pages (the other axis has none)
    const GemmPagedB& t = *call.paged_b;
    push.b_cblk = u32(t.page_size), push.b_sblk = u32(t.page_elements);
    push.b_sb = u32(t.entries_per_batch), push.pages = u32(t.pages);  // B's batch stride is through the table
  }
  d.set_push(push);

  if (choice.kernel == GemmKernel::subgroup) {
    const SubgroupTile tile = choose_subgroup_tile(choice.lanes, call.m, call.n, b_read_along_n(call));
    const uint32_t vec = subgroup_vec(call, choice.lanes);
    const uint32_t redo_zeros = call.skip_zero_a && tile.rows <= kSkipZeroRedoMaxRows ? GEMM_SG_FLAG_SKIP_ZERO_BY_REDO : 0u;
    GemmSubgroupConstants constants{tile.rows, tile.cols, (push.flags & GEMM_FLAG_BITS) | redo_zeros, choice.lanes, vec};
    d.pipeline = c.pipelines->get(gemm_subgroup_pipeline(call.a.dtype, call.b.dtype, call.c.dtype, constants));
    if (vec != 0) {
      // Bindings that start off a multiple of 4 elements at replay take the all-scalar twin.
      constants.vec = 0;
      d.unchunked_pipeline = c.pipelines->get(gemm_subgroup_pipeline(call.a.dtype, call.b.dtype, call.c.dtype, constants));
      // Four elements at a time: the element offsets of those operands must be multiples of 4.
      const auto quads = [](DType dtype) { return static_cast<uint32_t>(4 * dtype_size(dtype) - 1); };
      if (vec & GEMM_SG_VEC_A_K) d.chunk_mask[GEMM_A_BINDING] = quads(call.a.dtype);
      if (vec & (GEMM_SG_VEC_B_K | GEMM_SG_VEC_B_N)) d.chunk_mask[GEMM_B_BINDING] = quads(call.b.dtype);
      if (vec & GEMM_SG_VEC_C) d.chunk_mask[GEMM_C_BINDING] = quads(call.c.dtype);
      // A's and B's quads through texel buffers where the device gives vkattn's buffers texel views
      // (CPU devices): replay takes the build of the operands whose Buffers have one, else the
      // storage build above. Only for tiles of few rows (decode, a GQA group's packed rows), where
      // the loads are most of the work: on lavapipe 22.3.6 MLA decode from its latent cache ran
      // 1.35-1.40x faster with B's alone (P·V's A, the f32 weights, then took a quarter of it). With
      // 32 rows a load of B feeds twice the multiply-adds: d512 prefill in three stages ran 0.89-0.94x
      // (medians of two alternating comparisons, within this machine's noise), and its P·V took
      // 1.9 s to JIT against 1.35 (bench/results: comparisons texel-gemm-2026-12-04, -04b and
      // first-dispatch-texel-2026-12-04).
      const uint32_t texel = (vec & GEMM_SG_VEC_A_K ? GEMM_SG_TEXEL_A : 0u) |
                             (vec & (GEMM_SG_VEC_B_K | GEMM_SG_VEC_B_N) ? GEMM_SG_TEXEL_B : 0u);
      if (texel != 0 && c.texel_view_bytes > 0 && tile.rows <= kTexelMaxRows) {
        static_assert(GEMM_SG_TEXEL_A == 1u && GEMM_SG_TEXEL_B == 2u, "texel bit t is texel binding t");
        const uint32_t texel_bindings[] = {GEMM_A_BINDING, GEMM_B_BINDING};
        d.use_texel(c.pipelines->layout(KernelKind::gemm_texel), texel_bindings);
        constants.vec = vec;
        for (uint32_t m = 1; m <= texel; ++m)  // every non-empty subset: the operands whose Buffers have views
          if ((m & texel) == m) {
            constants.texel = m;
            d.texel_pipelines[m] = c.pipelines->get(gemm_subgroup_pipeline(call.a.dtype, call.b.dtype, call.c.dtype, constants));
          }
      }
    }
    d.groups = {u32(ceil_div(call.n, uint64_t(tile.cols) * choice.lanes)), u32(ceil_div(call.m, tile.rows)),
                u32(call.batch * call.heads)};
  } else {
    const GemmTile tile = choose_tile(call.m);
    d.pipeline = c.pipelines->get(
        gemm_pipeline(call.a.dtype, call.b.dtype, call.c.dtype, {tile.bm, tile.bn, kTileK, tile.tm, tile.tn, tile.workgroup()}));
    d.groups = {u32(ceil_div(call.n, tile.bn)), u32(ceil_div(call.m, tile.bm)), u32(call.batch * call.heads)};
  }
  list.dispatch(d);
}

}  // namespace vkattn::detail
