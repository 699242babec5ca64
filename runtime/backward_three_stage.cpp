#include "backward_three_stage.hpp"

#include <algorithm>
#include <string>

#include "backward_dispatch.hpp"
#include "backward_plan.hpp"
#include "int_math.hpp"
#include "llvmpipe_limits.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// One chunk: batch elements [b0, b0 + nb), KV heads [g0, g0 + ng) with their query heads whole, query
// rows [i0, i0 + nr); `split` its row split (the dK/dV partials' index).
struct Chunk {
  int64_t b0, nb, g0, ng, i0, nr;
  uint32_t split;
};

// One past the last element of a (batch, head, row) block of `t` from its element `first`.
int64_t block_end(const TensorLayout& t, int64_t first, int64_t nb, int64_t nh, int64_t nr) {
  return first + (nb - 1) * t.stride_batch + (nh - 1) * t.stride_head + (nr - 1) * t.stride_seq + t.dim;
}

// A tensor in `slot`: its (batch, head) strides; rows and columns are the caller's.
GemmOperand tensor_operand(uint32_t slot, const TensorLayout& t, int64_t first, int64_t nb, int64_t nh, int64_t nr) {
  GemmOperand o;
  o.slot = slot;
  o.dtype = t.dtype;
  o.offset = first;
  o.end = block_end(t, first, nb, nh, nr);
  o.stride_batch = t.stride_batch;
  o.stride_head = t.stride_head;
  return o;
}

// The chunk's (rows x seq_k) f32 block of the workspace from byte `base`: (nb, nh, nr, seq_k) dense.
GemmOperand block_operand(uint32_t slot, uint64_t base, const Chunk& ch, int64_t group, int64_t seq_k) {
  GemmOperand o;
  o.slot = slot;
  o.base = base;
  o.dtype = DType::f32;
  o.end = ch.nb * ch.ng * group * ch.nr * seq_k;
  o.stride_row = seq_k;
  o.stride_head = ch.nr * seq_k;
  o.stride_batch = ch.ng * group * ch.nr * seq_k;
  return o;
}

// The block read transposed, a KV head's group at a time (the dK/dV GEMMs' A): rows are keys, the k
// index runs over (query head of the group, row), which the dense block lays out contiguously.
GemmOperand block_by_keys(uint32_t slot, uint64_t base, const Chunk& ch, int64_t group, int64_t seq_k) {
  GemmOperand o = block_operand(slot, base, ch, group, seq_k);
  o.stride_row = 1;
  o.stride_col = seq_k;
  o.stride_head = group * ch.nr * seq_k;
  return o;
}

// A query-row tensor (Q or dO) read by a group's (head, row) pairs along k, its dims as rows (the
// dK/dV GEMMs' B): k index c is head c / nr of the group, row c % nr.
GemmOperand rows_by_group(uint32_t slot, const TensorLayout& t, const Chunk& ch, int64_t group) {
  const int64_t h0 = ch.g0 * group;
  GemmOperand o = tensor_operand(slot, t, t.offset + ch.b0 * t.stride_batch + h0 * t.stride_head + ch.i0 * t.stride_seq,
                                 ch.nb, ch.ng * group, ch.nr);
  o.stride_row = 1;
  o.stride_col = t.stride_seq;
  o.col_block = ch.nr;
  o.stride_block = t.stride_head;
  o.stride_head = group * t.stride_head;
  return o;
}

// dK or dV of the chunk's KV heads (`t`: K's or V's layout in `slot`), or with row splits this split's
// f32 partials at byte `parts` of the workspace ([split][batch][KV head][key][dim], the reduce's).
GemmOperand key_gradient(const BackwardCallPlan& plan, const Chunk& ch, uint32_t slot, const TensorLayout& t,
                         uint64_t parts) {
  const AttentionProblem& p = plan.p;
  if (plan.three_stage->row_splits == 1) {
    GemmOperand o = tensor_operand(slot, t, t.offset + ch.b0 * t.stride_batch + ch.g0 * t.stride_head, ch.nb, ch.ng, p.seq_k);
    o.stride_row = t.stride_seq;
    return o;
  }
  GemmOperand o;
  o.slot = BackwardSlots{}.workspace;
  o.base = parts;
  o.dtype = DType::f32;
  o.stride_row = t.dim;
  o.stride_head = p.seq_k * t.dim;
  o.stride_batch = p.kv_heads * o.stride_head;
  o.offset = (int64_t(ch.split) * p.batch + ch.b0) * o.stride_batch + ch.g0 * o.stride_head;
  o.end = o.offset + (ch.nb - 1) * o.stride_batch + ch.ng * o.stride_head;
  return o;
}

