// What both fused-kernel variants (attention_tiled.comp, attention_rowwise.comp) share: their
// bindings, the start value of the running max and the causal rule. Include after
// storage_types.glsl and attention_push.glsl.
#ifndef VKATTN_ATTENTION_COMMON_GLSL
#define VKATTN_ATTENTION_COMMON_GLSL

layout(binding = ATTENTION_Q_BINDING) readonly buffer QBuf { STORAGE_T q[]; };
layout(binding = ATTENTION_K_BINDING) readonly buffer KBuf { STORAGE_T k[]; };
layout(binding = ATTENTION_V_BINDING) readonly buffer VBuf { STORAGE_T v[]; };
layout(binding = ATTENTION_O_BINDING) writeonly buffer OBuf { STORAGE_T o[]; };
layout(binding = ATTENTION_LSE_BINDING) writeonly buffer LseBuf { float lse[]; };
layout(binding = ATTENTION_MASK_BINDING) readonly buffer MaskBuf { uint mask_words[]; };
layout(binding = WORK_LIST_MASK_BINDING) readonly buffer WorkListBuf { uint work_list[]; };  // (no mask then)
layout(binding = ATTENTION_KV_LENGTHS_BINDING) readonly buffer KvLenBuf { int kv_lengths[]; };
layout(binding = ATTENTION_PARTIAL_O_BINDING) writeonly buffer PartialOBuf { float partial_o[]; };
layout(binding = ATTENTION_PARTIAL_LSE_BINDING) writeonly buffer PartialLseBuf { float partial_lse[]; };  // (max m, sum l) per row
layout(binding = BLOCK_TABLE_BINDING) readonly buffer BlockTableBuf { int block_table[]; };

// Paged K and V (shader_abi.h, "Paged KV caches"): the page size, 0 for dense tensors.
layout(constant_id = SPEC_ATTENTION_PAGE_SIZE) const uint PAGE_SIZE = 0;
layout(constant_id = SPEC_ATTENTION_PAGE_STRIDE) const uint PAGE_STRIDE = 0;
const bool PAGED = PAGE_SIZE != 0u;

// A packed variable-length batch (shader_abi.h, "Packed variable-length batches"): 1, else 0.
layout(constant_id = SPEC_ATTENTION_VARLEN) const uint VARLEN_SPEC = 0;
const bool VARLEN = VARLEN_SPEC != 0u;

// A split call's kernel (shader_abi.h): it writes the per-split partials, not O and LSE.
layout(constant_id = SPEC_ATTENTION_PARTIAL) const uint PARTIAL_SPEC = 0;
const bool PARTIAL = PARTIAL_SPEC != 0u;

// The queries and keys of the workgroup's sequence (begin_sequence sets them first thing in main):
// the call's seq_q and seq_k, a paged sequence's own key count, or a packed sequence's own lengths.
// The causal rule, the window and ALiBi align to them.
uint g_seq_q, g_seq_k;
#define SEQ_Q g_seq_q
#define SEQ_K g_seq_k
// A packed sequence's first rows in Q and O (g_row_q) and in K and V (g_row_k); 0 otherwise.
uint g_row_q, g_row_k;
// The rows of the sequence the kernel computes (ROWS_Q) and the keys it may see (KEYS_SEEN): SEQ_Q
// and SEQ_K, except in a packed batch, whose grid and key splits are sized by max_seqlen_q and
// max_seqlen_k: there a sequence longer than a bound keeps its own lengths for the alignments
// (causal, window, ALiBi) but has only its first max_seqlen_q rows computed (the others are never
// written) and only its first max_seqlen_k keys seen (the others are masked, as key padding would).
uint g_rows_q, g_keys_seen;
#define ROWS_Q g_rows_q
#define KEYS_SEEN g_keys_seen

#include "mask.glsl"
#include "causal.glsl"
#include "score.glsl"
#define MOD_KERNEL MOD_KERNEL_ATTENTION
#include "modifiers.glsl"
#include "kv_values.glsl"
#include "cache_length.glsl"


// Elements d4*4 .. d4*4+3 of a row of Q, K or V (`base` its first element, `dim` its length) as f32;
// zero past the row's end. GLSL cannot pass a buffer, hence the tensor selector.
const uint TENSOR_Q = 0u, TENSOR_K = 1u, TENSOR_V = 2u;
vec4 load_row_vec4(uint tensor, uint base, uint d4, uint dim) {
  vec4 r = vec4(0.0);
  [[unroll]] for (uint c = 0u; c < 4u; ++c) {
    const uint d = d4 * 4u + c;
    if (d < dim) {
      if (tensor == TENSOR_Q) r[c] = to_f32(q[base + d]);
      else if (tensor == TENSOR_K) r[c] = k_value(base + d);
      else r[c] = v_value(base + d);
    }
  }
  return r;
}

