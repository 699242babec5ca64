#include "attention_unfused.hpp"
#include "int_math.hpp"

#include <algorithm>
#include <string>

#include "attention_plan.hpp"
#include "attention_push.hpp"
#include "attention_record.hpp"
#include "per_head_bindings.hpp"
#include "gemm.hpp"
#include "llvmpipe_limits.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

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

GemmOperand tensor_operand(uint32_t slot, const TensorLayout& t) {
  GemmOperand o;
  o.slot = slot;
  o.dtype = t.dtype;
  o.stride_batch = t.stride_batch;
  o.stride_head = t.stride_head;
  return o;
}

// The chunk's scores: dense (nb, nh, nr, seq_k) f32 from byte `base` of slot `slot`.
GemmOperand scores_operand(uint32_t slot, uint64_t base, const Chunk& ch, int64_t seq_k) {
  GemmOperand o;
  o.slot = slot;
  o.base = base;
  o.dtype = DType::f32;
  o.end = ch.rows() * seq_k;
  o.stride_row = seq_k;
  o.stride_head = ch.nr * seq_k;
  o.stride_batch = ch.nh * ch.nr * seq_k;
  return o;
}

// A chunk's product (scores or P·V) over whole GQA groups: group x nr rows, one matrix per (batch,
// KV head). Its query-side operands, A (Q or the scores) and C (the scores or O), take a group's
// heads as the rows of one matrix: row g * nr + i is row i of the group's head g. Their rows are
// evenly spaced (the plan's pack_group_rows): one row a head, one head apart, or a head's rows
// followed by the next head's.
// The loop iterations of one invocation of the row softmax (attention_softmax.comp): two passes over
// the row's keys, and the reductions.
uint64_t softmax_loops(int64_t seq_k, uint32_t workgroup) { return 2 * ceil_div(uint64_t(seq_k), workgroup) + 64; }

// The row softmax's workgroup. GPUs: 128 invocations. CPU devices: one subgroup, doubled only where
// the three passes over a row would pass lavapipe's loop limit: llvmpipe runs a workgroup's subgroups
// one after another and switches between them at every barrier, and the reductions' 2 x
// log2(workgroup) barriers cost more than short rows themselves (1024-key rows, 8 heads, f16 on
// lavapipe 22.3.6: the softmax 307 ms with 128 invocations, 192 with 8).
uint32_t softmax_workgroup(const DeviceInfo& device, int64_t seq_k) {
  if (!device.is_cpu()) return 128;
  uint32_t workgroup = std::clamp<uint32_t>(device.subgroup_size, 4, 128);  // a power of two
  while (workgroup < 128 && device.is_llvmpipe && softmax_loops(seq_k, workgroup) > kLlvmpipeLoopBudget)
    workgroup *= 2;
  return workgroup;  // Vulkan's maxComputeWorkGroupInvocations is at least 128
}

void pack_group(GemmCall& g, const Chunk& ch, int64_t group) {
  for (GemmOperand* o : {&g.a, &g.c}) {
    if (ch.nr == 1) o->stride_row = o->stride_head;
    o->stride_head *= group;
  }
  g.m = group * ch.nr;
  g.heads = ch.nh / group;
  g.group = 1, g.head_base = 0;
}

// B of a chunk's product read from a paged cache (the plan's `paged`): K's or V's cache bound whole
// from the chunk's first KV head (`head_offset` elements), keys through the chunk's rows of the
// block table.
void page_b(GemmCall& g, const PagedKeys& keys, const AttentionSlots& slots, const Chunk& ch, bool v, int64_t head_offset) {
  g.b.offset = head_offset;
  g.b.end = v ? keys.v_elements : keys.k_elements;
  GemmPagedB t;
  t.table_slot = slots.block_table;
  t.table_base = uint64_t(keys.table_offset + ch.b0 * keys.row_stride()) * 4;
  t.entries_per_batch = keys.row_stride();
  t.pages = keys.num_pages;
  t.page_size = keys.page_size;
  t.page_elements = int64_t(keys.page_rows()) * (v ? g.b.stride_col : g.b.stride_row);
  t.keys_are_columns = v;
  t.lengths_slot = slots.kv_lengths;  // the cache lengths (plan_paged binds them there)
  t.lengths_base = uint64_t(ch.b0) * 4;
  t.appended = keys.seq_new;
  g.paged_b = t;
}

