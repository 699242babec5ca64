#include "attention_unfused.hpp"

#include <algorithm>
#include <string>

#include "attention_plan.hpp"
#include "attention_push.hpp"
#include "attention_record.hpp"
#include "binding.hpp"
#include "gemm.hpp"
#include "llvmpipe_limits.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
std::string str(uint64_t v) { return std::to_string(v); }

// The pieces of one chunk: batches [b0, b0 + nb), query heads [h0, h0 + nh), rows [i0, i0 + nr).
struct Chunk {
  int64_t b0, nb, h0, nh, i0, nr;
  int64_t rows() const { return nb * nh * nr; }
};

// One past the last element of a (batch, head, row) block of `l` starting at its offset `first`.
int64_t block_end(const TensorLayout& l, int64_t first, int64_t nb, int64_t nh, int64_t nr) {
  return first + (nb - 1) * l.stride_batch + (nh - 1) * l.stride_head + (nr - 1) * l.stride_seq + l.dim;
}

GemmOperand tensor_operand(const TensorRef& t) {
  GemmOperand o;
  o.buffer = t.buffer->handle();
  o.base = t.buffer->offset();
  o.dtype = t.layout.dtype;
  o.stride_batch = t.layout.stride_batch;
  o.stride_head = t.layout.stride_head;
  return o;
}

// The chunk's scores: dense (nb, nh, nr, seq_k) f32 from byte `base` of `buffer`.
GemmOperand scores_operand(VkBuffer buffer, uint64_t base, const Chunk& ch, int64_t seq_k) {
  GemmOperand o;
  o.buffer = buffer;
  o.base = base;
  o.dtype = DType::f32;
  o.end = ch.rows() * seq_k;
  o.stride_row = seq_k;
  o.stride_head = ch.nr * seq_k;
  o.stride_batch = ch.nh * ch.nr * seq_k;
  return o;
}