// The row of key j in the K and V bindings. A dispatch binds K and V from the first key of its first
// split (split_base), so that a key range longer than one binding can run as several dispatches.
// (Band splits bind K and V whole: their splits do not start at a fixed key.)
uint binding_key(uint j) { return (MODIFIERS & MOD_BAND_SPLITS) != 0u ? j : j - pc.split_base * pc.keys_per_split; }

// The grid's z covers (split, batch) split-major: z = split * batches + b (batches: of this dispatch).
// lavapipe hands each of its threads a contiguous run of the grid's workgroups (x fastest, then y,
// then z): batch-major, one long sequence among short ones put all of its splits on one thread
// (the benchmark notebook (docs/performance.md), issue 14); split-major spreads them over all.
// With FLAG_WORK_LIST (a paged call's split-KV, shader_abi.h "Work lists") z runs an item of the work
// list, which names its sequence and split, and the list's chunk is the keys per split; the items run
// in bit-reversed order of their index in the list, for the same reason.
bool work_listed() { return (pc.flags & FLAG_WORK_LIST) != 0u; }
uint work_item() { return work_list[WORK_LIST_ITEMS + gl_WorkGroupID.z]; }
uint workgroup_batch() { return work_listed() ? work_item() >> 16 : gl_WorkGroupID.z % (gl_NumWorkGroups.z / pc.splits); }
uint workgroup_split() {
  return work_listed() ? work_item() & 0xffffu : pc.split_base + gl_WorkGroupID.z / (gl_NumWorkGroups.z / pc.splits);
}
uint keys_per_split() { return work_listed() ? work_list[WORK_LIST_CHUNK] : pc.keys_per_split; }
// The index in the list of split s of sequence b: its sequence's first item's, plus s.
uint work_item_index(uint b, uint s) { return work_list[work_list[WORK_LIST_OFFSETS] + b] + s; }

// Sets the queries and keys of batch b's sequence (SEQ_Q, SEQ_K, ROWS_Q, KEYS_SEEN) and its first
// packed rows: seq_q and seq_k; for a paged cache, the keys are cache_lens[b] clamped to
// [0, seq_k - seq_new] plus the seq_new tokens appended before the call (seq_k: the table's
// capacity; clamped before the add, so that no length, INT32_MAX included, overflows); for a packed
// batch, rows cu_q[b] .. cu_q[b+1] of Q and cu_k[b] .. cu_k[b+1] of K, clamped into the totals
// (pc.seq_q, pc.seq_k) and each end to at least its start, so that no row outside the tensors is
// ever read or written, and the bounds max_seqlen_q and max_seqlen_k (pc.m_sb and pc.m_sh: a packed
// batch has no mask) cut the rows computed and the keys seen.
void begin_sequence(uint b) {
  g_seq_q = pc.seq_q;
  g_seq_k = pc.seq_k;
  g_row_q = 0u;
  g_row_k = 0u;
  if (PAGED) g_seq_k = clamped_cache_length(kv_lengths[kv_len_offset() + b], pc.seq_k, pc.m_ss) + pc.m_ss;
  g_rows_q = g_seq_q;
  g_keys_seen = g_seq_k;
  if (VARLEN) {
    const int q0 = clamp(block_table[pc.m_off + b], 0, int(pc.seq_q));
    const int q1 = clamp(block_table[pc.m_off + b + 1u], q0, int(pc.seq_q));
    const int k0 = clamp(kv_lengths[kv_len_offset() + b], 0, int(pc.seq_k));
    const int k1 = clamp(kv_lengths[kv_len_offset() + b + 1u], k0, int(pc.seq_k));
    g_row_q = uint(q0);
    g_seq_q = uint(q1 - q0);
    g_row_k = uint(k0);
    g_seq_k = uint(k1 - k0);
    // The grid covers max_seqlen_q rows of each sequence and the splits max_seqlen_k keys: past them,
    // rows would map onto tiles and partials that no workgroup (or another row) owns.
    g_rows_q = min(g_seq_q, pc.m_sb);
    g_keys_seen = min(g_seq_k, pc.m_sh);
  }
}

// The row of the sequence's query i in Q and O (its packed row in a varlen call).
uint query_row(uint i) { return g_row_q + i; }

