#version 450
// Fused attention for CPU devices (lavapipe/llvmpipe), the subgroup kernel's decode form: for few
// query rows (PACK_GROUP: a GQA group's query heads x a short seq_q, up to 16 rows, in workgroups of
// BR <= 4 of them), written to the JIT rules of docs/devices.md.
//   - One workgroup is one subgroup of LANES invocations, and every invocation holds all BR rows of
//     the workgroup: the lanes split the head dims, not the rows. The lanes form KG = LANES / TPR key
//     groups of TPR lanes (the host makes TPR the power of two that covers the head dim in chunks, at
//     most LANES: 16 on a GPU's 32 lanes at d128 f16, so that half the lanes do not idle); group g
//     takes keys g, g + KG, ... of each iteration, keeps its own running max, sum and accumulators,
//     and the groups are merged once after the key loops. Lane `dim_lane()` of a group owns the
//     16-byte chunks d, d + TPR, d + 2 TPR, ... of each row of Q, K, V and O (a chunk is E = 4 f32 or
//     8 f16/bf16 elements), so one K or V load fetches 16 consecutive bytes per lane. On lavapipe
//     every load whose address is not constant runs lane by lane, each lane's share a few scalar
//     loads behind a bounds check: a 16-byte load costs little more than a 2-byte one, and
//     attention_subgroup.comp's one element per lane and load made the loads its bound (about 8x
//     as many lane-by-lane loads per key; the benchmark notebook (docs/performance.md)).
//   - Per iteration of the key loop, BC keys (KB per group): each lane forms the partial dot
//     products of its dims with every row, a butterfly of subgroupShuffleXor sums them over the
//     group's lanes (every lane of the group gets its keys' scores), the online softmax runs on those
//     (the same values in every lane of a group), and each lane adds weight x V over its own dims. No
//     shuffle of K or V, no shared memory, no barrier.
//   - VEC (a specialization constant) = the dims and strides of Q, K, V and (unsplit) O are
//     multiples of E (the planner) and each tensor starts on a chunk of its binding (replay,
//     runtime/command_list.cpp, binds the VEC = 0 pipeline where one does not): chunks are read (and O
//     and the split partials written) as one vec4 / uvec4, an alias of the same binding; with
//     VEC = 0 element by element.
//     Two pipelines, not a run-time branch: llvmpipe runs both sides of every `if`, so the key loop
//     would pay for both reads.
//   - PREFETCH (a paged cache, a packed batch or BSHD K/V on a CPU device): each iteration loads a word
//     of each line of the K and V rows PREFETCH keys ahead and keeps nothing of them, a software
//     prefetch (touch_rows, below).
//   - q8_0 K and V at DQK = DV = 16 LANES (d128 on lavapipe's 8 lanes): each lane reads half a block
//     of a key row from two 16-byte words (Q8_HALVES, below), loaded for two keys at a time with
//     three loads a lane, the two lanes of a block sharing the word their halves have in common.
//   - As in attention_subgroup.comp: every private array is indexed only in [[unroll]] loops; the key
//     loop is a real loop; nothing rare sits in it: a visible key whose dot is not finite marks the
//     workgroup, and so does an accumulator that is not finite after the loop (V is used as read, so
//     NaN or Inf in V, a masked key's included, shows there: one test per element and workgroup
//     instead of one per element and key); such a workgroup redoes its whole key range in a second
//     loop, one key per iteration, by the score rule (score.glsl) and with V selected away for
//     masked keys. Both loops are counted against lavapipe's loop limit by runtime/attention_plan.cpp
//     (fused_loop_iterations): keep the two in step.
//
// Semantics, bindings, push constants, the packed rows (PACK_GROUP) and the split-KV partial output
// are those of attention_subgroup.comp.

#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_vote : enable
#include "storage_types.glsl"
#include "attention_push.glsl"

layout(constant_id = SPEC_ATTENTION_BR) const uint BR = 4;     // query rows per workgroup, all in every lane
layout(constant_id = SPEC_ATTENTION_TPR) const uint TPR = 8;   // lanes per key: a power of two dividing LANES
layout(constant_id = SPEC_ATTENTION_BC) const uint BC = 2;     // keys per iteration of the key loop (all groups)
layout(constant_id = SPEC_ATTENTION_DQK) const uint DQK = 128;
layout(constant_id = SPEC_ATTENTION_DV) const uint DV = 128;
layout(local_size_x_id = SPEC_ATTENTION_WORKGROUP) in;        // LANES: the device's subgroup size
layout(constant_id = SPEC_ATTENTION_MASK_KIND) const uint MASK_KIND = MASK_NONE;
layout(constant_id = SPEC_ATTENTION_PACK_GROUP) const uint PACK_GROUP = 1;
layout(constant_id = SPEC_ATTENTION_VEC) const uint VEC_LOADS = 0;
layout(constant_id = SPEC_ATTENTION_PREFETCH) const uint PREFETCH = 0;  // keys ahead to touch; 0 = none
const bool PACKED = PACK_GROUP != 0u;
const bool VEC = VEC_LOADS != 0u;

