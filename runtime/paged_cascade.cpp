// Cascade (shared-prefix) attention of a paged call (PagedAttentionLayouts::shared_prefix_pages): a
// prefix every sequence's block table starts with is read once for the whole batch. Planned as two
// fused passes over views of the call's own tensors, and recorded as their pass lengths, the passes
// and the merge (CascadePlan, attention_plan.hpp).
//   - The prefix pass sees the batch's query rows per KV head: its batch is the KV heads (K and V
//     offset by one head per batch entry), its heads the sequences and its rows a GQA group's rows of
//     a sequence (one run of Q: check_paged_attention asks for it), so a KV head's workgroups cover
//     every sequence's rows of its group and read each prefix page once. Every row of the table
//     reads row 0's first pages (row stride 0). No mask, ALiBi, window or sinks: the prefix is whole
//     and visible to every row (the checks), and the sinks belong to the suffix pass.
//   - The suffix pass is the call itself with each sequence's table read from column
//     shared_prefix_pages and its length less the prefix: bottom-right causal, windows and the
//     other modifiers see the same key positions relative to the row as without the cascade.
// Both passes write O in the call's dtype and LSE to the workspace; the merge weighs them by their
// LSEs as the split-KV combine weighs splits.
#include <algorithm>

#include "attention_plan.hpp"
#include "attention_record.hpp"
#include "int_math.hpp"
#include "pipelines.hpp"
#include "shader_abi.hpp"

namespace vkattn::detail {
namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// The prefix pass's layouts: (kv_heads, batch, group * seq_q) query rows of the call's Q, each batch
// entry the KV head of the same index, every sequence's table row 0.
AttentionLayouts prefix_layouts(const PagedAttentionLayouts& layouts, const PagedProblem& pp) {
  const AttentionProblem& a = pp.attention;
  const int64_t group = a.group_size(), seq_q = a.seq_q;
  AttentionLayouts p;
  p.q = layouts.q;
  p.q.batch = a.kv_heads;
  p.q.heads = a.batch;
  p.q.seq = group * seq_q;
  p.q.stride_batch = group * layouts.q.stride_head;
  p.q.stride_head = layouts.q.stride_batch;
  // A group's rows: heads stride_head apart when each has one row, else one run of stride_seq.
  p.q.stride_seq = seq_q == 1 ? layouts.q.stride_head : layouts.q.stride_seq;
  for (auto [view, cache] : {std::pair{&p.k, &layouts.k_cache}, std::pair{&p.v, &layouts.v_cache}}) {
    *view = paged_cache_view(a.dtype, a.kv_heads, *cache, pp.prefix_tokens());
    view->heads = 1;
    view->stride_batch = view->stride_head;  // batch entry g reads KV head g
  }
  p.out = TensorLayout::bhsd(a.dtype, a.kv_heads, a.batch, group * seq_q, a.dim_v);
  p.has_kv_lengths = true;
  p.has_lse = true;
  p.options.scale = a.scale;
  p.options.softcap = layouts.options.softcap;
  p.kv_quant = pp.quant;
  return p;
}

}  // namespace

CascadePlan plan_cascade(const DeviceInfo& device, KernelVariant variant, const PagedAttentionLayouts& layouts,
                         const PagedProblem& pp, const AttentionLayouts& dense, const PagedKeys& keys) {
  const AttentionProblem& a = pp.attention;
  const int64_t n = pp.shared_prefix_pages;
  CascadePlan c;
  c.keys = keys;
  c.prefix_tokens = pp.prefix_tokens();

  c.suffix_layouts = dense;
  const int64_t suffix_capacity = pp.capacity() - c.prefix_tokens;
  c.suffix_layouts.k = paged_cache_view(a.dtype, a.batch, layouts.k_cache, suffix_capacity);
  c.suffix_layouts.v = paged_cache_view(a.dtype, a.batch, layouts.v_cache, suffix_capacity);
  c.suffix_layouts.out = TensorLayout::bhsd(a.dtype, a.batch, a.heads, a.seq_q, a.dim_v);
  c.suffix_layouts.has_lse = true;
  PagedKeys suffix_keys = keys;
  suffix_keys.max_pages = pp.max_pages - n;
  suffix_keys.table_offset = n;
  suffix_keys.table_row_stride = pp.max_pages;
  c.suffix = plan_fused(device, variant, c.suffix_layouts, true, &suffix_keys);

  c.prefix_layouts = prefix_layouts(layouts, pp);
  PagedKeys prefix_keys = keys;
  prefix_keys.max_pages = n;
  prefix_keys.table_offset = 0;
  prefix_keys.table_row_stride = 0;
  prefix_keys.seq_new = 0;
  c.prefix = plan_fused(device, variant, c.prefix_layouts, true, &prefix_keys);

  // The workspace: the passes' own scratch (one at a time), then the lengths and the passes' results.
  const uint64_t align = std::max(c.prefix.alignment, c.suffix.alignment), esize = dtype_size(a.dtype);
  const uint64_t rows = uint64_t(a.batch * a.heads * a.seq_q), lse_bytes = rows * 4;
  const uint64_t o_bytes = rows * uint64_t(a.dim_v) * esize;
  uint64_t at = align_up(std::max(c.prefix.workspace_bytes, c.suffix.workspace_bytes), align);
  c.lengths_offset = at;
  at = align_up(at + uint64_t(a.batch + a.kv_heads) * 4, align);
  c.prefix_layouts.out.offset = int64_t(at / esize);
  at = align_up(at + o_bytes, align);
  c.prefix_lse_offset = at;
  at = align_up(at + lse_bytes, align);
  c.suffix_layouts.out.offset = int64_t(at / esize);
  at = align_up(at + o_bytes, align);
  c.suffix_lse_offset = at;
  c.workspace_bytes = at + lse_bytes;
  return c;
}