void record_chunk(ContextImpl& c, VkCommandBuffer cmd, const UnfusedPlan& plan, const AttentionArgs& args,
                  const Chunk& ch, VkBuffer scores, uint64_t scores_base) {
  const AttentionProblem& p = plan.problem;
  const int64_t group = p.group_size();
  const int64_t kv0 = ch.h0 / group, kv_count = (ch.h0 + ch.nh - 1) / group - kv0 + 1;
  const TensorLayout &ql = args.q.layout, &kl = args.k.layout, &vl = args.v.layout, &ol = args.out.layout;

  // 1. Scores: S = scale · Q · Kᵀ, f32.
  GemmCall s;
  s.a = tensor_operand(args.q);
  s.a.offset = ql.offset + ch.b0 * ql.stride_batch + ch.h0 * ql.stride_head + ch.i0 * ql.stride_seq;
  s.a.end = block_end(ql, s.a.offset, ch.nb, ch.nh, ch.nr);
  s.a.stride_row = ql.stride_seq;
  s.b = tensor_operand(args.k);
  s.b.offset = kl.offset + ch.b0 * kl.stride_batch + kv0 * kl.stride_head;
  s.b.end = block_end(kl, s.b.offset, ch.nb, kv_count, p.seq_k);
  s.b.stride_row = kl.stride_seq;
  s.c = scores_operand(scores, scores_base, ch, p.seq_k);
  s.m = ch.nr, s.n = p.seq_k, s.k = p.dim_qk;
  s.batch = ch.nb, s.heads = ch.nh, s.group = group, s.head_base = ch.h0 % group;
  s.alpha = p.scale;
  barrier_between_dispatches(cmd);  // also orders this chunk's writes of S after the last chunk's reads
  if (p.seq_k > 0) {
    record_gemm(c, cmd, s);
    barrier_between_dispatches(cmd);
  }

  // 2. The masked row softmax, in place.
  const uint64_t align = plan.alignment;
  Binding p_binding = bind(scores, scores_base, 4, uint64_t(ch.rows() * p.seq_k), align);
  const uint64_t rows_total = uint64_t(p.batch * p.heads * p.seq_q);
  Binding lse = args.lse.buffer ? bind(args.lse.buffer->handle(), args.lse.buffer->offset() + args.lse.offset, 4,
                                       rows_total, align)
                                : bind_dummy(c);
  Binding mask = bind_dummy(c);
  if (args.mask.buffer) {
    const MaskLayout& ml = args.mask.layout;
    const uint64_t msize = mask_type_size(ml.type);
    mask = bind(args.mask.buffer->handle(), args.mask.buffer->offset() + uint64_t(ml.offset) * msize, msize,
                uint64_t(ml.required_elements() - ml.offset), align);
  }
  Binding kv_len = args.kv_lengths.buffer ? bind(args.kv_lengths.buffer->handle(),
                                                 args.kv_lengths.buffer->offset() + args.kv_lengths.offset, 4,
                                                 uint64_t(p.batch), align)
                                          : bind_dummy(c);
  SoftmaxPush push{};
  push.seq_q = u32(p.seq_q), push.seq_k = u32(p.seq_k), push.heads = u32(p.heads);
  push.flags = mask_flags(p.causal, args.mask);
  if (args.mask.buffer) {
    mask_strides(args.mask.layout, push.m_sb, push.m_sh, push.m_ss);
    push.m_off = mask.element_offset;
  }
  if (args.kv_lengths.buffer) push.flags |= kFlagKvLengths;
  if (args.lse.buffer) push.flags |= kFlagWriteLse;
  push.rows = u32(ch.rows()), push.chunk_heads = u32(ch.nh), push.chunk_rows = u32(ch.nr);
  push.b0 = u32(ch.b0), push.h0 = u32(ch.h0), push.i0 = u32(ch.i0);
  push.p_off = p_binding.element_offset;
  push.lse_off = lse.element_offset;
  push.kv_len_off = kv_len.element_offset;
  if (p.seq_k == 0) p_binding = bind_dummy(c);  // no scores: nothing is read or written there

  const KernelLayout& layout = c.pipelines->layout(KernelKind::softmax);
  const VkPipeline softmax = c.pipelines->get(KernelKind::softmax, "attention_softmax", {plan.softmax_workgroup});
  const Binding* bindings[4] = {&p_binding, &lse, &mask, &kv_len};
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, softmax);
  push_bindings(c, cmd, layout.pipeline_layout, bindings, 4);
  vkCmdPushConstants(cmd, layout.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  const uint64_t gx = std::min<uint64_t>(uint64_t(ch.rows()), c.info.max_workgroup_count[0]);
  vkCmdDispatch(cmd, u32(gx), u32(ceil_div(uint64_t(ch.rows()), gx)), 1);
  barrier_between_dispatches(cmd);

  // 3. O = P · V; a weight of exactly 0 (a masked key) never multiplies its V.
  GemmCall w;
  w.a = scores_operand(scores, scores_base, ch, p.seq_k);
  w.b = tensor_operand(args.v);
  w.b.offset = vl.offset + ch.b0 * vl.stride_batch + kv0 * vl.stride_head;
  w.b.end = block_end(vl, w.b.offset, ch.nb, kv_count, p.seq_k);
  w.b.stride_row = 1;              // B's rows are V's columns (dims) ...
  w.b.stride_col = vl.stride_seq;  // ... and its columns V's rows (keys)
  w.c = tensor_operand(args.out);
  w.c.offset = ol.offset + ch.b0 * ol.stride_batch + ch.h0 * ol.stride_head + ch.i0 * ol.stride_seq;
  w.c.end = block_end(ol, w.c.offset, ch.nb, ch.nh, ch.nr);
  w.c.stride_row = ol.stride_seq;
  w.m = ch.nr, w.n = p.dim_v, w.k = p.seq_k;
  w.batch = ch.nb, w.heads = ch.nh, w.group = group, w.head_base = ch.h0 % group;
  w.skip_zero_a = true;
  if (p.seq_k == 0) {
    // No keys: O is 0. The GEMM writes it without reading A or B (k = 0); bind them to something.
    w.a.buffer = w.b.buffer = c.dummy().buffer;
    w.a.base = w.b.base = 0;
    w.a.offset = w.b.offset = 0;
    w.a.end = w.b.end = 1;
  }
  record_gemm(c, cmd, w);
}

}  // namespace