const uint LANES = gl_WorkGroupSize.x;
const uint KG = LANES / TPR;  // key groups
const uint KB = BC / KG;      // keys per iteration of each group

#include "attention_common.glsl"
#include "score.glsl"

#include "row_chunks.glsl"
// VEC: O and the split partials are written a chunk at a time too (the plan's chunk rule covers O;
// the partials' rows are DV floats, a multiple of E). One 16-byte store per chunk instead of E
// element stores: on lavapipe each store runs lane by lane, and a kernel's stores are a large part
// of its JIT time (the benchmark notebook (docs/performance.md), "d256 decode's first dispatch").
layout(binding = ATTENTION_PARTIAL_O_BINDING) writeonly buffer PartialOVecs { vec4 partial_o_vecs[]; };

const uint NQ = (DQK + E * TPR - 1u) / (E * TPR);  // chunks per lane of a Q or K row
const uint NV = (DV + E * TPR - 1u) / (E * TPR);   // of a V or O row
const uint QW = NQ * E, VW = NV * E;                   // elements per lane of a Q/K row, of a V/O row

bool finite(float x) { return !(isnan(x) || isinf(x)); }

// Elements c*E .. c*E + E - 1 of the row of `dim` elements that starts at element `base` of tensor
// `t` (TENSOR_Q, _K or _V), as f32; 0 past the row's end (a chunk index past it reads the row's last
// chunk, so that every read stays in the binding).
// (q8_0 K and V: a chunk is E elements of one block, never VEC: see kv_values.glsl.)
Q8_0_RUN(k_words, pc.k_off, E)
Q8_0_RUN(v_words, pc.v_off, E)

// q8_0 K and V in the fast loop (Q8_HALVES): lane `lane` reads half lane % 2 of block lane / 2 of a
// key row, its 16 values from two 16-byte words (kv_values.glsl's Q8_0_HALF), the scale shared by
// the two lanes of a block with a shuffle: at most as many loads per key as f16's chunks (three
// for every four, keys taken in pairs: q8_half_rows_*), for 0.53x the bytes, where the chunk
// reader above needs a scale word and two or three words per 8 values. A lane
// then owns dims 16 lane .. 16 lane + 15 of Q, K, V and O (its chunks lane * NQ + n, lane_chunk),
// so the whole row is the subgroup's 16 * LANES dims (one key group), one key per step: as many values per lane as
// the f16 form holds (lavapipe's JIT time grows fast with them). Other shapes read by chunks.
// (Products, not &&: glslang turns a chain of && over specialization constants into phis.)
const uint Q8_HALVES_FIT = (DQK == DV ? 1u : 0u) * (DQK == 16u * LANES ? 1u : 0u);
const bool Q8_HALVES = KV_Q8_0 ? Q8_HALVES_FIT != 0u : false;
layout(binding = ATTENTION_K_BINDING) readonly buffer KVecs { uvec4 k_vecs[]; };
layout(binding = ATTENTION_V_BINDING) readonly buffer VVecs { uvec4 v_vecs[]; };
Q8_0_HALF(k_vecs, k_words, pc.k_off)
Q8_0_HALF(v_vecs, v_words, pc.v_off)

// This lane's place in its key group (its dims), and its key group.
uint dim_lane() { return gl_SubgroupInvocationID % TPR; }
uint key_group() { return gl_SubgroupInvocationID / TPR; }

// The chunk (E elements) of a row that is this lane's n-th of `per_lane`: interleaved across the
// group's lanes (d, d + TPR, ...: each load instruction covers 16 TPR consecutive bytes of a row),
// or with Q8_HALVES this lane's consecutive ones.
uint lane_chunk(uint n, uint per_lane) { return Q8_HALVES ? dim_lane() * per_lane + n : n * TPR + dim_lane(); }

// The block of key row `row` (its first element: a multiple of 32) whose half this lane reads, and
// which half.
uint lane_block(uint row) { return row / 32u + dim_lane() / 2u; }
uint lane_half() { return dim_lane() & 1u; }

// A block's scale, as the lane of its half 0 read it: the half 1 lane takes its partner's.
float block_scale(float d) {
  const float partner = subgroupShuffleXor(d, 1u);
  return lane_half() != 0u ? partner : d;
}

