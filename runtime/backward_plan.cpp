#include "backward_plan.hpp"

#include <algorithm>
#include <string>
#include <variant>

#include "gemm.hpp"
#include "int_math.hpp"
#include "llvmpipe_limits.hpp"
#include "vkattn/dropout.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// The widest head dim the fused backward kernels run; past it the backward takes three stages.
constexpr int64_t kMaxFusedBackwardHeadDim = 256;

// What the backward reads of the spec: the forward's inputs and O, LSE; not its weights or path.
AttentionSpec backward_view(const AttentionSpec& spec) {
  if (std::holds_alternative<PagedKv>(spec.kv))
    throw Error("kv: a paged KV cache is an inference layout; the backward pass takes dense or packed K and V");
  if (spec.kv_quant != KvQuant::none)
    throw Error("kv_quant: q8_0 K and V are an inference layout; the backward pass takes K and V in the call's dtype");
  if (!spec.lse) throw Error("lse: the backward pass needs the forward's log-sum-exp (a spec with lse)");
  AttentionSpec view = spec;
  // (A three-stage backward's checks are its forward's three-stage path's, whose workspace is scores:
  // the fused path's split partials are not its limits.)
  view.path = spec.weights && spec.path != AttentionPath::fused ? AttentionPath::unfused : spec.path;
  // Head dims past kMaxFusedBackwardHeadDim take the three-stage backward whatever the forward's path:
  // the fused backward kernels compute them right, but their pipelines JIT for minutes on lavapipe
  // (conform's wide-backward section on the three fused paths: 12 min, against under 1 three-stage).
  if (std::max(spec.q.dim, spec.out.dim) > kMaxFusedBackwardHeadDim) view.path = AttentionPath::unfused;
  view.weights = false;
  view.options.dropout.reset();  // (the forward's plan is only its checks and layouts here)
  return view;
}

void check_grid(const DeviceInfo& device, const char* kernel, uint64_t x, uint64_t y, uint64_t z) {
  const uint64_t grid[3] = {x, y, z};
  for (int a = 0; a < 3; ++a)
    if (grid[a] > device.max_workgroup_count[a])
      throw Error(std::string("backward: the ") + kernel + " kernel's grid needs " + str(grid[a]) + " workgroups along " +
                  "xyz"[a] + ", " + device.name + " allows " + str(device.max_workgroup_count[a]));
}

void check_range(const DeviceInfo& device, const char* name, uint64_t bytes) {
  if (bytes > device.max_storage_buffer_range)
    throw Error(std::string(name) + ": the backward pass binds it whole, " + str(bytes) + " bytes, and " + device.name +
                " binds at most " + str(device.max_storage_buffer_range));
}

uint64_t tensor_bytes(const TensorLayout& t) { return uint64_t(t.required_elements() - t.offset) * dtype_size(t.dtype); }

