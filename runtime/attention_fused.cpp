// The fused path's command list (the kernel of the plan's FusedKernel, then the split-KV combine
// pass), and the barriers vkattn's synchronous calls put around recorded work. A chunk's dispatches
// are built from named pieces: its bindings (chunk_bindings), the kernel's push constants
// (kernel_push) and specialization constants (kernel_constants), its pipelines, the combine, and the
// grid of each range of query tiles and splits (emit_range).
#include <algorithm>
#include <string>

#include "attention_plan.hpp"
#include "int_math.hpp"
#include "attention_push.hpp"
#include "attention_record.hpp"
#include "per_head_bindings.hpp"
#include "kv_storage.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "vkattn/attention.hpp"

namespace vkattn {
namespace detail {
namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// What a chunk's dispatches are recorded for: the plan, the chunk's layouts (chunk_layouts) and
// problem, and the sequences of its grid's z.
struct ChunkCall {
  const FusedPlan& plan;
  const AttentionLayouts& l;
  AttentionProblem p;  // the plan's, with the chunk's batches and heads
  // A packed variable-length batch (plan.varlen): the grid's z counts its sequences, the tensors'
  // batch is 1.
  uint64_t batches = 0;
  bool split() const { return plan.splits > 1; }
  uint32_t groups_y() const { return u32(p.heads) / plan.config.heads_per_workgroup(p.group_size()); }
};

ChunkCall chunk_call(const FusedPlan& plan, const AttentionLayouts& l) {
  ChunkCall call{plan, l, plan.problem, 0};
  call.p.batch = l.q.batch;
  call.p.heads = l.q.heads;
  call.p.kv_heads = l.k.heads;
  call.batches = plan.varlen ? uint64_t(plan.varlen->batch) : uint64_t(call.p.batch);
  return call;
}

// The bindings every dispatch of a chunk shares (K and V are bound per dispatch: kv_bindings).
struct ChunkBindings {
  Binding q, o, lse, mask, kv_lengths, block_table;
  PerHead<Binding> per_head;
  Binding partial_o = kPlaceholder, partial_lse = kPlaceholder;  // split calls
  Binding redo = kPlaceholder;  // the careful pass's ballots
  Binding work_list = kPlaceholder;
};

// Its LSE rows and key lengths start at bytes `lse_offset` and `kv_offset` of their slots.
ChunkBindings chunk_bindings(const ChunkCall& call, const AttentionSlots& slots, uint64_t lse_offset,
                             uint64_t kv_offset) {
  const FusedPlan& plan = call.plan;
  const AttentionLayouts& l = call.l;
  const AttentionProblem& p = call.p;
  const uint64_t esize = dtype_size(p.dtype);
  ChunkBindings b;
  // A tensor's binding starts at its first element (its layout offset), so chunks bind only their part.
  const auto tensor = [&](uint32_t slot, const TensorLayout& t) {
    return Binding{slot, uint64_t(t.offset) * esize, esize, uint64_t(t.required_elements() - t.offset)};
  };
  b.q = tensor(slots.q, l.q);
  b.o = tensor(slots.out, l.out);
  // A paged cache's rows of the block table start at the chunk's first batch. A packed batch
  // (plan.varlen): cu_seqlens_q where the block table is and cu_seqlens_k where the key lengths are
  // (shader_abi.h).
  b.block_table = plan.paged ? Binding{slots.block_table,
                                       (uint64_t(plan.paged->table_offset) * 4 + kv_offset * uint64_t(plan.paged->row_stride())),
                                       4, uint64_t(plan.paged->table_span(p.batch))}
                             : kPlaceholder;
  if (plan.varlen) b.block_table = Binding{slots.block_table, 0, 4, call.batches + 1};
  const uint64_t rows_total = uint64_t(p.batch) * uint64_t(p.heads) * uint64_t(p.seq_q);
  b.lse = l.has_lse ? Binding{slots.lse, slots.lse_base + lse_offset, 4, rows_total} : kPlaceholder;
  b.mask = kPlaceholder;
  if (l.mask) {
    const uint64_t msize = mask_type_size(l.mask->type);
    b.mask = Binding{slots.mask, uint64_t(l.mask->offset) * msize, msize, uint64_t(l.mask->required_elements() - l.mask->offset)};
  }
  b.kv_lengths = plan.varlen       ? Binding{slots.kv_lengths, 0, 4, call.batches + 1}
                 : l.has_kv_lengths ? Binding{slots.kv_lengths, slots.kv_lengths_base + kv_offset, 4, uint64_t(p.batch)}
                                    : kPlaceholder;
  // The score modifiers' per-head tensors, whole (a chunk's heads index them from its h0).
  b.per_head = per_head_slot_bindings(slots.per_head, l.per_head());
  if (call.split()) {
    // The workspace slot starts aligned (the runner aligns it up).
    b.partial_o = Binding{slots.workspace, 0, 4, plan.partial_o_bytes / 4};
    b.partial_lse = Binding{slots.workspace, align_up(plan.partial_o_bytes, plan.alignment), 4, plan.partial_lse_bytes / 4};
  }
  if (plan.config.careful_pass()) b.redo = Binding{slots.workspace, plan.redo_offset, 4, plan.redo_bytes / 4};
  if (plan.work_list) b.work_list = Binding{slots.workspace, plan.work_list->offset, 4, plan.work_list->words};
  return b;
}

// Rows readable four elements at a time (the tiled kernel; it checks the binding offsets itself).
bool vec4_rows(const TensorLayout& t) {
  return t.dim % 4 == 0 && t.stride_batch % 4 == 0 && t.stride_head % 4 == 0 && t.stride_seq % 4 == 0;
}

// The kernel's push constants (shader_abi.h); per dispatch, tile_base, splits and split_base.
AttentionPush kernel_push(const ChunkCall& call) {
  const FusedPlan& plan = call.plan;
  const AttentionLayouts& l = call.l;
  const AttentionProblem& p = call.p;
  AttentionPush push{};
  push.seq_q = u32(p.seq_q);
  push.seq_k = u32(p.seq_k);
  push.heads = u32(p.heads);
  push.group = u32(p.group_size());
  push.keys_per_split = plan.keys_per_split;
  push.flags = mask_flags(p.causal, l.mask);
  // (A paged call's key lengths are the cache lengths, which the kernels read as the sequence's keys.)
  if (l.has_kv_lengths && !plan.paged) push.flags |= kFlagKvLengths;
  if (l.has_lse) push.flags |= kFlagWriteLse;
  push.scale = p.scale;
  const TensorLayout &ql = l.q, &kl = l.k, &vl = l.v, &ol = l.out;
  push.q_sb = u32(ql.stride_batch), push.q_sh = u32(ql.stride_head), push.q_ss = u32(ql.stride_seq);
  push.k_sb = u32(kl.stride_batch), push.k_sh = u32(kl.stride_head), push.k_ss = u32(kl.stride_seq);
  push.v_sb = u32(vl.stride_batch), push.v_sh = u32(vl.stride_head), push.v_ss = u32(vl.stride_seq);
  push.o_sb = u32(ol.stride_batch), push.o_sh = u32(ol.stride_head), push.o_ss = u32(ol.stride_seq);
  if (l.mask) mask_strides(*l.mask, push.m_sb, push.m_sh, push.m_ss);
  // A packed tensor's batch stride is never used: the kernels' batch index is then the sequence.
  if (plan.varlen) push.q_sb = push.k_sb = push.v_sb = push.o_sb = 0;
  if (plan.varlen) {  // (no mask: its strides carry the bounds, which cut the rows computed and the keys seen)
    push.m_sb = u32(plan.varlen->max_seq_q);
    push.m_sh = u32(plan.varlen->max_seq_k);
  }
  if (plan.paged) {  // the block table's row stride, the pool's pages, the appended tokens (shader_abi.h)
    push.m_sb = u32(plan.paged->row_stride());
    push.m_sh = u32(plan.paged->num_pages);
    push.m_ss = u32(plan.paged->seq_new);
  }
  if (plan.config.traits().vec4_row_flags) {
    if (vec4_rows(ql)) push.flags |= FLAG_VEC_Q;
    // (q8_0 K and V are read block by block: kv_values.glsl.)
    const bool kv_as_q = p.kv_quant == KvQuant::none;
    if (kv_as_q && vec4_rows(kl)) push.flags |= FLAG_VEC_K;
    if (kv_as_q && vec4_rows(vl)) push.flags |= FLAG_VEC_V;
  }
  // (FLAG_WORK_LIST: emit_chunk, with the list.)
  return push;
}

// The kernel's specialization constants (SPEC_ATTENTION_*) for push flags `flags`.
AttentionConstants kernel_constants(const ContextImpl& c, const ChunkCall& call, uint32_t flags) {
  const FusedPlan& plan = call.plan;
  const KernelConfig& cfg = plan.config;
  const AttentionProblem& p = call.p;
  AttentionConstants k;
  // (The tiled kernel's BR counts one head's query rows.)
  k.rows = cfg.is(FusedKernel::tiled) ? cfg.rows / cfg.heads : cfg.rows;
  k.threads_per_row = cfg.threads_per_row;
  k.keys_per_tile = cfg.keys_per_tile;
  k.dim_qk = u32(p.dim_qk);
  k.dim_v = u32(p.dim_v);
  k.workgroup = cfg.workgroup_size();
  k.mask_kind = cfg.traits().mask_kind_constant ? (flags >> MASK_KIND_SHIFT) & 3u : 0u;
  k.pack_group = cfg.pack_group ? 1u : 0u;
  k.rows_per_thread = cfg.rows_per_thread;
  k.heads = cfg.heads;
  k.vec_loads = cfg.vec_loads ? 1u : 0u;
  k.page_size = plan.paged ? plan.paged->page_size : 0u;
  k.modifiers = modifier_constants(p, call.l.options);
  if (plan.band_splits) k.modifiers.bits() |= MOD_BAND_SPLITS;
  if (call.split()) k.modifiers = split_part_modifiers(k.modifiers);
  k.kv_format = p.kv_quant == KvQuant::q8_0 ? KV_FORMAT_Q8_0 : KV_FORMAT_AS_Q;
  k.varlen = plan.varlen ? 1u : 0u;
  k.page_stride = plan.paged ? plan.paged->page_rows() : 0u;
  k.prefetch_keys = cfg.prefetch_keys;
  // The subgroup kernels' workgroup is one subgroup of cfg.lanes: required where the device can
  // require it (on devices of several sizes the plan depends on it, plan_fit).
  k.required_lanes = cfg.one_subgroup() && c.info.required_subgroup_size ? cfg.lanes : 0u;
  k.partial = call.split() ? 1u : 0u;
  return k;
}

// The kernel's pipelines: its own; the decode form reading element by element, for a call whose
// tensors start off the 16-byte grid (known at replay); the subgroup kernel's careful pass
// (shader_abi.h), its ballots in the workspace.
struct KernelPipelines {
  VkPipeline kernel = VK_NULL_HANDLE, unchunked = VK_NULL_HANDLE, careful = VK_NULL_HANDLE;
};

KernelPipelines kernel_pipelines(ContextImpl& c, const ChunkCall& call, AttentionConstants constants) {
  const KernelConfig& cfg = call.plan.config;
  const DType dtype = call.p.dtype;
  KernelPipelines k;
  k.kernel = c.pipelines->get(attention_pipeline(dtype, cfg.shader(), constants));
  if (cfg.vec_loads) {
    constants.vec_loads = 0;
    k.unchunked = c.pipelines->get(attention_pipeline(dtype, cfg.shader(), constants));
  }
  if (cfg.careful_pass()) {
    constants.careful_pass = 1;
    k.careful = c.pipelines->get(attention_pipeline(dtype, cfg.shader(), constants));
  }
  return k;
}

// The combine of a split call (attention_combine.comp), its push constants but each range's rows.
Dispatch combine_dispatch(ContextImpl& c, const ChunkCall& call, const ChunkBindings& b) {
  Dispatch combine;
  if (!call.split()) return combine;
  const AttentionProblem& p = call.p;
  combine.use(c.pipelines->layout(KernelKind::combine));
  combine.pipeline =
      c.pipelines->get(combine_pipeline(p.dtype, u32(p.dim_v), call.plan.combine_workgroup, modifier_constants(p, call.l.options)));
  combine.bind(COMBINE_PARTIAL_O_BINDING, b.partial_o);
  combine.bind(COMBINE_PARTIAL_LSE_BINDING, b.partial_lse);
  combine.bind(COMBINE_O_BINDING, b.o, offsetof(CombinePush, o_off));
  combine.bind(COMBINE_LSE_BINDING, b.lse, offsetof(CombinePush, lse_off));
  bind_per_head(combine, KernelKind::combine, b.per_head);
  // The work list (WorkListPlan): each sequence's items.
  if (call.plan.work_list) combine.bind(COMBINE_WORK_LIST_BINDING, b.work_list);
  if (call.plan.varlen) combine.bind(COMBINE_CU_SEQLENS_Q_BINDING, b.block_table, offsetof(CombinePush, cu_q_off));
  return combine;
}

CombinePush combine_push(const ChunkCall& call, const AttentionPush& push) {
  const FusedPlan& plan = call.plan;
  CombinePush cpush{};
  cpush.splits = plan.splits;
  cpush.heads = u32(call.p.heads);
  cpush.seq_q = u32(call.p.seq_q);
  cpush.o_sb = push.o_sb, cpush.o_sh = push.o_sh, cpush.o_ss = push.o_ss;
  cpush.write_lse = call.l.has_lse ? 1u : 0u;
  cpush.half_log2_units = plan.config.traits().lse_half_log2 ? 1u : 0u;
  cpush.work_list = plan.work_list ? 1u : 0u;
  // A packed batch's combine finds each row's sequence (work list or not: band splits have none) and
  // leaves the rows past max_seqlen_q, which no kernel computed, unwritten.
  cpush.packed_batches = plan.varlen ? u32(int64_t(call.batches)) : 0u;
  cpush.max_rows = plan.varlen ? u32(plan.varlen->max_seq_q) : 0xffffffffu;
  return cpush;
}

// The dispatch that builds a chunk's work list (attention_work_list.comp) into `words` from its key
// lengths `lengths` (cache_lens, kv_lengths or cu_seqlens_k), between barriers: the list may still
// be read by earlier recorded work (a previous chunk's or call's dispatches, their grid, their
// combines), and the split dispatches read it after, as data and as their grid.
void emit_work_list(ContextImpl& c, CommandList& list, const FusedPlan& plan, const Binding& lengths,
                    const Binding& words, uint32_t batches, uint32_t groups_y) {
  const WorkListPlan& w = *plan.work_list;
  WorkListPush push{};
  push.batches = batches;
  push.capacity = u32(plan.problem.seq_k);
  push.seq_new = plan.paged ? u32(plan.paged->seq_new) : 0u;  // (a dense call's key lengths: as they are)
  push.max_items = w.max_items;
  push.target_items = w.target_items;
  push.min_keys = w.min_keys;
  push.max_keys = plan.keys_per_split;
  push.granule = plan.config.keys_per_tile;
  push.tiles_full = plan.tiles_per_range;
  push.tiles_last = plan.query_tiles - (plan.query_ranges - 1) * plan.tiles_per_range;
  push.groups_y = groups_y;
  push.max_splits = plan.varlen ? plan.splits : 0u;  // (a packed batch's partials: by split)
  // A packed sequence's keys past max_seqlen_k are not seen (the kernels' KEYS_SEEN): no items for them.
  push.max_keys_seen = plan.varlen ? u32(plan.varlen->max_seq_k) : 0xffffffffu;
  Dispatch d;
  d.use(c.pipelines->layout(KernelKind::work_list));
  d.pipeline = c.pipelines->get(work_list_pipeline());
  d.bind(WORK_LIST_LENGTHS_BINDING, lengths, offsetof(WorkListPush, lens_off));
  d.bind(WORK_LIST_WORDS_BINDING, words);
  d.set_push(push);
  constexpr VkAccessFlags read_write = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  list.indirect_barrier(read_write | VK_ACCESS_INDIRECT_COMMAND_READ_BIT, VK_ACCESS_SHADER_WRITE_BIT);
  list.dispatch(d);
  list.indirect_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
}

// The kernel's dispatch with everything but K, V, the push constants and the grid, which change per
// range of query tiles and of splits (emit_range).
Dispatch kernel_dispatch(ContextImpl& c, const ChunkCall& call, const ChunkBindings& b, const KernelPipelines& pipelines) {
  const FusedPlan& plan = call.plan;
  Dispatch d;
  d.pipeline = pipelines.kernel;
  d.use(c.pipelines->layout(KernelKind::attention));
  d.bind(ATTENTION_Q_BINDING, b.q, offsetof(AttentionPush, q_off));
  // A paged call's block table and a packed batch's cu_seqlens_q take the mask's push offset, m_off
  // (a packed batch has no mask; a paged call's is the placeholder).
  if (plan.paged) d.bind(ATTENTION_BLOCK_TABLE_BINDING, b.block_table, offsetof(AttentionPush, m_off));
  if (plan.varlen)
    d.bind(ATTENTION_BLOCK_TABLE_BINDING, b.block_table, offsetof(AttentionPush, m_off));
  else
    d.bind(ATTENTION_MASK_BINDING, b.mask, offsetof(AttentionPush, m_off));
  d.bind(ATTENTION_O_BINDING, b.o, offsetof(AttentionPush, o_off));
  d.bind(ATTENTION_LSE_BINDING, b.lse, offsetof(AttentionPush, lse_off));
  d.bind(ATTENTION_KV_LENGTHS_BINDING, b.kv_lengths, offsetof(AttentionPush, kv_len_off));
  d.bind(ATTENTION_PARTIAL_O_BINDING, b.partial_o);
  d.bind(ATTENTION_PARTIAL_LSE_BINDING, b.partial_lse);
  bind_per_head(d, KernelKind::attention, b.per_head);
  if (plan.config.vec_loads) {
    // (The subgroup kernel reads K and V in chunks; the decode form Q too, and writes O in chunks
    // unsplit: split, it writes the partials, whole chunks in the workspace, and the combine O.)
    const bool decode_form = plan.config.is(FusedKernel::subgroup_decode);
    for (const uint32_t binding : {ATTENTION_Q_BINDING, ATTENTION_K_BINDING, ATTENTION_V_BINDING})
      if (decode_form || binding != ATTENTION_Q_BINDING) d.chunk_mask[binding] = kDecodeChunkBytes - 1u;
    if (decode_form && !call.split()) d.chunk_mask[ATTENTION_O_BINDING] = kDecodeChunkBytes - 1u;
    d.unchunked_pipeline = pipelines.unchunked;
  }
  if (plan.work_list) {  // (groups: the bound; the grid is the list's, of the last range for the last)
    d.bind(WORK_LIST_MASK_BINDING, b.work_list);
    d.indirect_slot = b.work_list.slot;
  }
  // What the kernel writes: the partials when split, else O and LSE (the layout says all of them).
  d.writes &= call.split() ? ~(1u << ATTENTION_O_BINDING | 1u << ATTENTION_LSE_BINDING)
                           : ~(1u << ATTENTION_PARTIAL_O_BINDING | 1u << ATTENTION_PARTIAL_LSE_BINDING);
  return d;
}

// K and V of the dispatch covering splits [s0, s0 + n). A paged cache is bound whole from the chunk's
// first KV head (its layout's offset): any key may be in any page; so are a packed batch's K and V (a
// sequence's keys are anywhere in them), and band splits (each starts at its workgroup's own first
// key). Otherwise they are bound from the range's first key (binding_key in attention_common.glsl),
// so a KV head longer than one binding runs as several dispatches.
void bind_keys(Dispatch& d, const ChunkCall& call, const AttentionSlots& slots, uint32_t s0, uint32_t n) {
  const FusedPlan& plan = call.plan;
  const AttentionProblem& p = call.p;
  const TensorLayout &kl = call.l.k, &vl = call.l.v;
  if (plan.paged) {
    d.bind(ATTENTION_K_BINDING, kv_binding(slots.k, p.dtype, p.kv_quant, kl.offset, plan.paged->k_elements),
           offsetof(AttentionPush, k_off));
    d.bind(ATTENTION_V_BINDING, kv_binding(slots.v, p.dtype, p.kv_quant, vl.offset, plan.paged->v_elements),
           offsetof(AttentionPush, v_off));
    return;
  }
  const int64_t k0 = plan.band_splits || plan.varlen ? 0 : int64_t(s0) * plan.keys_per_split;
  const int64_t nk = plan.band_splits || plan.varlen ? p.seq_k
                                                      : std::min<int64_t>(int64_t(n) * plan.keys_per_split, p.seq_k - k0);
  const auto key_range = [&](uint32_t slot, TensorLayout t) {
    t.offset += k0 * t.stride_seq;
    t.seq = nk;
    return kv_binding(slot, p.dtype, p.kv_quant, t.offset, t.required_elements());
  };
  d.bind(ATTENTION_K_BINDING, key_range(slots.k, kl), offsetof(AttentionPush, k_off));
  d.bind(ATTENTION_V_BINDING, key_range(slots.v, vl), offsetof(AttentionPush, v_off));
}

// Records `d`, or with the careful pass its fast pass and then its careful pass.
void emit_kernel(CommandList& list, Dispatch d, const ChunkBindings& b, VkPipeline careful, bool later_splits) {
  // A dispatch of a later range of splits: its writes (other splits' partials, other keys' O rows:
  // never the same bytes) through the same bindings are ordered after the last's, as the barrier
  // check and synchronization validation, which see bindings, ask.
  if (!careful) {
    if (later_splits) list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);
    list.dispatch(d);
    return;
  }
  // The fast pass writes the ballots, which an earlier careful pass (of this call or of earlier
  // recorded work sharing the workspace) may still be reading; the careful pass reads them and
  // rewrites the rows they name (O and LSE, or the partials) after the fast pass.
  constexpr VkAccessFlags read_write = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  d.bind(ATTENTION_REDO_BINDING, b.redo);
  list.compute_barrier(read_write, VK_ACCESS_SHADER_WRITE_BIT);
  d.reads &= ~(1u << ATTENTION_REDO_BINDING);  // the fast pass writes the ballots, the careful pass reads them
  list.dispatch(d);
  list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, read_write);
  // (The careful pass reads element by element wherever the tensors start: no chunked twin.)
  d.pipeline = careful;
  d.unchunked_pipeline = VK_NULL_HANDLE;
  d.chunk_mask = {};
  d.reads |= 1u << ATTENTION_REDO_BINDING;
  d.writes &= ~(1u << ATTENTION_REDO_BINDING);
  list.dispatch(d);
}