void emit_chunk(ContextImpl& c, CommandList& list, const BackwardCallPlan& plan, const Chunk& ch) {
  const BackwardSlots S;
  const ThreeStageBackward& t = *plan.three_stage;
  const AttentionProblem& p = plan.p;
  const AttentionLayouts& l = plan.forward.dense;
  const int64_t group = p.group_size(), nh = ch.ng * group, h0 = ch.g0 * group;
  const int64_t rows = ch.nb * nh * ch.nr;
  const auto query_rows = [&](uint32_t slot, const TensorLayout& x) {
    GemmOperand o = tensor_operand(slot, x, x.offset + ch.b0 * x.stride_batch + h0 * x.stride_head + ch.i0 * x.stride_seq,
                                   ch.nb, nh, ch.nr);
    o.stride_row = x.stride_seq;
    return o;
  };
  const auto keys = [&](uint32_t slot, const TensorLayout& x) {
    GemmOperand o = tensor_operand(slot, x, x.offset + ch.b0 * x.stride_batch + ch.g0 * x.stride_head, ch.nb, ch.ng, p.seq_k);
    o.stride_row = x.stride_seq;
    return o;
  };
  // This chunk's writes of the blocks after the last chunk's reads (and the rows kernel's D).
  list.barrier_between_dispatches();

  {
    // 1. The raw dots S = Q·Kᵀ and dP = dO·Vᵀ (the scores kernel scales S as the forward does).
    GemmCall s;
    s.a = query_rows(S.q, l.q);
    s.b = keys(S.k, l.k);
    s.c = block_operand(S.workspace, plan.scores_offset, ch, group, p.seq_k);
    s.m = ch.nr, s.n = p.seq_k, s.k = p.dim_qk;
    s.batch = ch.nb, s.heads = nh, s.group = group;
    emit_gemm(c, list, s, t.gemm);
    GemmCall dp = s;
    dp.a = query_rows(S.grad_out, l.out);
    dp.b = keys(S.v, l.v);
    dp.c = block_operand(S.workspace, plan.dp_offset, ch, group, p.seq_k);
    dp.k = p.dim_v;
    emit_gemm(c, list, dp, t.gemm);
    list.barrier_between_dispatches();

    // 2. dS and P∘Z in place.
    BackwardPush push = backward_push(plan);
    push.BACKWARD_SCORES_B0 = u32(ch.b0);
    push.BACKWARD_SCORES_H0 = u32(h0);
    push.BACKWARD_SCORES_I0 = u32(ch.i0);
    push.BACKWARD_SCORES_CHUNK_BATCHES = u32(ch.nb);
    push.BACKWARD_SCORES_CHUNK_HEADS = u32(nh);
    push.BACKWARD_SCORES_CHUNK_ROWS = u32(ch.nr);
    push.BACKWARD_SCORES_SEQUENCES = plan.batches;
    const uint64_t gx = std::min<uint64_t>(uint64_t(rows), c.info.max_workgroup_count[0]);
    Dispatch d = backward_dispatch(c, plan, Shader::attention_backward_scores, backward_constants(c, plan, false), push,
                                   {u32(int64_t(gx)), u32(int64_t(ceil_div(uint64_t(rows), gx))), 1});
    const uint64_t block = uint64_t(rows) * uint64_t(p.seq_k);
    d.bind(BACKWARD_GRAD_A_BINDING, Binding{S.workspace, plan.scores_offset, 4, block});
    d.bind(BACKWARD_GRAD_B_BINDING, Binding{S.workspace, plan.dp_offset, 4, block});
    d.reads |= (1u << BACKWARD_GRAD_A_BINDING) | (1u << BACKWARD_GRAD_B_BINDING);  // (in place: read, then written)
    list.dispatch(d);
    list.barrier_between_dispatches();

    // 3. dV = (P∘Z)ᵀ·dO and dK = scale·dSᵀ·Q, a KV head's group of query heads and rows at a time.
    GemmCall dv;
    dv.a = block_by_keys(S.workspace, plan.dp_offset, ch, group, p.seq_k);
    dv.b = rows_by_group(S.grad_out, l.out, ch, group);
    dv.c = key_gradient(plan, ch, S.grad_v, l.v, plan.dv_parts_offset);
    dv.m = p.seq_k, dv.n = p.dim_v, dv.k = group * ch.nr;
    dv.batch = ch.nb, dv.heads = ch.ng;
    dv.skip_zero_a = true;
    emit_gemm(c, list, dv, t.gemm);
    GemmCall dk = dv;
    dk.a = block_by_keys(S.workspace, plan.scores_offset, ch, group, p.seq_k);
    dk.b = rows_by_group(S.q, l.q, ch, group);
    dk.c = key_gradient(plan, ch, S.grad_k, l.k, plan.dk_parts_offset);
    dk.n = p.dim_qk;
    dk.alpha = p.scale;
    emit_gemm(c, list, dk, t.gemm);
  }

  // dQ = scale·dS·K. A hidden key's dS is exactly 0 and never multiplies its K row.
  GemmCall dq;
  dq.a = block_operand(S.workspace, plan.scores_offset, ch, group, p.seq_k);
  dq.b = keys(S.k, l.k);
  dq.b.stride_row = 1;              // B's rows are K's columns (dims) ...
  dq.b.stride_col = l.k.stride_seq;  // ... and its columns K's rows (keys)
  dq.c = query_rows(S.grad_q, l.q);
  dq.m = ch.nr, dq.n = p.dim_qk, dq.k = p.seq_k;
  dq.batch = ch.nb, dq.heads = nh, dq.group = group;
  dq.alpha = p.scale;
  dq.skip_zero_a = true;
  emit_gemm(c, list, dq, t.gemm);
}