void emit_cascade(ContextImpl& c, CommandList& list, const CascadePlan& plan, const AttentionLayouts& layouts,
                  const AttentionSlots& slots) {
  const AttentionProblem& a = plan.suffix.problem;
  const uint64_t esize = dtype_size(a.dtype), rows = uint64_t(a.batch * a.heads * a.seq_q);

  // 1. The passes' key lengths (the workspace may still be read by the last run's merge).
  CascadeLengthsPush lengths{};
  lengths.batch = u32(a.batch), lengths.kv_heads = u32(a.kv_heads), lengths.prefix_tokens = u32(plan.prefix_tokens);
  lengths.capacity = u32(plan.keys.max_pages * plan.keys.page_size), lengths.seq_new = u32(plan.keys.seq_new);
  Dispatch d;
  d.use(c.pipelines->layout(KernelKind::cascade_lengths));
  d.pipeline = c.pipelines->get(cascade_lengths_pipeline());
  d.bind(CASCADE_LENGTHS_IN_BINDING, Binding{slots.kv_lengths, slots.kv_lengths_base, 4, uint64_t(a.batch)},
         offsetof(CascadeLengthsPush, in_off));
  d.bind(CASCADE_LENGTHS_OUT_BINDING, Binding{slots.workspace, plan.lengths_offset, 4, uint64_t(a.batch + a.kv_heads)},
         offsetof(CascadeLengthsPush, out_off));
  d.set_push(lengths);
  d.groups = {u32(int64_t(ceil_div(uint64_t(a.batch + a.kv_heads), 64))), 1, 1};
  list.barrier_between_dispatches();
  list.dispatch(d);
  list.barrier_between_dispatches();

  // 2. and 3. The passes, one after the other (they share the scratch at the workspace's start), each
  // writing O and LSE and reading its lengths in the workspace (O at its layout's offset).
  const auto pass_slots = [&](uint64_t lse_offset, uint64_t lengths_offset) {
    AttentionSlots s = slots;
    s.out = s.lse = s.kv_lengths = slots.workspace;
    s.lse_base = lse_offset;
    s.kv_lengths_base = lengths_offset;
    return s;
  };
  emit_fused_attention(c, list, plan.prefix, plan.prefix_layouts,
                       pass_slots(plan.prefix_lse_offset, plan.lengths_offset + uint64_t(a.batch) * 4));
  list.barrier_between_dispatches();
  emit_fused_attention(c, list, plan.suffix, plan.suffix_layouts, pass_slots(plan.suffix_lse_offset, plan.lengths_offset));
  list.barrier_between_dispatches();

  // 4. The merge into the call's O and LSE.
  const TensorLayout& o = layouts.out;
  CascadeMergePush merge{};
  merge.batch = u32(a.batch), merge.heads = u32(a.heads), merge.group = u32(a.group_size());
  merge.seq_q = u32(a.seq_q), merge.dim_v = u32(a.dim_v);
  merge.o_sb = u32(o.stride_batch), merge.o_sh = u32(o.stride_head), merge.o_ss = u32(o.stride_seq);
  merge.write_lse = layouts.has_lse ? 1u : 0u;
  const auto workspace_tensor = [&](const TensorLayout& t) {
    return Binding{slots.workspace, uint64_t(t.offset) * esize, esize, uint64_t(t.element_count())};
  };
  Dispatch m;
  m.use(c.pipelines->layout(KernelKind::cascade_merge));
  m.pipeline = c.pipelines->get(cascade_merge_pipeline(a.dtype));
  m.bind(CASCADE_MERGE_PREFIX_O_BINDING, workspace_tensor(plan.prefix_layouts.out), offsetof(CascadeMergePush, po_off));
  m.bind(CASCADE_MERGE_PREFIX_LSE_BINDING, Binding{slots.workspace, plan.prefix_lse_offset, 4, rows},
         offsetof(CascadeMergePush, plse_off));
  m.bind(CASCADE_MERGE_SUFFIX_O_BINDING, workspace_tensor(plan.suffix_layouts.out), offsetof(CascadeMergePush, so_off));
  m.bind(CASCADE_MERGE_SUFFIX_LSE_BINDING, Binding{slots.workspace, plan.suffix_lse_offset, 4, rows},
         offsetof(CascadeMergePush, slse_off));
  m.bind(CASCADE_MERGE_O_BINDING, Binding{slots.out, uint64_t(o.offset) * esize, esize, uint64_t(o.required_elements() - o.offset)},
         offsetof(CascadeMergePush, o_off));
  m.bind(CASCADE_MERGE_LSE_BINDING, layouts.has_lse ? Binding{slots.lse, slots.lse_base, 4, rows} : kPlaceholder,
         offsetof(CascadeMergePush, lse_off));
  m.set_push(merge);
  const uint64_t groups = ceil_div(rows * uint64_t(a.dim_v), 64);
  m.groups = {u32(int64_t(std::min<uint64_t>(groups, c.info.max_workgroup_count[0]))), 1, 1};
  list.dispatch(m);
}

}  // namespace vkattn::detail