// What emit_range records from: the chunk, its shared dispatches and push constants.
struct ChunkDispatches {
  const ChunkCall& call;
  const AttentionSlots& slots;
  const ChunkBindings& bindings;
  const KernelPipelines& pipelines;
  const Dispatch& kernel;
  AttentionPush push;
  Dispatch combine;
  CombinePush combine_push;
};

// One range of query tiles [t0, t0 + tiles): its split dispatches write the workspace, its combine
// reads it back, and the next range reuses it.
void emit_range(ContextImpl& c, CommandList& list, ChunkDispatches& chunk, uint32_t t0) {
  const ChunkCall& call = chunk.call;
  const FusedPlan& plan = call.plan;
  const uint32_t rows = plan.config.rows;
  const uint32_t tiles = std::min(plan.tiles_per_range, plan.query_tiles - t0);
  const uint64_t row_base = uint64_t(t0) * rows;
  // (A packed batch's one range is every packed row: its tiles count the longest sequence's rows.)
  const uint64_t range_rows = plan.varlen ? uint64_t(call.p.seq_q)
                                          : std::min<uint64_t>(uint64_t(tiles) * rows, uint64_t(call.p.seq_q) - row_base);
  if (call.split()) {
    // The workspace may still be read by the previous range's combine pass, or by an earlier one
    // recorded in this command buffer (write-after-read), and was written by the previous range's
    // split dispatches (write-after-write).
    list.compute_barrier(VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);
  } else if (t0 > 0) {
    // Ranges write disjoint rows of O and LSE, but through the same bindings, and the placeholder
    // buffer sits in both write-only (partial) and read-only (mask, kv_lengths) slots: without
    // this barrier synchronization validation, which sees bindings and not rows, reports hazards
    // (measured: read-after-write on the placeholder). Unsplit ranges exist only past
    // maxComputeWorkGroupCount[0] tiles: one barrier per 65535 or more workgroups.
    list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);
  }
  // One dispatch per range of splits (plan.splits_per_dispatch).
  chunk.push.tile_base = t0;
  for (uint32_t s0 = 0; s0 < plan.splits; s0 += plan.splits_per_dispatch) {
    const uint32_t n = std::min(plan.splits_per_dispatch, plan.splits - s0);
    chunk.push.splits = n;
    chunk.push.split_base = s0;
    Dispatch d = chunk.kernel;
    bind_keys(d, call, chunk.slots, s0, n);
    d.set_push(chunk.push);
    d.groups = {tiles, call.groups_y(), u32(int64_t(call.batches)) * n};
    if (plan.work_list) {
      const bool last = t0 + plan.tiles_per_range >= plan.query_tiles;
      d.indirect_offset = plan.work_list->offset + 4u * (last ? WORK_LIST_LAST_ARGS : WORK_LIST_ARGS);
    }
    emit_kernel(list, d, chunk.bindings, chunk.pipelines.careful, s0 > 0);
  }
  if (!call.split()) return;
  list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT);  // the partials, before the combine
  const uint64_t combine_rows = uint64_t(call.p.batch) * uint64_t(call.p.heads) * range_rows;
  chunk.combine_push.rows = u32(int64_t(combine_rows));
  chunk.combine_push.row_base = u32(int64_t(row_base));
  chunk.combine_push.range_rows = u32(int64_t(range_rows));
  chunk.combine.set_push(chunk.combine_push);
  const uint64_t gx = std::min<uint64_t>(combine_rows, c.info.max_workgroup_count[0]);
  chunk.combine.groups = {u32(int64_t(gx)), u32(int64_t((combine_rows + gx - 1) / gx)), 1};
  list.dispatch(chunk.combine);
}