// Key row `row` of q8_0 K or V, this lane's half block: its 16 q bytes as four words and the block's
// scale (the lanes of a block share the one half 0 read). The callers convert each byte where they
// use it and apply the scale once per row (to a partial dot, or to the weight), not to each value:
// on lavapipe every operation of the key loop counts, and so do the values live at once (converting
// all 16 first measured slower: the benchmark notebook (docs/performance.md), "q8_0 decode: a cheaper realignment").
#define Q8_HALF_ROW(vecs)                                                                          \
  void q8_half_row_##vecs(uint row, out uint qw[4], out float d) {                                 \
    q8_0_half_words_##vecs(lane_block(row), lane_half(), qw, d);                                   \
    d = block_scale(d);                                                                            \
  }
Q8_HALF_ROW(k_vecs)
Q8_HALF_ROW(v_vecs)

// Two key rows at once (the fast loop's keys in pairs): three 16-byte loads a lane instead of four.
// The two lanes of a block read words u, u + 1 (half 0) and u + 1, u + 2 (half 1): each lane loads
// its first word of both rows, and a third load brings half 1's last word, of the first row to the
// half 1 lane and of the second row to the half 0 lane for its partner; the rest comes from the
// partner by shuffles. On lavapipe a load runs lane by lane and costs more than the shuffles.
#define Q8_HALF_ROWS(vecs)                                                                         \
  void q8_half_rows_##vecs(uint row0, uint row1, out uint qw0[4], out float d0, out uint qw1[4], out float d1) { \
    const uint block0 = lane_block(row0), block1 = lane_block(row1), last = q8_0_last_vec_##vecs(); \
    const uint u0 = q8_0_half_vec_##vecs(block0, lane_half()), u1 = q8_0_half_vec_##vecs(block1, lane_half()); \
    const bool half1 = lane_half() != 0u;                                                         \
    const uvec4 a0 = vecs[min(u0, last)], a1 = vecs[min(u1, last)];                               \
    const uvec4 c = vecs[min(half1 ? u0 + 1u : u1 + 2u, last)];                                   \
    const uvec4 s0 = subgroupShuffleXor(a0, 1u), s1 = subgroupShuffleXor(a1, 1u), sc = subgroupShuffleXor(c, 1u); \
    q8_0_realign(a0, half1 ? c : s0, q8_0_half_m_##vecs(block0), qw0, d0);                        \
    q8_0_realign(a1, half1 ? sc : s1, q8_0_half_m_##vecs(block1), qw1, d1);                       \
    d0 = block_scale(d0), d1 = block_scale(d1);                                                    \
  }
Q8_HALF_ROWS(k_vecs)
Q8_HALF_ROWS(v_vecs)

// The half blocks of the KB rows rows_[c] (from element base_, row stride stride_) into qw_ (four
// words a row) and d_ (a scale a row): in pairs, and the last alone when KB is odd.
#define Q8_HALF_ROWS_ALL(vecs, base_, stride_, rows_, qw_, d_)                                     \
  [[unroll]] for (uint c_ = 0u; c_ < KB; c_ += 2u) {                                              \
    uint w0_[4], w1_[4];                                                                           \
    float e0_, e1_ = 0.0;                                                                          \
    if (c_ + 1u < KB)                                                                              \
      q8_half_rows_##vecs(base_ + rows_[c_] * stride_, base_ + rows_[c_ + 1u] * stride_, w0_, e0_, w1_, e1_); \
    else                                                                                           \
      q8_half_row_##vecs(base_ + rows_[c_] * stride_, w0_, e0_);                                  \
    [[unroll]] for (uint i_ = 0u; i_ < 4u; ++i_) qw_[4u * c_ + i_] = w0_[i_];                      \
    d_[c_] = e0_;                                                                                  \
    if (c_ + 1u < KB) {                                                                            \
      [[unroll]] for (uint i_ = 0u; i_ < 4u; ++i_) qw_[4u * (c_ + 1u) + i_] = w1_[i_];             \
      d_[c_ + 1u] = e1_;                                                                           \
    }                                                                                              \
  }

// Touching rows ahead (PREFETCH > 0; the plan sets it for a paged cache, a packed batch or BSHD K/V
// on a CPU device): each iteration loads one word of each 64-byte line of the K and V rows of the keys
// PREFETCH keys ahead (of evenly spaced lines where a row has more lines than half the lanes), half
// the lanes K's, half V's, and keeps nothing of them. GLSL has no prefetch; these loads do what
// one would: in nhd pages, packed and BSHD K/V a head's rows are far apart (kv_heads x dim elements), so
// the CPU's prefetchers never learn them, and without this every row was a demand miss (a TLB walk,
// then memory) in the middle of the key loop, K's and V's apart; here all of a row's lines miss
// together, ahead. On lavapipe 107 -> 52 ms on issue 14's decode batch (the benchmark notebook (docs/performance.md)).
// A row's 16-byte words, and the word that holds element e0 of a binding whose push offset is `off`.
const uint K_ROW_VECS = KV_Q8_0 ? (DQK / 32u * 34u + 15u) / 16u : (DQK + E - 1u) / E;
const uint V_ROW_VECS = KV_Q8_0 ? (DV / 32u * 34u + 15u) / 16u : (DV + E - 1u) / E;
uint row_vec(uint e0, uint off) { return KV_Q8_0 ? q8_0_block_byte(off, e0 >> 5u) >> 4u : e0 / E; }
uint touch_rows(uint krow, uint vrow) {
  const uint half_lanes = max(LANES / 2u, 1u), lane = gl_SubgroupInvocationID, i = lane % half_lanes;
  // (Lengths of the word views: see kv_values.glsl on lavapipe's lengths of 16-byte views.)
  if (lane < half_lanes) {
    const uint step = max(4u, (K_ROW_VECS + half_lanes - 1u) / half_lanes);
    const uint w = row_vec(krow, pc.k_off) + min(i * step, K_ROW_VECS - 1u);
    return k_words[4u * min(w, (uint(k_words.length()) >> 2u) - 1u)];
  }
  const uint step = max(4u, (V_ROW_VECS + half_lanes - 1u) / half_lanes);
  const uint w = row_vec(vrow, pc.v_off) + min(i * step, V_ROW_VECS - 1u);
  return v_words[4u * min(w, (uint(v_words.length()) >> 2u) - 1u)];
}

// A paged cache: the row of the first key of the page that holds key j, read from the block table
// only when that page is not the one cached in (page_key, page_row), so that a loop reads the table
// once per page, not once per key (on lavapipe every load costs, this one as much as a key's 16-byte
// chunk).
uint page_start_row(uint b, uint j, inout uint page_key, inout uint page_row) {
  const uint first = j - j % PAGE_SIZE;
  if (first != page_key) {
    page_key = first;
    page_row = key_row(b, first);
  }
  return page_row;
}

void load_chunk(uint t, uint base, uint c, uint dim, out float x[E]) {
  if (KV_Q8_0 && t != TENSOR_Q) {
    // dim is a multiple of 32, so of E: the row's chunks are whole blocks' parts and in it.
    const uint e0 = base + min(c, dim / E - 1u) * E;
    if (t == TENSOR_K) q8_0_run_k_words_E(e0, x);
    else q8_0_run_v_words_E(e0, x);
    [[unroll]] for (uint e = 0u; e < E; ++e) x[e] = c * E < dim ? x[e] : 0.0;
  } else if (VEC) {
    // dim is a multiple of E and base of a chunk: the row's chunks are whole and in it.
    const uint i = base / E + min(c, dim / E - 1u);
    CHUNK_T w;
    if (t == TENSOR_Q) w = q_chunks[i];
    else if (t == TENSOR_K) w = k_chunks[i];
    else w = v_chunks[i];
    unpack_chunk(w, x);
    [[unroll]] for (uint e = 0u; e < E; ++e) x[e] = c * E < dim ? x[e] : 0.0;
  } else {
    [[unroll]] for (uint e = 0u; e < E; ++e) {
      const uint d = c * E + e, i = base + min(d, dim - 1u);
      float y;
      if (t == TENSOR_Q) y = to_f32(q[i]);
      else if (t == TENSOR_K) y = k_value(i);
      else y = v_value(i);
      x[e] = d < dim ? y : 0.0;
    }
  }
}

// The sum over a key group's lanes, in each of them: a butterfly of shuffles (TPR a power of two;
// written out under constant conditions, not as a loop, so lavapipe counts no iteration).
#define LANE_SUM(x)                                                    \
  [[unroll]] for (uint s_ = 0u; s_ < 7u; ++s_)                         \
    if ((1u << s_) < TPR) x += subgroupShuffleXor(x, 1u << s_);

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint g = key_group();
  const uint b = workgroup_batch();
  begin_sequence(b);
  const uint split = workgroup_split();
  const uint kvh = PACKED ? gl_WorkGroupID.y : gl_WorkGroupID.y / pc.group;
  const uint i0 = tile_first_row();  // the first (packed) row of the tile
  // Packed, row r is query row r % ROWS_Q of the group's head r / ROWS_Q: ROWS_Q (the rows computed:
  // in a packed batch its sequence's queries cut to max_seqlen_q, the rows per head the grid covers),
  // not the sequence's length, or a longer sequence's later heads would fall past the grid's tiles.
  const uint tile_rows = PACKED ? pc.group * ROWS_Q : ROWS_Q;
  // A packed sequence shorter than the grid's tiles (sized by the longest): this tile has no row.
  if (VARLEN && i0 >= tile_rows) return;

  // The key range is cut by the causal limit and the window's right side of the tile's largest query
  // row and the window's left side of its smallest: with packed heads, the last and first rows unless
  // the tile spans more than one head (then seq_q - 1 and 0).
  const uint last = min(i0 + BR, tile_rows) - 1u;
  const bool spans_heads = PACKED && i0 / ROWS_Q != last / ROWS_Q;
  const uint last_row = !PACKED ? last : spans_heads ? ROWS_Q - 1u : last % ROWS_Q;
  const uint first_row = !PACKED ? i0 : spans_heads ? 0u : i0 % ROWS_Q;
  const uvec2 keys = workgroup_key_range(split, b, first_row, last_row);
  const uint key_begin = keys.x, key_end = keys.y;

  // Row r of the workgroup is (packed) row i0 + r: query row row[r] of query head head[r], which sees
  // keys [row_key_begin[r], row_key_end[r]) of the workgroup's (causal, window; without a window
  // every row starts at key_begin, and only the end is compared). Rows past the tile's last read that
  // one, see no key and are never written.
  uint row[BR], head[BR], row_key_begin[BR], row_key_end[BR], mask_row[BR];
  bool row_valid[BR];
  float slope[BR];  // ALiBi's slope of the row's head (unused without ALiBi)
  [[unroll]] for (uint r = 0u; r < BR; ++r) {
    const uint packed = i0 + r;
    row_valid[r] = packed < tile_rows;
    const uint pr = min(packed, tile_rows - 1u);
    head[r] = PACKED ? kvh * pc.group + pr / ROWS_Q : gl_WorkGroupID.y;
    row[r] = PACKED ? pr % ROWS_Q : pr;
    const uvec2 rk = row_key_range(keys, row[r]);
    row_key_begin[r] = rk.x;
    row_key_end[r] = row_valid[r] ? rk.y : 0u;
    mask_row[r] = pc.m_off + b * pc.m_sb + head[r] * pc.m_sh + row[r] * pc.m_ss;
    slope[r] = HAS_ALIBI ? alibi_slope(b, head[r]) : 0.0;
  }

  // Q: this lane's chunks of every row (zeros past the dim).
  float qr[BR * QW];
  [[unroll]] for (uint r = 0u; r < BR; ++r) {
    const uint base = pc.q_off + b * pc.q_sb + head[r] * pc.q_sh + query_row(row[r]) * pc.q_ss;
    [[unroll]] for (uint n = 0u; n < NQ; ++n) {
      float x[E];
      load_chunk(TENSOR_Q, base, lane_chunk(n, NQ), DQK, x);
      [[unroll]] for (uint e = 0u; e < E; ++e) qr[r * QW + n * E + e] = x[e];
    }
  }

  const uint k_head = kv_element_base(pc.k_off) + b * pc.k_sb + kvh * pc.k_sh;
  const uint v_head = kv_element_base(pc.v_off) + b * pc.v_sb + kvh * pc.v_sh;
  const bool has_mask = MASK_KIND != MASK_NONE;

  float m[BR], l[BR];
  float acc[BR * VW];
  [[unroll]] for (uint r = 0u; r < BR; ++r) m[r] = M_INIT, l[r] = 0.0;
  [[unroll]] for (uint e = 0u; e < BR * VW; ++e) acc[e] = 0.0;
  // A visible key with a non-finite dot (the same in every lane) or a non-finite V element in this
  // lane's dims: the workgroup redoes its rows.
  bool careful = false;
  // Q8_HALVES: the fast loop stops at the first iteration whose half blocks reach past their
  // binding's whole 16-byte words (the last rows of a binding, at most); the careful loop goes on
  // from there, one key at a time with the word reader.
  uint fast_end = key_end;
  // A paged cache: the first key and row of the page the last iteration read (page_start_row).
  uint page_key = 0xffffffffu, page_row = 0u;
  // PREFETCH: the words the touching loads read, xor-ed (kept only so that the loads stay), and the
  // first key and row of the page they last looked up.
  uint touched = 0u, touch_page_key = 0xffffffffu, touch_page_row = 0u;

  // ---- The fast loop: BC keys per iteration, key j0 + c KG + g the group's c-th (the groups read
  // neighbouring rows at once) ----
  [[dont_unroll]] for (uint j0 = key_begin; j0 < key_end; j0 += BC) {
    // Partial dots over this lane's dims, then summed over the group's lanes. Keys past key_end read
    // key_end - 1 (in the binding) and are masked below.
    float dots[BR * KB];
    uint rows[KB];  // the keys' rows in K and V (looked up once: a paged cache reads its block table)
    [[unroll]] for (uint e = 0u; e < BR * KB; ++e) dots[e] = 0.0;
    // The iteration's keys all in one page (rows consecutive there): that page's row, looked up when the
    // page changes; else (a page edge inside the iteration, or the last keys) one lookup per key.
    const uint in_page = PAGED ? j0 % PAGE_SIZE : 0u;
    if (PAGED && in_page + BC <= PAGE_SIZE && j0 + BC <= key_end) {
      const uint first_row = page_start_row(b, j0, page_key, page_row);
      [[unroll]] for (uint c = 0u; c < KB; ++c) rows[c] = first_row + in_page + c * KG + g;
    } else {
      [[unroll]] for (uint c = 0u; c < KB; ++c) rows[c] = key_row(b, min(j0 + c * KG + g, key_end - 1u));
    }
    // Touch the rows of keys j0 + PREFETCH .. + BC - 1 (their page looked up once per page, as above;
    // near a page's end the keys past it touch its last row instead, and near key_end key_end - 1's).
    if (PREFETCH > 0u) {
      const uint a = min(j0 + PREFETCH, key_end - 1u), a_in = PAGED ? a % PAGE_SIZE : 0u;
      const uint touch_first_row = PAGED ? page_start_row(b, a, touch_page_key, touch_page_row) : 0u;
      [[unroll]] for (uint c = 0u; c < BC; ++c) {
        const uint r = PAGED ? touch_first_row + min(a_in + c, PAGE_SIZE - 1u) : key_row(b, min(a + c, key_end - 1u));
        touched ^= touch_rows(k_head + r * pc.k_ss, v_head + r * pc.v_ss);
      }
    }
    if (Q8_HALVES) {
      bool fits = true;
      [[unroll]] for (uint c = 0u; c < KB; ++c)
        fits = fits && q8_0_half_fits_k_vecs(lane_block(k_head + rows[c] * pc.k_ss), lane_half()) &&
               q8_0_half_fits_v_vecs(lane_block(v_head + rows[c] * pc.v_ss), lane_half());
      if (subgroupAny(!fits)) {
        fast_end = j0;
        break;
      }
    }
    uint kqw[4u * KB];  // Q8_HALVES: the keys' half blocks (four words each) and scales
    float kd[KB];
    if (Q8_HALVES) { Q8_HALF_ROWS_ALL(k_vecs, k_head, pc.k_ss, rows, kqw, kd) }
    [[unroll]] for (uint c = 0u; c < KB; ++c) {
      const uint krow = k_head + rows[c] * pc.k_ss;
      if (Q8_HALVES) {
        float part[BR];
        [[unroll]] for (uint r = 0u; r < BR; ++r) part[r] = 0.0;
        [[unroll]] for (uint i = 0u; i < 4u; ++i)
          [[unroll]] for (uint k = 0u; k < 4u; ++k) {
            const float xk = int8_of_word(kqw[4u * c + i], k);
            [[unroll]] for (uint r = 0u; r < BR; ++r) part[r] = fma(qr[r * QW + 4u * i + k], xk, part[r]);
          }
        [[unroll]] for (uint r = 0u; r < BR; ++r) dots[r * KB + c] = fma(part[r], kd[c], dots[r * KB + c]);
      }
      [[unroll]] for (uint n = 0u; n < (Q8_HALVES ? 0u : NQ); ++n) {
        float x[E];
        load_chunk(TENSOR_K, krow, lane_chunk(n, NQ), DQK, x);
        [[unroll]] for (uint r = 0u; r < BR; ++r) {
          float part = dots[r * KB + c];
          [[unroll]] for (uint e = 0u; e < E; ++e) part = fma(qr[r * QW + n * E + e], x[e], part);
          dots[r * KB + c] = part;
        }
      }
    }
    [[unroll]] for (uint e = 0u; e < BR * KB; ++e) { LANE_SUM(dots[e]) }

    // Scores with the masks; the online softmax over the group's KB keys (the same in each lane of
    // the group).
    float p[BR * KB];
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
      float s[KB];
      bool vis[KB];
      float tile_max = M_INIT;
      [[unroll]] for (uint c = 0u; c < KB; ++c) {
        const uint j = j0 + c * KG + g;
        const float dot_qk = dots[r * KB + c];
        bool in_range = j < row_key_end[r];
        if (HAS_WINDOW) in_range = in_range && j >= row_key_begin[r];
        float bias = 0.0;
        if (has_mask) bias = mask_bias(MASK_KIND, in_range ? mask_row[r] + j : pc.m_off);
        vis[c] = in_range && bias != NEG_INF;
        careful = careful || (vis[c] && !finite(dot_qk));
        const float sc = modify_score(scale_dot(dot_qk, pc.scale), slope[r], row[r], j);
        s[c] = vis[c] ? add_bias(sc, bias) : NEG_INF;
        tile_max = max(tile_max, s[c]);
      }
      const float m_new = max(m[r], tile_max);
      const float alpha = exp(m[r] - m_new);
      l[r] *= alpha;
      [[unroll]] for (uint c = 0u; c < KB; ++c) {
        p[r * KB + c] = vis[c] ? exp(s[c] - m_new) : 0.0;
        l[r] += p[r * KB + c];
      }
      m[r] = m_new;
      [[unroll]] for (uint e = 0u; e < VW; ++e) acc[r * VW + e] *= alpha;
    }

    // O += P V over this lane's dims. V is used as read: a NaN or Inf in it, masked key or not
    // (p = 0 times NaN is NaN), leaves a non-finite accumulator, found after the loop.
    uint vqw[4u * KB];  // Q8_HALVES: as kqw, of V
    float vd[KB];
    if (Q8_HALVES) { Q8_HALF_ROWS_ALL(v_vecs, v_head, pc.v_ss, rows, vqw, vd) }
    [[unroll]] for (uint c = 0u; c < KB; ++c) {
      const uint vrow = v_head + rows[c] * pc.v_ss;
      if (Q8_HALVES) {
        float pd[BR];  // the weights, scaled (a NaN or Inf scale still reaches the accumulator)
        [[unroll]] for (uint r = 0u; r < BR; ++r) pd[r] = p[r * KB + c] * vd[c];
        [[unroll]] for (uint i = 0u; i < 4u; ++i)
          [[unroll]] for (uint k = 0u; k < 4u; ++k) {
            const float xv = int8_of_word(vqw[4u * c + i], k);
            [[unroll]] for (uint r = 0u; r < BR; ++r) {
              const uint a = r * VW + 4u * i + k;
              acc[a] = fma(pd[r], xv, acc[a]);
            }
          }
      }
      [[unroll]] for (uint n = 0u; n < (Q8_HALVES ? 0u : NV); ++n) {
        float x[E];
        load_chunk(TENSOR_V, vrow, lane_chunk(n, NV), DV, x);
        [[unroll]] for (uint r = 0u; r < BR; ++r)
          [[unroll]] for (uint e = 0u; e < E; ++e)
            acc[r * VW + n * E + e] = fma(p[r * KB + c], x[e], acc[r * VW + n * E + e]);
      }
    }
  }
  // (Never true: a dispatched call has query rows. The compiler cannot know it, so the touching loads
  // stay; and were it true, the careful loop computes the same outputs.)
  careful = careful || (touched == 0xffffffffu && pc.seq_q == 0u);
  // A non-finite accumulator: a NaN or Inf in V (of a visible key or a masked one), or a sum that
  // overflowed; the careful loop sorts them out (one test per element, not one per key and element).
  [[unroll]] for (uint e = 0u; e < BR * VW; ++e) careful = careful || !finite(acc[e]);

  // ---- The careful loop: the whole key range again, one key per group and iteration, for
  // workgroups that met a visible key with a non-finite dot (overflow, or NaN/Inf in Q or K) or
  // NaN/Inf in V; else only the keys the fast loop left (Q8_HALVES: from fast_end, the last rows of
  // a binding). Scores follow score.glsl (recomputed with scaled-down operands when the dot is not
  // finite); masked keys are dropped with selects, so their K and V never reach O. Every group runs
  // the same iterations (its key past key_end is masked), so the loop stays uniform. ----
  const bool redo = subgroupAny(careful);
  if (redo) {
    [[unroll]] for (uint r = 0u; r < BR; ++r) m[r] = M_INIT, l[r] = 0.0;
    [[unroll]] for (uint e = 0u; e < BR * VW; ++e) acc[e] = 0.0;
  }
  [[dont_unroll]] for (uint j0 = redo ? key_begin : fast_end; j0 < key_end; j0 += KG) {
    const uint j = j0 + g;
    const uint jb = key_row(b, min(j, key_end - 1u));
    const uint krow = k_head + jb * pc.k_ss, vrow = v_head + jb * pc.v_ss;
    float dot_qk[BR], down[BR];
    [[unroll]] for (uint r = 0u; r < BR; ++r) dot_qk[r] = 0.0, down[r] = 0.0;
    [[unroll]] for (uint n = 0u; n < NQ; ++n) {
      float x[E];
      load_chunk(TENSOR_K, krow, lane_chunk(n, NQ), DQK, x);
      [[unroll]] for (uint r = 0u; r < BR; ++r)
        [[unroll]] for (uint e = 0u; e < E; ++e) {
          const float qd = qr[r * QW + n * E + e];
          dot_qk[r] = fma(qd, x[e], dot_qk[r]);
          down[r] = fma(qd * DOWN, x[e] * DOWN, down[r]);
        }
    }
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
      LANE_SUM(dot_qk[r])
      LANE_SUM(down[r])
    }
    float p[BR];
    bool vis[BR];
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
      bool in_range = j < row_key_end[r];
      if (HAS_WINDOW) in_range = in_range && j >= row_key_begin[r];
      float bias = 0.0;
      if (has_mask) bias = mask_bias(MASK_KIND, in_range ? mask_row[r] + j : pc.m_off);
      vis[r] = in_range && bias != NEG_INF;
      float sc = finite(dot_qk[r]) ? scale_dot(dot_qk[r], pc.scale) : scale_rescaled_dot(down[r], pc.scale);
      sc = modify_score(sc, slope[r], row[r], j);
      const float s = vis[r] ? add_bias(sc, bias) : NEG_INF;
      const float m_new = max(m[r], s);
      const float alpha = exp(m[r] - m_new);
      p[r] = vis[r] ? exp(s - m_new) : 0.0;
      l[r] = l[r] * alpha + p[r];
      m[r] = m_new;
      [[unroll]] for (uint e = 0u; e < VW; ++e) acc[r * VW + e] *= alpha;
    }
    [[unroll]] for (uint n = 0u; n < NV; ++n) {
      float x[E];
      load_chunk(TENSOR_V, vrow, lane_chunk(n, NV), DV, x);
      [[unroll]] for (uint r = 0u; r < BR; ++r)
        [[unroll]] for (uint e = 0u; e < E; ++e) {
          const uint i = r * VW + n * E + e;
          acc[i] = vis[r] ? fma(p[r], x[e], acc[i]) : acc[i];
        }
    }
  }

  // The key groups' running max, sum and accumulators merged (a butterfly over the groups: every
  // lane ends with the workgroup's), as the combine merges splits. The running max starts at M_INIT,
  // finite, so that a group that saw no key merges as a weight of 0.
  [[unroll]] for (uint s_ = 0u; s_ < 7u; ++s_) {
    const uint stride = TPR << s_;
    if (stride >= LANES) continue;
    [[unroll]] for (uint r = 0u; r < BR; ++r) {
      const float m_other = subgroupShuffleXor(m[r], stride), l_other = subgroupShuffleXor(l[r], stride);
      const float m_new = max(m[r], m_other);
      const float mine = exp(m[r] - m_new), theirs = exp(m_other - m_new);
      l[r] = l[r] * mine + l_other * theirs;
      m[r] = m_new;
      [[unroll]] for (uint e = 0u; e < VW; ++e)
        acc[r * VW + e] = acc[r * VW + e] * mine + subgroupShuffleXor(acc[r * VW + e], stride) * theirs;
    }
  }

  // The sink of the row's head joins its denominator (unsplit calls only: split, the combine adds it).
  // A row with no visible key then has l = 1, m = the sink and acc = 0: O = 0, LSE = the sink. (A
  // pipeline without a sink: a factor of 1, folded away with the specialization constant.)
  [[unroll]] for (uint r = 0u; r < BR; ++r) {
    const float factor = add_head_sink(m[r], l[r], head[r]);
    [[unroll]] for (uint e = 0u; e < VW; ++e) acc[r * VW + e] *= factor;
  }

  // ---- Outputs: each lane of key group 0 writes its own dims of O; lane 0 the LSE. l == 0 only for
  // rows whose every key was masked (and no sink): O = 0 and LSE = -inf. ----
  const bool partial = PARTIAL;
  [[unroll]] for (uint r = 0u; r < BR; ++r) {
    if (!row_valid[r] || g != 0u) continue;
    const float inv_l = l[r] == 0.0 ? 0.0 : 1.0 / l[r];
    const uint prow = partial ? partial_row(split, b, head[r], row[r]) : 0u;
    const uint out_row = pc.o_off + b * pc.o_sb + head[r] * pc.o_sh + query_row(row[r]) * pc.o_ss;
    [[unroll]] for (uint n = 0u; n < NV; ++n) {
      const uint c = lane_chunk(n, NV);
      if (VEC) {
        // (DV is a multiple of E: a chunk is whole in the row or past its end.)
        if (c * E >= DV) continue;
        float x[E];
        [[unroll]] for (uint e = 0u; e < E; ++e) x[e] = acc[r * VW + n * E + e] * inv_l;
        if (partial) {
          [[unroll]] for (uint h = 0u; h < E / 4u; ++h)
            partial_o_vecs[(prow * DV + c * E) / 4u + h] = vec4(x[4u * h], x[4u * h + 1u], x[4u * h + 2u], x[4u * h + 3u]);
        } else {
          o_chunks[out_row / E + c] = pack_chunk(x);
        }
        continue;
      }
      [[unroll]] for (uint e = 0u; e < E; ++e) {
        const uint d = c * E + e;
        if (d >= DV) continue;
        const float val = acc[r * VW + n * E + e] * inv_l;
        if (partial) partial_o[prow * DV + d] = val;
        else o[out_row + d] = from_f32(val);
      }
    }
    if (lane != 0u) continue;
    const bool empty = l[r] == 0.0;
    if (partial) {
      partial_lse[2u * prow] = empty ? NEG_INF : m[r];  // (max, sum): attention_tiled.comp
      partial_lse[2u * prow + 1u] = l[r];
    } else if ((pc.flags & FLAG_WRITE_LSE) != 0u) {
      lse[lse_index(b, head[r], row[r])] = empty ? NEG_INF : m[r] + log(l[r]);
    }
  }
}