void emit_chunk(ContextImpl& c, CommandList& list, const UnfusedPlan& plan, const AttentionLayouts& l,
                const AttentionSlots& slots, const Chunk& ch, uint32_t scores, uint64_t scores_base) {
  const AttentionProblem& p = plan.problem;
  const int64_t group = p.group_size();
  const int64_t kv0 = ch.h0 / group, kv_count = (ch.h0 + ch.nh - 1) / group - kv0 + 1;
  const TensorLayout &ql = l.q, &kl = l.k, &vl = l.v, &ol = l.out;

  // 1. Scores: S = scale · Q · Kᵀ, f32.
  GemmCall s;
  s.a = tensor_operand(slots.q, ql);
  s.a.offset = ql.offset + ch.b0 * ql.stride_batch + ch.h0 * ql.stride_head + ch.i0 * ql.stride_seq;
  s.a.end = block_end(ql, s.a.offset, ch.nb, ch.nh, ch.nr);
  s.a.stride_row = ql.stride_seq;
  s.b = tensor_operand(slots.k, kl);
  s.b.offset = kl.offset + ch.b0 * kl.stride_batch + kv0 * kl.stride_head;
  s.b.end = block_end(kl, s.b.offset, ch.nb, kv_count, p.seq_k);
  s.b.stride_row = kl.stride_seq;
  if (plan.paged) page_b(s, *plan.paged, slots, ch, /*v=*/false, kv0 * kl.stride_head);
  s.c = scores_operand(scores, scores_base, ch, p.seq_k);
  s.m = ch.nr, s.n = p.seq_k, s.k = p.dim_qk;
  s.batch = ch.nb, s.heads = ch.nh, s.group = group, s.head_base = ch.h0 % group;
  s.alpha = p.scale;
  if (plan.pack_group_rows) pack_group(s, ch, group);
  list.barrier_between_dispatches();  // also orders this chunk's writes of S after the last chunk's reads
  if (p.seq_k > 0) {
    emit_gemm(c, list, s, plan.gemm);
    list.barrier_between_dispatches();
  }

  // 2. The masked row softmax, in place.
  const Binding p_binding =
      p.seq_k == 0 ? kPlaceholder  // no scores: nothing is read or written there
                   : Binding{scores, scores_base, 4, uint64_t(ch.rows() * p.seq_k)};
  const uint64_t rows_total = uint64_t(p.batch * p.heads * p.seq_q);
  const Binding lse = l.has_lse ? Binding{slots.lse, 0, 4, rows_total} : kPlaceholder;
  Binding mask = kPlaceholder;
  if (l.mask) {
    const uint64_t msize = mask_type_size(l.mask->type);
    mask = Binding{slots.mask, uint64_t(l.mask->offset) * msize, msize, uint64_t(l.mask->required_elements() - l.mask->offset)};
  }
  Binding kv_len = l.has_kv_lengths ? Binding{slots.kv_lengths, 0, 4, uint64_t(p.batch)} : kPlaceholder;
  if (plan.varlen_batch > 0) {  // no mask, no key lengths: the offsets take their bindings
    mask = Binding{slots.block_table, 0, 4, uint64_t(plan.varlen_batch + 1)};
    kv_len = Binding{slots.kv_lengths, 0, 4, uint64_t(plan.varlen_batch + 1)};
  }
  SoftmaxPush push{};
  push.seq_q = u32(p.seq_q), push.seq_k = u32(p.seq_k), push.heads = u32(p.heads);
  push.flags = mask_flags(p.causal, l.mask);
  if (l.mask) mask_strides(*l.mask, push.m_sb, push.m_sh, push.m_ss);
  if (l.has_kv_lengths) push.flags |= kFlagKvLengths;
  if (l.has_lse) push.flags |= kFlagWriteLse;
  if (plan.varlen_batch > 0) push.flags |= kFlagVarlen, push.varlen_batch = u32(plan.varlen_batch);
  if (plan.paged) push.flags |= kFlagKvLengths | kFlagCacheLengths, push.seq_new = u32(plan.paged->seq_new);
  push.rows = u32(ch.rows()), push.chunk_heads = u32(ch.nh), push.chunk_rows = u32(ch.nr);
  push.b0 = u32(ch.b0), push.h0 = u32(ch.h0), push.i0 = u32(ch.i0);

  Dispatch softmax;
  softmax.use(c.pipelines->layout(KernelKind::softmax));
  const ModifierConstants modifiers = modifier_constants(p, l.options);
  softmax.pipeline = c.pipelines->get(softmax_pipeline(plan.softmax_workgroup, modifiers, plan.softmax_quads));
  if (plan.softmax_quads) {  // P's binding off a 16-byte grid at replay: the plain build
    softmax.unchunked_pipeline = c.pipelines->get(softmax_pipeline(plan.softmax_workgroup, modifiers, false));
    softmax.chunk_mask[SOFTMAX_SCORES_BINDING] = 15;
  }
  softmax.bind(SOFTMAX_SCORES_BINDING, p_binding, offsetof(SoftmaxPush, p_off));
  softmax.bind(SOFTMAX_LSE_BINDING, lse, offsetof(SoftmaxPush, lse_off));
  softmax.bind(SOFTMAX_MASK_BINDING, mask, offsetof(SoftmaxPush, m_off));
  softmax.bind(SOFTMAX_KV_LENGTHS_BINDING, kv_len, offsetof(SoftmaxPush, kv_len_off));
  // The score modifiers' per-head tensors, whole: the softmax indexes them with the global (b, h).
  bind_per_head(softmax, KernelKind::softmax, per_head_slot_bindings(slots.per_head, l.per_head()));
  softmax.set_push(push);
  const uint64_t gx = std::min<uint64_t>(uint64_t(ch.rows()), c.info.max_workgroup_count[0]);
  softmax.groups = {u32(int64_t(gx)), u32(int64_t(ceil_div(uint64_t(ch.rows()), gx))), 1};
  list.dispatch(softmax);
  list.barrier_between_dispatches();

  // 3. O = P · V; a weight of exactly 0 (a masked key) never multiplies its V.
  GemmCall w;
  w.a = scores_operand(scores, scores_base, ch, p.seq_k);
  w.b = tensor_operand(slots.v, vl);
  w.b.offset = vl.offset + ch.b0 * vl.stride_batch + kv0 * vl.stride_head;
  w.b.end = block_end(vl, w.b.offset, ch.nb, kv_count, p.seq_k);
  w.b.stride_row = 1;              // B's rows are V's columns (dims) ...
  w.b.stride_col = vl.stride_seq;  // ... and its columns V's rows (keys)
  if (plan.paged) page_b(w, *plan.paged, slots, ch, /*v=*/true, kv0 * vl.stride_head);
  w.c = tensor_operand(slots.out, ol);
  w.c.offset = ol.offset + ch.b0 * ol.stride_batch + ch.h0 * ol.stride_head + ch.i0 * ol.stride_seq;
  w.c.end = block_end(ol, w.c.offset, ch.nb, ch.nh, ch.nr);
  w.c.stride_row = ol.stride_seq;
  w.m = ch.nr, w.n = p.dim_v, w.k = p.seq_k;
  w.batch = ch.nb, w.heads = ch.nh, w.group = group, w.head_base = ch.h0 % group;
  w.skip_zero_a = true;
  if (plan.pack_group_rows) pack_group(w, ch, group);
  if (p.seq_k == 0) {
    // No keys: O is 0. The GEMM writes it without reading A or B (k = 0); bind them to something.
    w.a.slot = w.b.slot = kPlaceholderSlot;
    w.a.base = w.b.base = 0;
    w.a.offset = w.b.offset = 0;
    w.a.end = w.b.end = 1;
  }
  emit_gemm(c, list, w, plan.gemm);
}

}  // namespace

