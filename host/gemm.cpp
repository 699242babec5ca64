#include "gemm.hpp"
#include "int_math.hpp"

#include <cstddef>
#include <limits>

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

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// The column-block fields: no blocks is one block wider than any column index.
uint32_t col_block(const GemmOperand& o) {
  return o.col_block > 0 ? u32(o.col_block) : std::numeric_limits<uint32_t>::max();
}

}  // namespace

GemmChoice choose_gemm(const DeviceInfo&) { return {}; }

std::string gemm_description(const GemmChoice&, int64_t m, int64_t) {
  const GemmTile tile = choose_tile(m);
  return "tiled " + std::to_string(tile.bm) + "x" + std::to_string(tile.bn) + "/" + std::to_string(tile.tm) + "x" +
         std::to_string(tile.tn);
}

void check_gemm_shape(const DeviceInfo& device, const std::string& what, int64_t m, int64_t n, int64_t k) {
  check_gemm_shape(device, choose_gemm(device), what, m, n, k);
}

void check_gemm_shape(const DeviceInfo& device, const GemmChoice&, const std::string& what, int64_t m, int64_t n,
                      int64_t k) {
  // The grid's z (batch x heads matrices) is split across dispatches by emit_gemm; x and y are not.
  const GemmTile tile = choose_tile(m);
  const uint64_t gx = ceil_div(n, tile.bn), gy = ceil_div(m, tile.bm);
  if (gx > device.max_workgroup_count[0] || gy > device.max_workgroup_count[1])
    throw unsupported(what + ": a (" + std::to_string(m) + " x " + std::to_string(n) + ") product needs a grid of (" +
                std::to_string(gx) + ", " + std::to_string(gy) + ") workgroups per matrix, beyond " + device.name);
  // An invocation loops about k / kTileK times (the BK step is unrolled).
  if (device.is_llvmpipe && ceil_div(k, kTileK) + 16 > kLlvmpipeLoopBudget)
    throw unsupported(what + ": a reduction over " + std::to_string(k) +
                " elements exceeds lavapipe's per-invocation loop limit (at most " +
                std::to_string((kLlvmpipeLoopBudget - 16) * kTileK) + ")");
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
      for (GemmOperand* o : {&part.a, &part.b, &part.c}) o->offset += b0 * o->stride_batch;
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
  d.bind(0, bind_operand(call.a), offsetof(GemmPush, a_off));
  d.bind(1, bind_operand(call.b), offsetof(GemmPush, b_off));
  d.bind(2, bind_operand(call.c), offsetof(GemmPush, c_off));
  d.bind(3, call.has_bias ? Binding{call.bias_slot, call.bias_base, dtype_size(call.b.dtype), uint64_t(call.n)} : kPlaceholder,
         offsetof(GemmPush, bias_off));

  GemmPush push{};
  push.m = u32(call.m), push.n = u32(call.n), push.k = u32(call.k);
  push.heads = u32(call.heads), push.group = u32(call.group), push.head_base = u32(call.head_base);
  push.flags = (call.has_bias ? kGemmBias : 0u) | (call.skip_zero_a ? kGemmSkipZeroA : 0u);
  push.alpha = call.alpha;
  // The element offsets (word 0 of each operand's fields) are filled in at replay.
  const auto fill = [](const GemmOperand& o, uint32_t* f) {
    f[1] = u32(o.stride_batch), f[2] = u32(o.stride_head), f[3] = u32(o.stride_row), f[4] = u32(o.stride_col);
    f[5] = col_block(o), f[6] = u32(o.stride_block);
  };
  fill(call.a, &push.a_off);
  fill(call.b, &push.b_off);
  fill(call.c, &push.c_off);
  d.set_push(push);

  const GemmTile tile = choose_tile(call.m);
  d.pipeline = c.pipelines->get(
      gemm_pipeline(call.a.dtype, call.b.dtype, call.c.dtype, {tile.bm, tile.bn, kTileK, tile.tm, tile.tn, tile.workgroup()}));
  d.groups = {u32(ceil_div(call.n, tile.bn)), u32(ceil_div(call.m, tile.bm)), u32(call.batch * call.heads)};
  list.dispatch(d);
}

}  // namespace vkattn::detail