// The fused kernels' forms and splits: on lavapipe each invocation's loop iterations stay within its
// budget (the dK/dV kernel walks the group's query rows, the dQ kernel the keys); elsewhere one split
// each. The subgroup forms where the forward would take its subgroup kernel, the tiled forms on GPUs.
void plan_fused_forms(const DeviceInfo& device, KernelVariant variant, BackwardCallPlan& plan, uint64_t group,
                      uint32_t rows, uint32_t keys) {
  const AttentionProblem& p = plan.p;
  plan.split_rows = device.is_llvmpipe ? uint32_t(std::clamp<uint64_t>(kLlvmpipeLoopBudget / group, 1, rows)) : rows;
  plan.split_keys = device.is_llvmpipe ? uint32_t(std::min<uint64_t>(kLlvmpipeLoopBudget, keys)) : keys;
  plan.query_splits = uint32_t(ceil_div(rows, plan.split_rows));
  plan.key_splits = uint32_t(ceil_div(keys, plan.split_keys));
  // The subgroup forms where the forward would take its subgroup kernel: CPU devices of one subgroup
  // size with shuffles (the GEMM's rule), unless another kernel variant is forced.
  const GemmChoice gemm = choose_gemm(device);
  plan.subgroup_form = gemm.kernel == GemmKernel::subgroup &&
                       (variant == KernelVariant::subgroup || (variant == KernelVariant::automatic && device.is_cpu()));
  if (plan.subgroup_form) {
    plan.lanes = gemm.lanes;
    // Two keys (rows) a lane up to d128: each shuffled element then feeds two dot products; past it the
    // private arrays (4 x rows x dim floats) would double the JIT time.
    plan.rows_per_lane = std::max(p.dim_qk, p.dim_v) <= 64 ? 2 : 1;
  }
  // The tiled forms on GPUs, or where forced, when a tile fits the device (else the portable kernels).
  const bool wants_tiled = variant == KernelVariant::tiled || (variant == KernelVariant::automatic && !device.is_cpu());
  if (!plan.subgroup_form && wants_tiled) plan.tiles = choose_backward_tiles(device, uint32_t(p.dim_qk), uint32_t(p.dim_v));
  if (plan.tiles && device.is_llvmpipe) {
    plan.split_rows = tiled_split_rows(*plan.tiles, uint32_t(p.dim_qk), uint32_t(p.dim_v), group, rows, kLlvmpipeLoopBudget);
    plan.split_keys = tiled_split_keys(*plan.tiles, uint32_t(p.dim_qk), uint32_t(p.dim_v), keys, kLlvmpipeLoopBudget);
    plan.query_splits = uint32_t(ceil_div(rows, plan.split_rows));
    plan.key_splits = uint32_t(ceil_div(keys, plan.split_keys));
  }
}

}  // namespace