UnfusedPlan make_unfused_plan(const DeviceInfo& device, const AttentionLayouts& layouts, bool weights,
                              const PagedKeys* paged) {
  UnfusedPlan plan;
  if (paged) {
    if (paged->seq_new >= (int64_t(1) << 24))
      throw unsupported("unfused path: appending " + str(uint64_t(paged->seq_new)) +
                        " tokens to a paged cache; the three-stage path takes fewer than 2^24 (use the fused path)");
    plan.paged = *paged;
  }
  plan.problem = check_attention_layouts(device, layouts);
  if (plan.problem.kv_quant != KvQuant::none)
    throw unsupported(std::string("kv_quant: ") + to_string(plan.problem.kv_quant) +
                      " K and V run on the fused path only, not the three-stage path (weights, --path unfused)");
  plan.weights = weights;
  plan.gemm = choose_gemm(device);
  const AttentionProblem& p = plan.problem;
  plan.softmax_workgroup = softmax_workgroup(device, p.seq_k);
  // By quads where loads cost by the component (CPU devices: llvmpipe): B1 H8 1024² f16 on lavapipe
  // 22.3.6, the softmax 140 ms element by element.
  plan.softmax_quads = device.is_cpu() && device.shader_int64 && p.seq_k > 0 && p.seq_k % 4 == 0;
  plan.alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  const uint64_t max_range = device.max_storage_buffer_range - plan.alignment;
  const uint64_t row_bytes = std::max<uint64_t>(uint64_t(p.seq_k) * 4, 4);

  // Chunks: everything when the scores and every tensor's part fit one binding each (and the batch x
  // head matrices the GEMMs' grid); else one batch and as many heads as fit; else one head and as
  // many query rows as fit.
  const int64_t group = p.group_size();
  const auto spans = [&](const TensorLayout& t, int64_t nb, int64_t nh, int64_t nr) {
    if (nb == 0 || nh == 0 || nr == 0) return uint64_t(0);
    return uint64_t(block_end(t, 0, nb, nh, nr)) * dtype_size(p.dtype);
  };
  const auto fits = [&](int64_t nb, int64_t nh, int64_t nr) {
    const int64_t kv_heads = std::min<int64_t>(p.kv_heads, (nh + group - 1) / group + 1);  // a chunk may straddle groups
    return uint64_t(nb * nh) <= device.max_workgroup_count[2] &&  // the GEMMs' grid z
           uint64_t(nb * nh * nr) * row_bytes <= max_range && spans(layouts.q, nb, nh, nr) <= max_range &&
           spans(layouts.out, nb, nh, nr) <= max_range &&
           (paged || (spans(layouts.k, nb, kv_heads, p.seq_k) <= max_range &&  // a paged cache is bound whole
                      spans(layouts.v, nb, kv_heads, p.seq_k) <= max_range));
  };
  plan.batch_chunk = std::max<int64_t>(p.batch, 1), plan.head_chunk = p.heads, plan.row_chunk = std::max<int64_t>(p.seq_q, 1);
  if (!fits(plan.batch_chunk, plan.head_chunk, plan.row_chunk)) {
    plan.batch_chunk = 1;
    while (plan.head_chunk > 1 && !fits(1, plan.head_chunk, plan.row_chunk)) --plan.head_chunk;
    while (plan.row_chunk > 1 && !fits(1, plan.head_chunk, plan.row_chunk))
      plan.row_chunk = std::min<int64_t>(plan.row_chunk / 2, int64_t(max_range / row_bytes));
    if (!fits(1, plan.head_chunk, plan.row_chunk))
      throw unsupported("unfused path: one query row of one head (its scores over seq_k " + str(p.seq_k) +
                  " keys, its K and V) spans more than maxStorageBufferRange (" + str(device.max_storage_buffer_range) +
                  " bytes) of " + device.name + "; use the fused path");
  }
  const int64_t rows = std::max<int64_t>(p.batch * p.heads * p.seq_q, 0);
  plan.chunks = rows == 0 ? 0
                          : u32(ceil_div(p.batch, plan.batch_chunk) * ceil_div(p.heads, plan.head_chunk) *
                                ceil_div(p.seq_q, plan.row_chunk));
  plan.chunk_scores_bytes = uint64_t(plan.batch_chunk * plan.head_chunk * plan.row_chunk) * uint64_t(p.seq_k) * 4;
  if (!weights && rows > 0) {
    plan.workspace_bytes = plan.chunk_scores_bytes + plan.alignment;
    if (plan.workspace_bytes > device.device_memory_bytes / 2)
      throw unsupported("unfused path: the scores of one chunk need " + str(plan.workspace_bytes) + " bytes, more than half of the " +
                  str(device.device_memory_bytes) + " bytes of device memory of " + device.name +
                  "; use the fused path, which never stores the (seq_q, seq_k) scores");
  }

  // Whole groups in every chunk, their rows evenly spaced in Q and O: see pack_group_rows.
  const auto heads_in_sequence = [&](const TensorLayout& t) {
    return plan.row_chunk == 1 || (plan.row_chunk == p.seq_q && t.stride_head == p.seq_q * t.stride_seq);
  };
  plan.pack_group_rows = group > 1 && plan.head_chunk % group == 0 && heads_in_sequence(layouts.q) &&
                         heads_in_sequence(layouts.out);
  const int64_t gemm_rows = plan.gemm_rows();

  // The kernels' limits for the largest chunk.
  if (rows > 0) {
    check_gemm_shape(device, plan.gemm, "unfused path, scores", gemm_rows, p.seq_k, p.dim_qk);
    check_gemm_shape(device, plan.gemm, "unfused path, P·V", gemm_rows, p.dim_v, p.seq_k);
    const uint64_t chunk_rows = uint64_t(plan.batch_chunk * plan.head_chunk * plan.row_chunk);
    if (ceil_div(chunk_rows, device.max_workgroup_count[0]) > device.max_workgroup_count[1])
      throw unsupported("unfused path: " + str(chunk_rows) + " rows exceed what the softmax dispatch can cover on " + device.name);
    if (device.is_llvmpipe && softmax_loops(p.seq_k, plan.softmax_workgroup) > kLlvmpipeLoopBudget)
      throw unsupported("unfused path: seq_k " + str(p.seq_k) + " exceeds what the row softmax can cover within lavapipe's loop limit");
    if (layouts.mask && uint64_t(layouts.mask->required_elements() - layouts.mask->offset) *
                                mask_type_size(layouts.mask->type) > max_range)
      throw unsupported("unfused path: the mask spans more than maxStorageBufferRange (" + str(device.max_storage_buffer_range) +
                  " bytes) of " + device.name + "; use the fused path");
    if (layouts.has_lse && uint64_t(rows) * 4 > max_range)
      throw unsupported("unfused path: lse spans more than maxStorageBufferRange of " + device.name);
  }
  return plan;
}