// The kernels' limits for chunks of `t` on `device`: the five GEMMs' grids and loops, the scores
// kernel's grid and, on lavapipe, its two walks over the keys (2 seq_k / workgroup, and the bisection
// of a packed batch's sequences).
void check_chunk_kernels(const ThreeStageBackward& t, const AttentionProblem& p, const DeviceInfo& device) {
  const int64_t group = p.group_size(), nr = t.row_chunk;
  check_gemm_shape(device, t.gemm, "three-stage backward, S = Q·Kᵀ", nr, p.seq_k, p.dim_qk);
  check_gemm_shape(device, t.gemm, "three-stage backward, dP = dO·Vᵀ", nr, p.seq_k, p.dim_v);
  check_gemm_shape(device, t.gemm, "three-stage backward, dQ = dS·K", nr, p.dim_qk, p.seq_k);
  check_gemm_shape(device, t.gemm, "three-stage backward, dK = dSᵀ·Q", p.seq_k, p.dim_qk, group * nr);
  check_gemm_shape(device, t.gemm, "three-stage backward, dV = (P∘Z)ᵀ·dO", p.seq_k, p.dim_v, group * nr);
  const uint64_t rows = uint64_t(t.batch_chunk * t.kv_head_chunk * group * nr);
  if (ceil_div(rows, device.max_workgroup_count[0]) > device.max_workgroup_count[1])
    throw unsupported("three-stage backward: " + str(rows) + " rows a chunk exceed what the scores kernel's grid covers on " +
                      device.name);
  if (t.scores_workgroup > device.max_workgroup_invocations)
    throw unsupported("three-stage backward: the scores kernel's workgroups of " + str(t.scores_workgroup) +
                      " invocations exceed maxComputeWorkGroupInvocations (" + str(device.max_workgroup_invocations) +
                      ") of " + device.name);
  if (device.is_llvmpipe && 2 * ceil_div(uint64_t(p.seq_k), t.scores_workgroup) + 32 > kLlvmpipeLoopBudget)
    throw unsupported("three-stage backward: seq_k " + str(uint64_t(p.seq_k)) +
                      " exceeds what the scores kernel walks within lavapipe's loop limit; use the fused path");
  if (t.block_bytes > device.max_storage_buffer_range)
    throw unsupported("three-stage backward: a chunk's scores take " + str(t.block_bytes) + " bytes, more than " +
                      device.name + " binds (" + str(device.max_storage_buffer_range) + ")");
}

}  // namespace