// The element of the LSE of (batch b, query head h, the sequence's query i): (batch, heads, seq_q),
// or for a packed batch (heads, total_q) by packed row.
uint lse_index(uint b, uint h, uint i) {
  if (VARLEN) return lse_offset() + h * pc.seq_q + g_row_q + i;
  return lse_offset() + (b * pc.heads + h) * pc.seq_q + i;
}

// The row of key j of batch b in the K and V bindings, in units of their seq strides: binding_key(j)
// for dense tensors; the sequence's packed row for a varlen call; for a paged cache, row j % PAGE_SIZE
// of page block_table[b][j / PAGE_SIZE], a page being PAGE_STRIDE rows (the head's offset is the
// caller's: k_sh, v_sh) (an entry outside [0, num_pages) is clamped into it: a bad table reads wrong
// keys, never out of bounds).
uint key_row(uint b, uint j) {
  if (VARLEN) return g_row_k + j;  // K and V are bound whole (the sequence's keys are anywhere)
  if (!PAGED) return binding_key(j);
  const int entry = block_table[pc.m_off + b * pc.m_sb + j / PAGE_SIZE];
  return uint(clamp(entry, 0, int(pc.m_sh) - 1)) * PAGE_STRIDE + j % PAGE_SIZE;
}

// The first query row of this workgroup's tile. A dispatch covers one range of query tiles from
// pc.tile_base (the host cuts seq_q into ranges: the workspace budget and maxComputeWorkGroupCount[0]),
// so the row is global: the causal rule, the mask, Q, O and LSE all use it with the full seq_q.
uint tile_first_row() { return (pc.tile_base + gl_WorkGroupID.x) * BR; }

// The workspace row of the split-KV partial (O, LSE) of global query row i of (split, b, h). The
// workspace holds one range of query tiles only, reused range after range, so the row is
// range-local: [split][batch][head][row of the range]; attention_combine.comp reads the same layout
// (a packed batch's is that of batch 1 over total_q rows).
// The range's last tile may end past seq_q: rows there are never written, and take no slot.
// A work list's partials are [item][head][row of the range] (the item's index in the list, not z).
uint partial_row(uint split, uint b, uint h, uint i) {
  // A packed batch: one range of all rows (the host plans no other), [split][head][packed row].
  if (VARLEN) return (split * pc.heads + h) * pc.seq_q + g_row_q + i;
  const uint range_first = pc.tile_base * BR;
  const uint range_rows = min(gl_NumWorkGroups.x * BR, pc.seq_q - range_first);
  const uint slot = work_listed() ? work_item_index(b, split) : split * (gl_NumWorkGroups.z / pc.splits) + b;
  return (slot * pc.heads + h) * range_rows + (i - range_first);
}

// Keys [begin, end) a workgroup visits (after begin_sequence): its split of the key range, cut by the
// sequence's keys (KEYS_SEEN), by key padding, by the causal limit and the window's right side of its last query
// row, and by the window's left side of its first (key tiles outside every row's band are never
// visited). With MOD_BAND_SPLITS (a window with a left
// side; the host sizes the splits by the band, not seq_k) the splits count from the band's first key,
// so a workgroup's work is its band's, however long the sequence.
uvec2 workgroup_key_range(uint split, uint b, uint first_row, uint last_row) {
  const uint band_begin = HAS_WINDOW ? window_key_begin(first_row) : 0u;
  const uint base = (MODIFIERS & MOD_BAND_SPLITS) != 0u ? band_begin : 0u;
  const uint chunk = keys_per_split();
  const uint begin = max(base + split * chunk, band_begin);
  uint end = min(KEYS_SEEN, base + (split + 1u) * chunk);
  if ((pc.flags & FLAG_KV_LENGTHS) != 0u) end = min(end, uint(clamp(kv_lengths[kv_len_offset() + b], 0, int(pc.seq_k))));
  end = min(end, causal_key_end(pc.flags & CAUSAL_MASK, last_row));
  if (HAS_WINDOW) end = min(end, window_key_end(last_row));
  return uvec2(begin, max(begin, end));
}

// Keys [begin, end) of query row i by causal, the window and the workgroup's range `keys`.
uvec2 row_key_range(uvec2 keys, uint i) {
  const uint begin = HAS_WINDOW ? max(keys.x, window_key_begin(i)) : keys.x;
  uint end = min(keys.y, causal_key_end(pc.flags & CAUSAL_MASK, i));
  if (HAS_WINDOW) end = min(end, window_key_end(i));
  return uvec2(begin, max(begin, end));
}

#endif
