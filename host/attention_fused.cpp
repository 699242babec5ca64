// The fused path's command list (attention_fused.comp, attention_rowwise.comp or attention_subgroup.comp, then the split-KV
// combine pass), and the barriers vkattn's synchronous calls put around recorded work.
#include <algorithm>
#include <string>

#include "attention_plan.hpp"
#include "int_math.hpp"
#include "attention_push.hpp"
#include "attention_record.hpp"
#include "kv_storage.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "vkattn/attention.hpp"

namespace vkattn {
namespace detail {
namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace

namespace {

// The dispatch that builds a chunk's work list (attention_work_list.comp) into `words` from its key
// lengths `lengths` (cache_lens, kv_lengths or cu_seqlens_k), between barriers: the list may still
// be read by earlier recorded work (a previous chunk's or call's dispatches, their grid, their
// combines), and the split dispatches read it after, as data and as their grid.
void emit_work_list(ContextImpl& c, CommandList& list, const LaunchPlan& plan, const Binding& lengths,
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

// The dispatches (and combines) of a chunk, range of query tiles by range. `l` are the chunk's layouts
// (chunk_layouts); its LSE rows and key lengths start at bytes `lse_offset` and `kv_offset` of their slots.
void emit_chunk(ContextImpl& c, CommandList& list, const LaunchPlan& plan, const AttentionLayouts& l,
                const AttentionSlots& slots, uint64_t lse_offset, uint64_t kv_offset) {
  AttentionProblem p = plan.problem;
  p.batch = l.q.batch;
  p.heads = l.q.heads;
  p.kv_heads = l.k.heads;
  const KernelConfig& cfg = plan.config;
  const uint64_t esize = dtype_size(p.dtype), align = plan.alignment;
  const bool split = plan.splits > 1;

  // A tensor's binding starts at its first element (its layout offset), so chunks bind only their part.
  const auto tensor = [&](uint32_t slot, const TensorLayout& t) {
    return Binding{slot, uint64_t(t.offset) * esize, esize, uint64_t(t.required_elements() - t.offset)};
  };
  const Binding q = tensor(slots.q, l.q), o = tensor(slots.out, l.out);
  // A paged cache is bound whole from the chunk's first KV head (its layout's offset): any key may be
  // in any page. The chunk's rows of the block table start at its first batch.
  const std::optional<PagedKeys>& paged = plan.paged;
  const auto cache = [&](uint32_t slot, const TensorLayout& t, int64_t elements) {
    return kv_binding(slot, p.dtype, p.kv_quant, t.offset, elements);
  };
  const auto kv_tensor = [&](uint32_t slot, const TensorLayout& t) {
    return kv_binding(slot, p.dtype, p.kv_quant, t.offset, t.required_elements());
  };
  // A packed variable-length batch (plan.varlen): K and V are bound whole too (a sequence's keys are
  // anywhere in them), cu_seqlens_q where the block table is and cu_seqlens_k where the key lengths
  // are (shader_abi.h); the grid's z counts its sequences, the tensors' batch is 1.
  const std::optional<VarlenRows>& varlen = plan.varlen;
  const uint64_t batches = varlen ? uint64_t(varlen->batch) : uint64_t(p.batch);
  Binding block_table =
      paged ? Binding{slots.block_table, kv_offset * uint64_t(paged->max_pages), 4, uint64_t(p.batch * paged->max_pages)}
            : kPlaceholder;
  if (varlen) block_table = Binding{slots.block_table, 0, 4, batches + 1};
  const uint64_t rows_total = uint64_t(p.batch) * p.heads * p.seq_q;
  const Binding lse = l.has_lse ? Binding{slots.lse, lse_offset, 4, rows_total} : kPlaceholder;
  Binding mask = kPlaceholder;
  if (l.mask) {
    const uint64_t msize = mask_type_size(l.mask->type);
    mask = Binding{slots.mask, uint64_t(l.mask->offset) * msize, msize, uint64_t(l.mask->required_elements() - l.mask->offset)};
  }
  const Binding kv_len = varlen             ? Binding{slots.kv_lengths, 0, 4, batches + 1}
                         : l.has_kv_lengths ? Binding{slots.kv_lengths, kv_offset, 4, uint64_t(p.batch)}
                                            : kPlaceholder;
  // The score modifiers' per-head tensors, whole (a chunk's heads index them from its h0: see below).
  const auto head_values = [](uint32_t slot, const std::optional<HeadValuesLayout>& t) {
    return t ? Binding{slot, uint64_t(t->offset) * 4, 4, uint64_t(t->required_elements() - t->offset)} : kPlaceholder;
  };
  const Binding alibi = head_values(slots.alibi, l.alibi), sinks = head_values(slots.sinks, l.sinks);
  Binding partial_o = kPlaceholder, partial_lse = kPlaceholder;
  if (split) {
    // The workspace slot starts aligned (the runner aligns it up).
    partial_o = Binding{slots.workspace, 0, 4, plan.partial_o_bytes / 4};
    partial_lse = Binding{slots.workspace, align_up(plan.partial_o_bytes, align), 4, plan.partial_lse_bytes / 4};
  }

  AttentionPush push{};
  push.seq_q = u32(p.seq_q);
  push.seq_k = u32(p.seq_k);
  push.heads = u32(p.heads);
  push.group = u32(p.group_size());
  push.keys_per_split = plan.keys_per_split;
  push.flags = mask_flags(p.causal, l.mask);
  // (A paged call's key lengths are the cache lengths, which the kernels read as the sequence's keys.)
  if (l.has_kv_lengths && !paged) push.flags |= kFlagKvLengths;
  if (l.has_lse) push.flags |= kFlagWriteLse;
  // Rows readable four elements at a time (the tiled kernel; it checks the binding offsets itself).
  const auto vec4_rows = [](const TensorLayout& t) {
    return t.dim % 4 == 0 && t.stride_batch % 4 == 0 && t.stride_head % 4 == 0 && t.stride_seq % 4 == 0;
  };
  push.scale = p.scale;
  const TensorLayout &ql = l.q, &kl = l.k, &vl = l.v, &ol = l.out;
  push.q_sb = u32(ql.stride_batch), push.q_sh = u32(ql.stride_head), push.q_ss = u32(ql.stride_seq);
  push.k_sb = u32(kl.stride_batch), push.k_sh = u32(kl.stride_head), push.k_ss = u32(kl.stride_seq);
  push.v_sb = u32(vl.stride_batch), push.v_sh = u32(vl.stride_head), push.v_ss = u32(vl.stride_seq);
  push.o_sb = u32(ol.stride_batch), push.o_sh = u32(ol.stride_head), push.o_ss = u32(ol.stride_seq);
  if (l.mask) mask_strides(*l.mask, push.m_sb, push.m_sh, push.m_ss);
  // A packed tensor's batch stride is never used: the kernels' batch index is then the sequence.
  if (varlen) push.q_sb = push.k_sb = push.v_sb = push.o_sb = 0;
  if (varlen) {  // (no mask: its strides carry the bounds, which cut the rows computed and the keys seen)
    push.m_sb = u32(varlen->max_seq_q);
    push.m_sh = u32(varlen->max_seq_k);
  }
  if (paged) {  // the block table's row stride, the pool's pages, the appended tokens (shader_abi.h)
    push.m_sb = u32(paged->max_pages);
    push.m_sh = u32(paged->num_pages);
    push.m_ss = u32(paged->seq_new);
  }
  const bool tiled = cfg.is(FusedKernel::tiled);
  if (tiled && vec4_rows(ql)) push.flags |= FLAG_VEC_Q;
  // (q8_0 K and V are read block by block: kv_values.glsl.)
  const bool kv_as_q = p.kv_quant == KvQuant::none;
  if (tiled && kv_as_q && vec4_rows(kl)) push.flags |= FLAG_VEC_K;
  if (tiled && kv_as_q && vec4_rows(vl)) push.flags |= FLAG_VEC_V;

  const KernelLayout& layout = c.pipelines->layout(KernelKind::attention);
  AttentionConstants constants{
      // (The tiled kernel's BR counts one head's query rows.)
      tiled ? cfg.rows / cfg.heads : cfg.rows, cfg.threads_per_row, cfg.keys_per_tile, u32(p.dim_qk), u32(p.dim_v),
      cfg.workgroup_size(),
      cfg.one_subgroup() ? (push.flags >> MASK_KIND_SHIFT) & 3u : 0u, cfg.pack_group ? 1u : 0u, cfg.rows_per_thread,
      cfg.heads, cfg.vec_loads ? 1u : 0u, paged ? paged->page_size : 0u, modifier_constants(p, l.options),
      p.kv_quant == KvQuant::q8_0 ? KV_FORMAT_Q8_0 : KV_FORMAT_AS_Q};
  if (plan.band_splits) constants.modifiers.bits |= MOD_BAND_SPLITS;
  constants.varlen = varlen ? 1u : 0u;
  constants.page_stride = paged ? paged->page_rows(p.kv_heads) : 0u;
  constants.prefetch_keys = cfg.prefetch_keys;
  // The subgroup kernels' workgroup is one subgroup of cfg.lanes: required where the device can
  // require it (on devices of several sizes the plan depends on it, plan_fit).
  constants.required_lanes = cfg.one_subgroup() && c.info.required_subgroup_size ? cfg.lanes : 0u;
  // Split, the combine adds the sinks; else the kernel.
  if (split) constants.modifiers.bits &= ~MOD_SINKS;
  constants.partial = split ? 1u : 0u;
  const VkPipeline fused = c.pipelines->get(attention_pipeline(p.dtype, cfg.shader(), constants));
  // The decode form reading Q, K and V in 16-byte chunks: a call whose tensors start off that grid
  // (known at replay) runs the same kernel reading element by element.
  VkPipeline unchunked = VK_NULL_HANDLE;
  if (cfg.vec_loads) {
    constants.vec_loads = 0;
    unchunked = c.pipelines->get(attention_pipeline(p.dtype, cfg.shader(), constants));
  }
  // The subgroup kernel's careful pass (shader_abi.h): its own pipeline, its ballots in the workspace.
  VkPipeline careful = VK_NULL_HANDLE;
  Binding redo = kPlaceholder;
  if (cfg.careful_pass()) {
    constants.careful_pass = 1;
    careful = c.pipelines->get(attention_pipeline(p.dtype, cfg.shader(), constants));
    redo = Binding{slots.workspace, plan.redo_offset, 4, plan.redo_bytes / 4};
  }
  Dispatch combine;
  if (split) {
    combine.use(c.pipelines->layout(KernelKind::combine));
    combine.pipeline =
        c.pipelines->get(combine_pipeline(p.dtype, u32(p.dim_v), plan.combine_workgroup, p.has_sinks ? MOD_SINKS : 0u));
    combine.bind(COMBINE_PARTIAL_O_BINDING, partial_o);
    combine.bind(COMBINE_PARTIAL_LSE_BINDING, partial_lse);
    combine.bind(COMBINE_O_BINDING, o, offsetof(CombinePush, o_off));
    combine.bind(COMBINE_LSE_BINDING, lse, offsetof(CombinePush, lse_off));
    combine.bind(COMBINE_SINKS_BINDING, sinks, offsetof(CombinePush, lse_off) + 2);
  }
  // The work list (WorkListPlan): built from the key lengths before the ranges, read by
  // their split dispatches (their grid, their items) and combines (each sequence's items).
  const std::optional<WorkListPlan>& work_list = plan.work_list;
  Binding work_list_words = kPlaceholder;
  if (work_list) {
    work_list_words = Binding{slots.workspace, work_list->offset, 4, work_list->words};
    push.flags |= FLAG_WORK_LIST;
    if (split) combine.bind(COMBINE_WORK_LIST_BINDING, work_list_words);
    emit_work_list(c, list, plan, kv_len, work_list_words, u32(int64_t(batches)),
                   u32(p.heads) / cfg.heads_per_workgroup(p.group_size()));
  }
  CombinePush cpush{};
  cpush.splits = plan.splits;
  cpush.heads = u32(p.heads);
  cpush.seq_q = u32(p.seq_q);
  cpush.o_sb = push.o_sb, cpush.o_sh = push.o_sh, cpush.o_ss = push.o_ss;
  cpush.write_lse = l.has_lse ? 1u : 0u;
  cpush.half_log2_units = tiled ? 1u : 0u;
  cpush.work_list = work_list ? 1u : 0u;
  // A packed batch's combine finds each row's sequence (work list or not: band splits have none) and
  // leaves the rows past max_seqlen_q, which no kernel computed, unwritten.
  cpush.packed_batches = varlen ? u32(int64_t(batches)) : 0u;
  cpush.max_rows = varlen ? u32(varlen->max_seq_q) : 0xffffffffu;
  if (split && varlen) combine.bind(COMBINE_CU_SEQLENS_Q_BINDING, block_table, offsetof(CombinePush, cu_q_off));

  // One range of query tiles at a time (LaunchPlan::tiles_per_range): its split dispatches write the
  // workspace, its combine reads it back, and the next range reuses it.
  for (uint32_t t0 = 0; t0 < plan.query_tiles; t0 += plan.tiles_per_range) {
    const uint32_t tiles = std::min(plan.tiles_per_range, plan.query_tiles - t0);
    const uint64_t row_base = uint64_t(t0) * cfg.rows;
    // (A packed batch's one range is every packed row: its tiles count the longest sequence's rows.)
    const uint64_t range_rows =
        varlen ? uint64_t(p.seq_q) : std::min<uint64_t>(uint64_t(tiles) * cfg.rows, uint64_t(p.seq_q) - row_base);
    if (split) {
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

    // One dispatch per range of splits; K and V are bound from the range's first key (binding_key in
    // attention_common.glsl), so a KV head longer than one binding runs as several dispatches.
    push.tile_base = t0;
    for (uint32_t s0 = 0; s0 < plan.splits; s0 += plan.splits_per_dispatch) {
      const uint32_t n = std::min(plan.splits_per_dispatch, plan.splits - s0);
      // (Band splits start at each workgroup's own first key, and a paged call's keys are anywhere in
      // its caches: K and V are bound whole.)
      const int64_t k0 = plan.band_splits || paged || varlen ? 0 : int64_t(s0) * plan.keys_per_split;
      const int64_t nk = plan.band_splits || varlen ? p.seq_k
                                                    : std::min<int64_t>(int64_t(n) * plan.keys_per_split, p.seq_k - k0);
      const auto key_range = [&](TensorLayout t) {
        t.offset += k0 * t.stride_seq;
        t.seq = nk;
        return t;
      };
      push.splits = n;
      push.split_base = s0;
      Dispatch d;
      d.pipeline = fused;
      d.use(layout);
      d.bind(ATTENTION_Q_BINDING, q, offsetof(AttentionPush, q_off));
      if (paged) {
        d.bind(ATTENTION_K_BINDING, cache(slots.k, kl, paged->k_elements), offsetof(AttentionPush, k_off));
        d.bind(ATTENTION_V_BINDING, cache(slots.v, vl, paged->v_elements), offsetof(AttentionPush, v_off));
        d.bind(ATTENTION_BLOCK_TABLE_BINDING, block_table, offsetof(AttentionPush, m_off));
      } else {
        d.bind(ATTENTION_K_BINDING, kv_tensor(slots.k, key_range(kl)), offsetof(AttentionPush, k_off));
        d.bind(ATTENTION_V_BINDING, kv_tensor(slots.v, key_range(vl)), offsetof(AttentionPush, v_off));
      }
      d.bind(ATTENTION_O_BINDING, o, offsetof(AttentionPush, o_off));
      d.bind(ATTENTION_LSE_BINDING, lse, offsetof(AttentionPush, lse_off));
      // (A varlen call's m_off is cu_seqlens_q's: it has no mask.)
      if (varlen)
        d.bind(ATTENTION_BLOCK_TABLE_BINDING, block_table, offsetof(AttentionPush, m_off));
      else
        d.bind(ATTENTION_MASK_BINDING, mask, offsetof(AttentionPush, m_off));
      d.bind(ATTENTION_KV_LENGTHS_BINDING, kv_len, offsetof(AttentionPush, kv_len_off));
      d.bind(ATTENTION_PARTIAL_O_BINDING, partial_o);
      d.bind(ATTENTION_PARTIAL_LSE_BINDING, partial_lse);
      d.bind(ATTENTION_ALIBI_BINDING, alibi, offsetof(AttentionPush, kv_len_off) + 2);
      d.bind(ATTENTION_SINKS_BINDING, sinks, offsetof(AttentionPush, lse_off) + 2);
      if (cfg.vec_loads) {
        for (const uint32_t binding : {ATTENTION_Q_BINDING, ATTENTION_K_BINDING, ATTENTION_V_BINDING})
          d.chunk_mask[binding] = kDecodeChunkBytes - 1u;
        // (Split, the kernel writes the partials, whole chunks in the workspace, and the combine O.)
        if (!split) d.chunk_mask[ATTENTION_O_BINDING] = kDecodeChunkBytes - 1u;
        d.unchunked_pipeline = unchunked;
      }
      d.set_push(push);
      d.groups = {tiles, u32(p.heads) / cfg.heads_per_workgroup(p.group_size()), u32(int64_t(batches)) * n};
      if (work_list) {  // (groups: the bound; the grid is the list's, of the last range for the last)
        d.bind(WORK_LIST_MASK_BINDING, work_list_words);
        d.indirect_slot = slots.workspace;
        const bool last = t0 + plan.tiles_per_range >= plan.query_tiles;
        d.indirect_offset = work_list->offset + 4u * (last ? WORK_LIST_LAST_ARGS : WORK_LIST_ARGS);
      }
      // What the kernel writes: the partials when split, else O and LSE (the layout says all of them).
      d.writes &= split ? ~(1u << ATTENTION_O_BINDING | 1u << ATTENTION_LSE_BINDING)
                        : ~(1u << ATTENTION_PARTIAL_O_BINDING | 1u << ATTENTION_PARTIAL_LSE_BINDING);
      // A dispatch of a later range of splits: its writes (other splits' partials, other keys' O rows:
      // never the same bytes) through the same bindings are ordered after the last's, as the barrier
      // check and synchronization validation, which see bindings, ask.
      if (s0 > 0 && !careful) list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);
      if (!careful) {
        list.dispatch(d);
        continue;
      }
      // The fast pass writes the ballots, which an earlier careful pass (of this call or of earlier
      // recorded work sharing the workspace) may still be reading; the careful pass reads them and
      // rewrites the rows they name (O and LSE, or the partials) after the fast pass.
      constexpr VkAccessFlags read_write = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      d.bind(ATTENTION_REDO_BINDING, redo);
      list.compute_barrier(read_write, VK_ACCESS_SHADER_WRITE_BIT);
      d.reads &= ~(1u << ATTENTION_REDO_BINDING);  // the fast pass writes the ballots, the careful pass reads them
      list.dispatch(d);
      list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, read_write);
      d.pipeline = careful;
      d.reads |= 1u << ATTENTION_REDO_BINDING;
      d.writes &= ~(1u << ATTENTION_REDO_BINDING);
      list.dispatch(d);
    }

    if (!split) continue;
    list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT);  // the partials, before the combine

    const uint64_t rows = uint64_t(p.batch) * p.heads * range_rows;
    cpush.rows = u32(int64_t(rows));
    cpush.row_base = u32(int64_t(row_base));
    cpush.range_rows = u32(int64_t(range_rows));
    combine.set_push(cpush);
    const uint64_t gx = std::min<uint64_t>(rows, c.info.max_workgroup_count[0]);
    combine.groups = {u32(int64_t(gx)), u32(int64_t((rows + gx - 1) / gx)), 1};
    list.dispatch(combine);
  }
}

}  // namespace

void emit_fused_attention(ContextImpl& c, CommandList& list, const LaunchPlan& plan, const AttentionLayouts& layouts,
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