ThreeStageBackward plan_three_stage_backward(const DeviceInfo& device, const AttentionProblem& p,
                                             const AttentionLayouts& l, uint64_t alignment, uint32_t workgroup) {
  ThreeStageBackward t;
  t.gemm = choose_gemm(device);
  t.scores_workgroup = workgroup;
  const int64_t group = p.group_size();
  const uint64_t range = device.max_storage_buffer_range > alignment ? device.max_storage_buffer_range - alignment : 0;
  const uint64_t row_bytes = uint64_t(p.seq_k) * 4;
  const auto spans = [&](const TensorLayout& x, int64_t nb, int64_t nh, int64_t nr) {
    return uint64_t(block_end(x, 0, nb, nh, nr)) * dtype_size(x.dtype);
  };
  // A chunk fits when its blocks and every tensor's part fit one binding each, its matrices the
  // GEMMs' grid, and (lavapipe) the dK/dV GEMMs' sums over its group's rows the loop limit.
  const auto fits = [&](int64_t nb, int64_t ng, int64_t nr) {
    const int64_t nh = ng * group;
    return uint64_t(nb * nh) <= device.max_workgroup_count[2] && uint64_t(nb * nh * nr) * row_bytes <= range &&
           spans(l.q, nb, nh, nr) <= range && spans(l.out, nb, nh, nr) <= range && spans(l.k, nb, ng, p.seq_k) <= range &&
           spans(l.v, nb, ng, p.seq_k) <= range &&
           (!device.is_llvmpipe ||
            gemm_loop_iterations(t.gemm, p.seq_k, std::max(p.dim_qk, p.dim_v), group * nr) <= kLlvmpipeLoopBudget);
  };
  t.batch_chunk = p.batch, t.kv_head_chunk = p.kv_heads, t.row_chunk = p.seq_q;  // (each at least 1)
  if (!fits(t.batch_chunk, t.kv_head_chunk, t.row_chunk)) {
    t.batch_chunk = 1;
    while (t.kv_head_chunk > 1 && !fits(1, t.kv_head_chunk, t.row_chunk)) --t.kv_head_chunk;
    while (t.row_chunk > 1 && !fits(1, t.kv_head_chunk, t.row_chunk)) t.row_chunk = (t.row_chunk + 1) / 2;
    if (!fits(1, t.kv_head_chunk, t.row_chunk))
      throw unsupported("three-stage backward: one query row of a GQA group of " + str(uint64_t(group)) +
                        " heads (its scores over seq_k " + str(uint64_t(p.seq_k)) +
                        " keys, its K and V) does not fit one binding or lavapipe's loop limit on " + device.name +
                        "; use the fused path");
  }
  t.chunks = u32(ceil_div(p.batch, t.batch_chunk) * ceil_div(p.kv_heads, t.kv_head_chunk) * ceil_div(p.seq_q, t.row_chunk));
  t.row_splits = u32(ceil_div(p.seq_q, t.row_chunk));
  t.block_bytes = uint64_t(t.batch_chunk * t.kv_head_chunk * group * t.row_chunk) * uint64_t(p.seq_k) * 4;
  if (2 * t.block_bytes > device.device_memory_bytes / 2)
    throw unsupported("three-stage backward: the scores of one chunk need 2 x " + str(t.block_bytes) +
                      " bytes, more than half of the " + str(device.device_memory_bytes) + " bytes of device memory of " +
                      device.name + "; use the fused path, which never stores the (seq_q, seq_k) scores");
  check_chunk_kernels(t, p, device);
  return t;
}

void check_three_stage_fits(const ThreeStageBackward& t, const AttentionProblem& p, const DeviceInfo& device) {
  check_chunk_kernels(t, p, device);
}

void emit_three_stage_backward(ContextImpl& c, CommandList& list, const BackwardCallPlan& plan) {
  // (Every size is at least 1: check_attention_layouts.)
  const ThreeStageBackward& t = *plan.three_stage;
  const AttentionProblem& p = plan.p;
  for (int64_t b0 = 0; b0 < p.batch; b0 += t.batch_chunk)
    for (int64_t g0 = 0; g0 < p.kv_heads; g0 += t.kv_head_chunk)
      for (int64_t i0 = 0; i0 < p.seq_q; i0 += t.row_chunk)
        emit_chunk(c, list, plan,
                   Chunk{b0, std::min(t.batch_chunk, p.batch - b0), g0, std::min(t.kv_head_chunk, p.kv_heads - g0), i0,
                         std::min(t.row_chunk, p.seq_q - i0), u32(i0 / t.row_chunk)});
}

}  // namespace vkattn::detail