// The dispatches (and combines) of a chunk, range of query tiles by range (FusedPlan::tiles_per_range).
// `l` are the chunk's layouts (chunk_layouts); its LSE rows and key lengths start at bytes
// `lse_offset` and `kv_offset` of their slots.
void emit_chunk(ContextImpl& c, CommandList& list, const FusedPlan& plan, const AttentionLayouts& l,
                const AttentionSlots& slots, uint64_t lse_offset, uint64_t kv_offset) {
  const ChunkCall call = chunk_call(plan, l);
  const ChunkBindings bindings = chunk_bindings(call, slots, lse_offset, kv_offset);
  AttentionPush push = kernel_push(call);
  const KernelPipelines pipelines = kernel_pipelines(c, call, kernel_constants(c, call, push.flags));
  Dispatch combine = combine_dispatch(c, call, bindings);
  // The work list (WorkListPlan): built from the key lengths before the ranges, read by their split
  // dispatches (their grid, their items) and combines (each sequence's items).
  if (plan.work_list) {
    push.flags |= FLAG_WORK_LIST;
    emit_work_list(c, list, plan, bindings.kv_lengths, bindings.work_list, u32(int64_t(call.batches)), call.groups_y());
  }
  const Dispatch kernel = kernel_dispatch(c, call, bindings, pipelines);
  ChunkDispatches chunk{call, slots, bindings, pipelines, kernel, push, combine, combine_push(call, push)};
  for (uint32_t t0 = 0; t0 < plan.query_tiles; t0 += plan.tiles_per_range) emit_range(c, list, chunk, t0);
}

}  // namespace