void emit_unfused_attention(ContextImpl& c, CommandList& list, const UnfusedPlan& plan, const AttentionLayouts& layouts,
                            const AttentionSlots& slots) {
  const AttentionProblem& p = plan.problem;
  if (plan.chunks == 0) return;
  const uint64_t row_bytes = uint64_t(p.seq_k) * 4;
  for (int64_t b0 = 0; b0 < p.batch; b0 += plan.batch_chunk)
    for (int64_t h0 = 0; h0 < p.heads; h0 += plan.head_chunk)
      for (int64_t i0 = 0; i0 < p.seq_q; i0 += plan.row_chunk) {
        Chunk ch{b0, std::min(plan.batch_chunk, p.batch - b0), h0, std::min(plan.head_chunk, p.heads - h0),
                 i0, std::min(plan.row_chunk, p.seq_q - i0)};
        // The chunk's rows of P, contiguous (chunks cut whole batches, whole heads or rows of one
        // head); without weights, the workspace (its slot starts aligned) holds one chunk at a time.
        if (plan.weights)
          emit_chunk(c, list, plan, layouts, slots, ch, slots.weights, uint64_t((b0 * p.heads + h0) * p.seq_q + i0) * row_bytes);
        else
          emit_chunk(c, list, plan, layouts, slots, ch, slots.workspace, 0);
      }
}

}  // namespace vkattn::detail