UnfusedPlan make_unfused_plan(const DeviceInfo& device, const AttentionArgs& args) {
  UnfusedPlan plan;
  plan.problem = check_attention_args(device, args);
  const AttentionProblem& p = plan.problem;
  plan.alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  const uint64_t max_range = device.max_storage_buffer_range - plan.alignment;
  const uint64_t row_bytes = std::max<uint64_t>(uint64_t(p.seq_k) * 4, 4);

  // Chunks: everything when the scores and every tensor's part fit one binding each (and the batch x
  // head matrices the GEMMs' grid); else one batch and as many heads as fit; else one head and as
  // many query rows as fit.
  const int64_t group = p.group_size();
  const auto spans = [&](const TensorRef& t, int64_t nb, int64_t nh, int64_t nr) {
    if (nb == 0 || nh == 0 || nr == 0) return uint64_t(0);
    return uint64_t(block_end(t.layout, 0, nb, nh, nr)) * dtype_size(p.dtype);
  };
  const auto fits = [&](int64_t nb, int64_t nh, int64_t nr) {
    const int64_t kv_heads = std::min<int64_t>(p.kv_heads, (nh + group - 1) / group + 1);  // a chunk may straddle groups
    return uint64_t(nb * nh) <= device.max_workgroup_count[2] &&  // the GEMMs' grid z
           uint64_t(nb * nh * nr) * row_bytes <= max_range && spans(args.q, nb, nh, nr) <= max_range &&
           spans(args.out, nb, nh, nr) <= max_range && spans(args.k, nb, kv_heads, p.seq_k) <= max_range &&
           spans(args.v, nb, kv_heads, p.seq_k) <= max_range;
  };
  plan.batch_chunk = std::max<int64_t>(p.batch, 1), plan.head_chunk = p.heads, plan.row_chunk = std::max<int64_t>(p.seq_q, 1);
  if (!fits(plan.batch_chunk, plan.head_chunk, plan.row_chunk)) {
    plan.batch_chunk = 1;
    while (plan.head_chunk > 1 && !fits(1, plan.head_chunk, plan.row_chunk)) --plan.head_chunk;
    while (plan.row_chunk > 1 && !fits(1, plan.head_chunk, plan.row_chunk))
      plan.row_chunk = std::min<int64_t>(plan.row_chunk / 2, int64_t(max_range / row_bytes));
    if (!fits(1, plan.head_chunk, plan.row_chunk))
      throw Error("unfused path: one query row of one head (its scores over seq_k " + str(p.seq_k) +
                  " keys, its K and V) spans more than maxStorageBufferRange (" + str(device.max_storage_buffer_range) +
                  " bytes) of " + device.name + "; use the fused path");
  }
  const int64_t rows = std::max<int64_t>(p.batch * p.heads * p.seq_q, 0);
  plan.chunks = rows == 0 ? 0
                          : u32(ceil_div(p.batch, plan.batch_chunk) * ceil_div(p.heads, plan.head_chunk) *
                                ceil_div(p.seq_q, plan.row_chunk));
  plan.chunk_scores_bytes = uint64_t(plan.batch_chunk * plan.head_chunk * plan.row_chunk) * uint64_t(p.seq_k) * 4;
  if (!args.weights.buffer && rows > 0) {
    plan.workspace_bytes = plan.chunk_scores_bytes + plan.alignment;
    if (plan.workspace_bytes > device.device_memory_bytes / 2)
      throw Error("unfused path: the scores of one chunk need " + str(plan.workspace_bytes) + " bytes, more than half of the " +
                  str(device.device_memory_bytes) + " bytes of device memory of " + device.name +
                  "; use the fused path, which never stores the (seq_q, seq_k) scores");
  }

  // The kernels' limits for the largest chunk.
  if (rows > 0) {
    check_gemm_shape(device, "unfused path, scores", plan.row_chunk, p.seq_k, p.dim_qk);
    check_gemm_shape(device, "unfused path, P·V", plan.row_chunk, p.dim_v, p.seq_k);
    const uint64_t chunk_rows = uint64_t(plan.batch_chunk * plan.head_chunk * plan.row_chunk);
    if (ceil_div(chunk_rows, device.max_workgroup_count[0]) > device.max_workgroup_count[1])
      throw Error("unfused path: " + str(chunk_rows) + " rows exceed what the softmax dispatch can cover on " + device.name);
    // The softmax loops about 3 * seq_k / workgroup times (three passes over the row).
    if (device.is_llvmpipe && 3 * ceil_div(p.seq_k, plan.softmax_workgroup) + 64 > kLlvmpipeLoopBudget)
      throw Error("unfused path: seq_k " + str(p.seq_k) + " exceeds what the row softmax can cover within lavapipe's loop limit");
    if (args.mask.buffer && uint64_t(args.mask.layout.required_elements() - args.mask.layout.offset) *
                                    mask_type_size(args.mask.layout.type) > max_range)
      throw Error("unfused path: the mask spans more than maxStorageBufferRange (" + str(device.max_storage_buffer_range) +
                  " bytes) of " + device.name + "; use the fused path");
    if (args.lse.buffer && uint64_t(rows) * 4 > max_range)
      throw Error("unfused path: lse spans more than maxStorageBufferRange of " + device.name);
  }
  return plan;
}

void record_unfused_attention(ContextImpl& c, VkCommandBuffer cmd, const UnfusedPlan& plan, const AttentionArgs& args,
                              VkBuffer workspace, uint64_t workspace_offset) {
  const AttentionProblem& p = plan.problem;
  if (plan.chunks == 0) return;
  const uint64_t row_bytes = uint64_t(p.seq_k) * 4;
  for (int64_t b0 = 0; b0 < p.batch; b0 += plan.batch_chunk)
    for (int64_t h0 = 0; h0 < p.heads; h0 += plan.head_chunk)
      for (int64_t i0 = 0; i0 < p.seq_q; i0 += plan.row_chunk) {
        Chunk ch{b0, std::min(plan.batch_chunk, p.batch - b0), h0, std::min(plan.head_chunk, p.heads - h0),
                 i0, std::min(plan.row_chunk, p.seq_q - i0)};
        VkBuffer scores = workspace;
        uint64_t base = (workspace_offset + plan.alignment - 1) / plan.alignment * plan.alignment;
        if (args.weights.buffer) {
          // The chunk's rows of P, contiguous: chunks cut whole batches, whole heads or rows of one head.
          scores = args.weights.buffer->handle();
          base = args.weights.buffer->offset() + args.weights.offset +
                 uint64_t((b0 * p.heads + h0) * p.seq_q + i0) * row_bytes;
        }
        record_chunk(c, cmd, plan, args, ch, scores, base);
      }
}

}  // namespace vkattn::detail