void emit_fused_attention(ContextImpl& c, CommandList& list, const FusedPlan& plan, const AttentionLayouts& layouts,
                          const AttentionSlots& slots) {
  const AttentionProblem& p = plan.problem;
  if (plan.varlen || (plan.batch_chunk == p.batch && plan.head_chunk == p.heads)) {
    emit_chunk(c, list, plan, layouts, slots, 0, 0);
    return;
  }
  for (int64_t b0 = 0; b0 < p.batch; b0 += plan.batch_chunk)
    for (int64_t h0 = 0; h0 < p.heads; h0 += plan.head_chunk) {
      const int64_t nb = std::min(plan.batch_chunk, p.batch - b0), nh = std::min(plan.head_chunk, p.heads - h0);
      // Chunks write disjoint rows, but one chunk's dispatch may bind the placeholder where it writes
      // (the partials of an unsplit dispatch) and the next where it reads (no mask): synchronization
      // validation, which sees bindings, asks for a barrier between them.
      if (b0 > 0 || h0 > 0) list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      // Chunks are contiguous rows of the LSE, and whole batches of the key lengths.
      emit_chunk(c, list, plan, chunk_layouts(layouts, p.group_size(), b0, nb, h0, nh), slots,
                 uint64_t(b0 * p.heads + h0) * uint64_t(p.seq_q) * 4, uint64_t(b0) * 4);
    }
}

}  // namespace detail
}  // namespace vkattn