BackwardCallPlan plan_backward(const DeviceInfo& device, KernelVariant variant, const AttentionSpec& spec) {
  BackwardCallPlan plan;
  plan.forward = plan_call(device, variant, backward_view(spec));
  const AttentionLayouts& l = plan.forward.dense;
  const AttentionProblem& p = plan.p = plan.forward.planned.problem();
  plan.alignment = plan.forward.planned.alignment();
  plan.varlen = plan.forward.source == PlannedCall::Source::packed;
  // The kernels' index sums (the query rows a key range reaches) stay within int32 below this.
  if (p.seq_q + p.seq_k >= (int64_t(1) << 29))
    throw Error("backward: seq_q + seq_k is " + str(uint64_t(p.seq_q + p.seq_k)) + "; the backward pass takes fewer than 2^29");
  plan.batches = uint32_t(plan.varlen ? plan.forward.packed.batch : p.batch);
  plan.rows_total = uint32_t(plan.varlen ? plan.forward.packed.max_seq_q : p.seq_q);
  plan.keys_total = uint32_t(plan.varlen ? plan.forward.packed.max_seq_k : p.seq_k);

  plan.workgroup = std::min<uint32_t>(64, device.max_workgroup_invocations);
  // As the forward runs: on the three-stage path (the weights, path unfused, or head dims past the
  // fused kernels'), or fused.
  const bool three_stage = plan.forward.planned.unfused.has_value();
  if (three_stage) {
    plan.three_stage = plan_three_stage_backward(device, p, l, plan.alignment, plan.workgroup);
    plan.split_rows = std::max<uint32_t>(plan.rows_total, 1);
    plan.split_keys = std::max<uint32_t>(plan.keys_total, 1);
    plan.query_splits = plan.three_stage->row_splits;
  }

  if (!three_stage) {
    plan_fused_forms(device, variant, plan, uint64_t(p.group_size()), std::max<uint32_t>(plan.rows_total, 1),
                     std::max<uint32_t>(plan.keys_total, 1));
    check_grid(device, "dK/dV", ceil_div(plan.keys_total, plan.kv_tile()), uint64_t(p.kv_heads),
               uint64_t(plan.batches) * plan.query_splits);
    check_grid(device, "dQ", ceil_div(plan.rows_total, plan.q_tile()), uint64_t(p.heads), uint64_t(plan.batches) * plan.key_splits);
  }

  const uint64_t wg = plan.workgroup;
  check_grid(device, "rows", ceil_div(plan.rows_total, wg), uint64_t(p.heads), plan.batches);
  if (device.is_llvmpipe && uint64_t(plan.batches) * (ceil_div(plan.rows_total, wg) + 1) > kLlvmpipeLoopBudget)
    throw Error("backward: " + str(plan.batches) + " sequences of up to " + str(plan.rows_total) +
                " query rows are more than the dsinks pass sums within lavapipe's loop limit");
  for (const auto& [name, t] : {std::pair{"q", l.q}, {"k", l.k}, {"v", l.v}, {"out", l.out}})
    check_range(device, name, tensor_bytes(t));

  // The workspace: D, the three-stage form's blocks, then the partials of the split kernels.
  const uint64_t a = plan.alignment;
  const uint64_t f32 = 4;
  uint64_t at = 0;
  plan.rows_offset = at;
  const uint64_t rows_bytes = uint64_t(p.batch) * uint64_t(p.heads) * uint64_t(p.seq_q) * f32;
  check_range(device, "backward's D rows", rows_bytes);
  at = align_up(at + rows_bytes, a);
  if (plan.three_stage) {
    plan.scores_offset = at;
    at = align_up(at + plan.three_stage->block_bytes, a);
    plan.dp_offset = at;
    at = align_up(at + plan.three_stage->block_bytes, a);
  }
  if (plan.query_splits > 1) {
    const uint64_t keys_all = uint64_t(plan.query_splits) * uint64_t(p.batch) * uint64_t(p.kv_heads) * uint64_t(p.seq_k);
    check_range(device, "backward's dK partials", keys_all * uint64_t(p.dim_qk) * f32);
    check_range(device, "backward's dV partials", keys_all * uint64_t(p.dim_v) * f32);
    plan.dk_parts_offset = at;
    at = align_up(at + keys_all * uint64_t(p.dim_qk) * f32, a);
    plan.dv_parts_offset = at;
    at = align_up(at + keys_all * uint64_t(p.dim_v) * f32, a);
  }
  if (plan.key_splits > 1) {
    const uint64_t rows_all = uint64_t(plan.key_splits) * uint64_t(p.batch) * uint64_t(p.heads) * uint64_t(p.seq_q);
    check_range(device, "backward's dQ partials", rows_all * uint64_t(p.dim_qk) * f32);
    plan.dq_parts_offset = at;
    at = align_up(at + rows_all * uint64_t(p.dim_qk) * f32, a);
  }
  plan.workspace_bytes = at;

  if (const std::optional<Dropout>& dropout = spec.options.dropout; dropout && dropout->p > 0.0f) {
    plan.dropout_threshold = dropout_threshold(dropout->p);
    plan.seed = dropout->seed;
    plan.dropout_offset = dropout->offset;
  }

  plan.report.kernel = plan.three_stage ? "three-stage" : plan.tiles ? "tiled" : plan.subgroup_form ? "subgroup" : "portable";
  plan.report.workgroup = plan.tiles ? plan.tiles->workgroup : plan.subgroup_form ? plan.lanes : plan.workgroup;
  if (plan.tiles) plan.report.tile_rows = plan.tiles->rows, plan.report.tile_keys = plan.tiles->keys;
  plan.report.query_splits = plan.query_splits;
  plan.report.key_splits = plan.key_splits;
  plan.report.workspace_bytes = plan.workspace_bytes;
  // The rows kernel (and the dsinks pass), the two walks or the three-stage form's chunks (two GEMMs,
  // the scores kernel, three GEMMs), the sums.
  uint32_t walks = 2;
  if (plan.three_stage) {
    plan.report.chunks = plan.three_stage->chunks;
    walks = plan.three_stage->chunks * 6;
  }
  plan.report.dispatches = 1 + walks + (p.per_head.sinks ? 1 : 0) + (plan.query_splits > 1 ? 2 : 0) + (plan.key_splits > 1 ? 1 : 0);
  return plan;
}

}  // namespace vkattn::detail
