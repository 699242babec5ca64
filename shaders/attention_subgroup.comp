#version 450
// Fused attention for CPU devices (lavapipe/llvmpipe), written to the JIT rules of docs/devices.md:
//   - One workgroup is one subgroup of LANES invocations (LANES = the device's subgroup size, a
//     specialization constant); each invocation keeps R = BR / LANES query rows in private arrays.
//   - K and V are read straight from the storage buffers: for each key, lane t loads dims
//     n*LANES + t and the lanes exchange them with subgroupShuffle at constant lane indices, so one
//     load by each lane feeds LANES x R multiply-adds in every lane. No shared memory, no barrier.
//   - Every private array (q, acc, scores) is indexed only inside [[unroll]] loops; the key loop,
//     KB = BC keys per iteration, is a real loop; the Q load and the output writes are real loops
//     over vec chunks that place values with unrolled selects.
//   - llvmpipe runs both sides of every `if` and at least one pass of every loop whatever the
//     condition, so there is no slow path inside the key loop. The score rule's recomputation of a
//     non-finite dot (score.glsl) and NaN/Inf in V are handled by a second pass, its own pipeline
//     (SPEC_ATTENTION_CAREFUL_PASS = 1) dispatched after this one on the same grid, which redoes from
//     scratch, one key per iteration, the rows of the invocations that met such a key (`careful`):
//     the fast pass uses V as read, flags any visible key whose dot is non-finite and, after its
//     loop, a sum of its accumulators that is not finite (NaN or Inf in V shows there, a masked
//     key's too: p = 0 times Inf is NaN), writes the rows of the other invocations and leaves the
//     workgroup's ballot of careful invocations at REDO_BINDING. In one pipeline the two halved
//     neither's speed but doubled the JIT time (both drivers) and made the fast loop slower on
//     Mesa 25 (register pressure).
//
//   - Decode (PACK_GROUP): the rows of a workgroup are the query rows of every query head of one GQA
//     group, so each K/V element a lane loads feeds all the group's heads: K and V are read once per
//     group, not once per query head. The host then dispatches one range of tiles (tile_base 0), so
//     partial_row's range is the whole seq_q.
//
// Semantics, bindings, push constants and the split-KV partial output are those of
// attention_tiled.comp and attention_rowwise.comp. runtime/attention_plan.cpp counts the loops below
// against lavapipe's 65535-iteration limit (fused_loop_iterations): keep the two in step.

#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_vote : enable
#extension GL_KHR_shader_subgroup_ballot : enable
#define F16_WIDEN_BY_BITS  // a CPU devices' kernel: half_floats.glsl
#include "storage_types.glsl"
#include "attention_push.glsl"

layout(constant_id = SPEC_ATTENTION_BR) const uint BR = 32;    // query rows per workgroup (R x LANES)
layout(constant_id = SPEC_ATTENTION_TPR) const uint TPR = 1;    // unused here (1); kept so the variants share ids
layout(constant_id = SPEC_ATTENTION_BC) const uint BC = 4;     // keys per iteration of the key loop
layout(constant_id = SPEC_ATTENTION_DQK) const uint DQK = 64;
layout(constant_id = SPEC_ATTENTION_DV) const uint DV = 64;
layout(local_size_x_id = SPEC_ATTENTION_WORKGROUP) in;                // LANES: the device's subgroup size
// The mask kind of the call (MASK_*), so that only its reads are in the code: llvmpipe runs every
// branch of mask_bias, each with a per-lane gather. The push constants' kind bits are not read.
layout(constant_id = SPEC_ATTENTION_MASK_KIND) const uint MASK_KIND = MASK_NONE;
// GQA packing (decode): 1 = a workgroup's rows are the query rows of all pc.group query heads of
// one GQA group, packed head-major (row r = head-in-group * seq_q + query row), so that each K/V row
// a workgroup loads serves the whole group; the grid's y is then the KV head. 0 = one query head per
// workgroup (y = the query head), rows = its query rows.
layout(constant_id = SPEC_ATTENTION_PACK_GROUP) const uint PACK_GROUP = 0;
const bool PACKED = PACK_GROUP != 0u;
// 0: the fast pass; 1: the careful pass (above).
layout(constant_id = SPEC_ATTENTION_CAREFUL_PASS) const uint CAREFUL_PASS = 0;
const bool CAREFUL = CAREFUL_PASS != 0u;
// 1: the fast pass reads K and V rows in 16-byte chunks (row_chunks.glsl), each lane E consecutive
// dims a load; the plan sets it where the dims are whole multiples of LANES x E and the strides whole
// chunks (a call whose K or V starts off the 16-byte grid replays the VEC = 0 pipeline).
layout(constant_id = SPEC_ATTENTION_VEC) const uint VEC_LOADS = 0;

const uint LANES = gl_WorkGroupSize.x;
const uint R = BR / LANES;                      // query rows per invocation
const uint KB = BC;
const uint NQ = SUBGROUP_CHUNKS(DQK, LANES);    // chunks of LANES dims per Q/K row
const uint NV = SUBGROUP_CHUNKS(DV, LANES);
const uint DQKP = NQ * LANES, DVP = NV * LANES;  // padded dims (the padding holds zeros)

#include "attention_common.glsl"
#include "score.glsl"
#include "row_chunks.glsl"

// (Products, not &&: glslang turns a chain of && over specialization constants into phis.)
const uint VEC_FITS = (DQK % (LANES * E) == 0u ? 1u : 0u) * (DV % (LANES * E) == 0u ? 1u : 0u);
const bool VEC = VEC_LOADS * VEC_FITS != 0u;

// The dim that chunk n of a row holds in lane t (Q, K, V, the accumulators and O alike, so that the
// lanes' dot products and sums pair the same dims). Element-wise loads: n * LANES + t, each load
// instruction covering LANES consecutive elements. Chunked (`vec`): lane t's 16-byte chunk g holds
// dims g * LANES * E + t * E .. + E - 1, and chunk n is element n % E of lane t's chunk n / E. The
// fast pass reads K and V per key and each read runs lane by lane on lavapipe, so E elements a
// lane and load instead of one: 8x fewer loads of f16 K and V (the loads were two thirds of d128 f16
// prefill: docs/devices.md; bench/results, comparison subgroup-chunked-kv-2026-12-03).
uint chunk_dim(uint n, uint t, bool vec) { return vec ? (n / E) * (LANES * E) + t * E + n % E : n * LANES + t; }

// Per workgroup of a dispatch (its linear index), the ballot of its invocations whose rows the
// careful pass redoes: written by the fast pass, read by the careful pass.
layout(binding = REDO_BINDING) buffer RedoBuf { uvec4 redo[]; };

bool finite(float x) { return !(isnan(x) || isinf(x)); }

// What an invocation needs to know of one of its query rows: packed row `packed` of the tile is
// query row `row` of query head `head`, which sees keys [key_begin, key_end) of the workgroup's
// `keys` (causal, window; without a window every row starts at keys.x, and only the end is
// compared). A row past the tile's last (`valid` false) reads that one, sees no key and is never
// written.
struct QueryRow {
  uint row, head, key_begin, key_end, mask_base;
  bool valid;
  float slope;  // ALiBi's slope of the row's head (unused without ALiBi)
};

QueryRow query_row_at(uint packed, uint tile_rows, uint kvh, uint b, uvec2 keys) {
  QueryRow q;
  q.valid = packed < tile_rows;
  const uint pr = min(packed, tile_rows - 1u);
  q.head = PACKED ? kvh * pc.group + pr / ROWS_Q : gl_WorkGroupID.y;
  q.row = PACKED ? pr % ROWS_Q : pr;
  const uvec2 rk = row_key_range(keys, q.row);
  q.key_begin = rk.x;
  q.key_end = q.valid ? rk.y : 0u;
  q.mask_base = pc.m_off + b * pc.m_sb + q.head * pc.m_sh + q.row * pc.m_ss;
  q.slope = HAS_ALIBI ? alibi_slope(b, q.head) : 0.0;
  return q;
}

// Writes chunk n of an output row (dims chunk_dim(n, t, vec) of lanes t), `chunk` times `inv_l`: the
// split's partial row (f32), or O's row in the call's dtype.
void store_chunk(bool vec, bool partial, uint split, uint b, QueryRow q, uint n, float chunk[LANES], float inv_l) {
  const uint prow = partial ? partial_row(split, b, q.head, q.row) : 0u;
  const uint out_row = pc.o_off + b * pc.o_sb + q.head * pc.o_sh + query_row(q.row) * pc.o_ss;
  [[unroll]] for (uint t = 0u; t < LANES; ++t) {
    const uint d = chunk_dim(n, t, vec);
    if (d >= DV) continue;
    const float val = chunk[t] * inv_l;
    if (partial) partial_o[prow * DV + d] = val;
    else o[out_row + d] = from_f32(val);
  }
}

// The row's softmax statistics: (max, sum) of a split's partial row (attention_tiled.comp), or the
// LSE when the call asks for it. l == 0 only for rows whose every key was masked (and no sink).
void store_stats(bool partial, uint split, uint b, QueryRow q, float m, float l) {
  const bool empty = l == 0.0;
  if (partial) {
    const uint prow = partial_row(split, b, q.head, q.row);
    partial_lse[2u * prow] = empty ? NEG_INF : m;
    partial_lse[2u * prow + 1u] = l;
  } else if ((pc.flags & FLAG_WRITE_LSE) != 0u) {
    lse[lse_index(b, q.head, q.row)] = empty ? NEG_INF : m + log(l);
  }
}

uint q_row_base(uint b, QueryRow q) { return pc.q_off + b * pc.q_sb + q.head * pc.q_sh + query_row(q.row) * pc.q_ss; }

// Chunk n of a Q row (dims chunk_dim(n, t, vec) of lanes t) from its first element `base`; zeros
// past DQK.
void load_q_chunk(bool vec, uint base, uint n, out float chunk[LANES]) {
  [[unroll]] for (uint t = 0u; t < LANES; ++t) {
    const uint d = chunk_dim(n, t, vec);
    chunk[t] = d < DQK ? to_f32(q[base + min(d, DQK - 1u)]) : 0.0;
  }
}

void main() {
  const uint lane = gl_SubgroupInvocationID;
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

  const uint k_head = kv_element_base(pc.k_off) + b * pc.k_sb + kvh * pc.k_sh;
  const uint v_head = kv_element_base(pc.v_off) + b * pc.v_sb + kvh * pc.v_sh;
  const bool has_mask = MASK_KIND != MASK_NONE;
  const bool partial = PARTIAL;
  // This workgroup's entry of REDO_BINDING (the careful pass runs on the fast pass's grid).
  const uint wg = (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x + gl_WorkGroupID.x;

  if (CAREFUL) {
    // ---- The careful pass: the rows of the invocations that the fast pass found to meet a visible
    // key with a non-finite dot (overflow, or NaN/Inf in Q or K) or NaN/Inf in V, each again from
    // scratch, one row at a time and one key per iteration, and their outputs. Scores follow
    // score.glsl (recomputed with scaled-down operands when the dot is not finite); masked keys are
    // dropped with selects, so their K and V never reach O. One row at a time keeps the code small;
    // the row's Q is read again, placed by selects (a private array indexed by a loop counter would
    // live in memory). ----
    const uvec4 who = redo[wg];
    if (who == uvec4(0u)) return;
    const bool careful = subgroupBallotBitExtract(who, lane);
    [[dont_unroll]] for (uint r = 0u; r < R; ++r) {
      const QueryRow qc = query_row_at(i0 + r * LANES + lane, tile_rows, kvh, b, keys);
      float qx[DQKP];
      [[unroll]] for (uint d = 0u; d < DQKP; ++d) qx[d] = 0.0;
      const uint q_base = q_row_base(b, qc);
      [[dont_unroll]] for (uint n = 0u; n < NQ; ++n) {
        float chunk[LANES];
        load_q_chunk(false, q_base, n, chunk);
        [[unroll]] for (uint nn = 0u; nn < NQ; ++nn)
          [[unroll]] for (uint t = 0u; t < LANES; ++t)
            if (nn == n) qx[nn * LANES + t] = chunk[t];
      }
      float m_row = M_INIT, l_row = 0.0;
      float arow[DVP];
      [[unroll]] for (uint d = 0u; d < DVP; ++d) arow[d] = 0.0;
      [[dont_unroll]] for (uint j = key_begin; j < key_end; ++j) {
        const uint jb = key_row(b, j);
        const uint krow = k_head + jb * pc.k_ss, vrow = v_head + jb * pc.v_ss;
        float kx[NQ], vx[NV];
        [[unroll]] for (uint n = 0u; n < NQ; ++n) {
          const uint d = n * LANES + lane;
          const float x = k_value(krow + min(d, DQK - 1u));
          kx[n] = d < DQK ? x : 0.0;
        }
        [[unroll]] for (uint n = 0u; n < NV; ++n) {
          const uint d = n * LANES + lane;
          const float x = v_value(vrow + min(d, DV - 1u));
          vx[n] = d < DV ? x : 0.0;
        }
        float dot_qk = 0.0, down = 0.0;
        [[unroll]] for (uint n = 0u; n < NQ; ++n) {
          float part = 0.0, part_down = 0.0;
          [[unroll]] for (uint t = 0u; t < LANES; ++t) {
            const float kd = subgroupShuffle(kx[n], t), qd = qx[n * LANES + t];
            part = fma(qd, kd, part);
            part_down = fma(qd * DOWN, kd * DOWN, part_down);
          }
          dot_qk += part, down += part_down;
        }
        bool in_range = careful && j < qc.key_end;
        if (HAS_WINDOW) in_range = in_range && j >= qc.key_begin;
        float bias = 0.0;
        if (has_mask) bias = mask_bias(MASK_KIND, in_range ? qc.mask_base + j : pc.m_off);
        const bool vis = in_range && bias != NEG_INF;
        float sc = finite(dot_qk) ? scale_dot(dot_qk, pc.scale) : scale_rescaled_dot(down, pc.scale);
        sc = modify_score(sc, qc.slope, qc.row, j);
        const float s = vis ? add_bias(sc, bias) : NEG_INF;
        const float m_new = max(m_row, s);
        const float alpha = exp(m_row - m_new);
        const float p = vis ? exp(s - m_new) : 0.0;
        l_row = l_row * alpha + p;
        m_row = m_new;
        [[unroll]] for (uint n = 0u; n < NV; ++n)
          [[unroll]] for (uint t = 0u; t < LANES; ++t) {
            const float vd = subgroupShuffle(vx[n], t);
            const uint d = n * LANES + t;
            arow[d] *= alpha;
            arow[d] = vis ? fma(p, vd, arow[d]) : arow[d];
          }
      }
      if (!careful || !qc.valid) continue;  // (the other invocations' rows are the fast pass's)
      const float factor = add_head_sink(m_row, l_row, qc.head);
      const float inv = l_row == 0.0 ? 0.0 : 1.0 / l_row;
      [[dont_unroll]] for (uint n = 0u; n < NV; ++n) {
        float chunk[LANES];
        [[unroll]] for (uint t = 0u; t < LANES; ++t) chunk[t] = 0.0;
        [[unroll]] for (uint nn = 0u; nn < NV; ++nn)
          [[unroll]] for (uint t = 0u; t < LANES; ++t)
            if (nn == n) chunk[t] = arow[nn * LANES + t] * factor;
        store_chunk(false, partial, split, b, qc, n, chunk, inv);
      }
      store_stats(partial, split, b, qc, m_row, l_row);
    }
    return;
  }

  // Row r of this invocation is (packed) row i0 + r * LANES + lane.
  QueryRow qrow[R];
  [[unroll]] for (uint r = 0u; r < R; ++r) qrow[r] = query_row_at(i0 + r * LANES + lane, tile_rows, kvh, b, keys);

  // Q rows, dims padded with zeros. Rows past seq_q read row seq_q - 1 and are never written.
  float qr[R * DQKP];
  [[unroll]] for (uint e = 0u; e < R * DQKP; ++e) qr[e] = 0.0;
  [[dont_unroll]] for (uint n = 0u; n < NQ; ++n) {
    [[unroll]] for (uint r = 0u; r < R; ++r) {
      float chunk[LANES];
      load_q_chunk(VEC, q_row_base(b, qrow[r]), n, chunk);
      [[unroll]] for (uint nn = 0u; nn < NQ; ++nn)
        [[unroll]] for (uint t = 0u; t < LANES; ++t)
          if (nn == n) qr[r * DQKP + nn * LANES + t] = chunk[t];
    }
  }


  float m[R], l[R];
  float acc[R * DVP];
  [[unroll]] for (uint r = 0u; r < R; ++r) m[r] = M_INIT, l[r] = 0.0;
  [[unroll]] for (uint e = 0u; e < R * DVP; ++e) acc[e] = 0.0;
  bool careful = false;  // a visible key with a non-finite dot or V: this invocation redoes its rows

  // ---- The fast loop: KB keys per iteration ----
  [[dont_unroll]] for (uint j0 = key_begin; j0 < key_end; j0 += KB) {
    // K and V of the KB keys, a 16-byte chunk per lane and load (VEC) or one element; keys past
    // key_end read key_end - 1 (in the binding) and are masked below.
    float kv[KB * NQ], vv[KB * NV];
    [[unroll]] for (uint c = 0u; c < KB; ++c) {
      const uint jb = key_row(b, min(j0 + c, key_end - 1u));
      const uint krow = k_head + jb * pc.k_ss, vrow = v_head + jb * pc.v_ss;
      if (VEC) {
        // Whole chunks (VEC_FITS): lane `lane`'s g-th is dims g * LANES * E + lane * E ...
        [[unroll]] for (uint g = 0u; g < NQ / E; ++g) {
          float x[E];
          unpack_chunk(k_chunks[(krow + g * LANES * E) / E + lane], x);
          [[unroll]] for (uint e = 0u; e < E; ++e) kv[c * NQ + g * E + e] = x[e];
        }
        [[unroll]] for (uint g = 0u; g < NV / E; ++g) {
          float x[E];
          unpack_chunk(v_chunks[(vrow + g * LANES * E) / E + lane], x);
          [[unroll]] for (uint e = 0u; e < E; ++e) vv[c * NV + g * E + e] = x[e];
        }
      } else {
        [[unroll]] for (uint n = 0u; n < NQ; ++n) {
          const uint d = n * LANES + lane;
          const float x = k_value(krow + min(d, DQK - 1u));
          kv[c * NQ + n] = d < DQK ? x : 0.0;
        }
        [[unroll]] for (uint n = 0u; n < NV; ++n) {
          const uint d = n * LANES + lane;
          const float x = v_value(vrow + min(d, DV - 1u));
          vv[c * NV + n] = d < DV ? x : 0.0;
        }
      }
    }

    // Dots: per chunk a fresh partial sum over its LANES dims, then added to the total.
    float dots[R * KB];
    [[unroll]] for (uint e = 0u; e < R * KB; ++e) dots[e] = 0.0;
    [[unroll]] for (uint n = 0u; n < NQ; ++n) {
      float part[R * KB];
      [[unroll]] for (uint e = 0u; e < R * KB; ++e) part[e] = 0.0;
      [[unroll]] for (uint t = 0u; t < LANES; ++t) {
        float kb[KB];
        [[unroll]] for (uint c = 0u; c < KB; ++c) kb[c] = subgroupShuffle(kv[c * NQ + n], t);
        [[unroll]] for (uint r = 0u; r < R; ++r) {
          const float qd = qr[r * DQKP + n * LANES + t];
          [[unroll]] for (uint c = 0u; c < KB; ++c) part[r * KB + c] = fma(qd, kb[c], part[r * KB + c]);
        }
      }
      [[unroll]] for (uint e = 0u; e < R * KB; ++e) dots[e] += part[e];
    }

    // Scores with the masks; the online softmax over the KB keys.
    float p[R * KB];
    [[unroll]] for (uint r = 0u; r < R; ++r) {
      float s[KB];
      bool vis[KB];
      float tile_max = M_INIT;
      [[unroll]] for (uint c = 0u; c < KB; ++c) {
        const uint j = j0 + c;
        const float dot_qk = dots[r * KB + c];
        bool in_range = j < qrow[r].key_end;
        if (HAS_WINDOW) in_range = in_range && j >= qrow[r].key_begin;
        float bias = 0.0;
        if (has_mask) bias = mask_bias(MASK_KIND, in_range ? qrow[r].mask_base + j : pc.m_off);
        vis[c] = in_range && bias != NEG_INF;
        careful = careful || (vis[c] && !finite(dot_qk));
        const float sc = modify_score(scale_dot(dot_qk, pc.scale), qrow[r].slope, qrow[r].row, j);
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
      [[unroll]] for (uint d = 0u; d < DVP; ++d) acc[r * DVP + d] *= alpha;
    }

    // O += P V, V as read: NaN or Inf in V (a masked key's too: p = 0 times Inf is NaN) stays in the
    // accumulators, which are tested once after the loop.
    [[unroll]] for (uint n = 0u; n < NV; ++n) {
      [[unroll]] for (uint t = 0u; t < LANES; ++t) {
        float vb[KB];
        [[unroll]] for (uint c = 0u; c < KB; ++c) vb[c] = subgroupShuffle(vv[c * NV + n], t);
        [[unroll]] for (uint r = 0u; r < R; ++r) {
          float a = acc[r * DVP + n * LANES + t];
          [[unroll]] for (uint c = 0u; c < KB; ++c) a = fma(p[r * KB + c], vb[c], a);
          acc[r * DVP + n * LANES + t] = a;
        }
      }
    }
  }
  // A non-finite accumulator: NaN or Inf met in V (or a sum that overflowed). The careful pass redoes
  // the invocation's rows with V selected away for masked keys. One test per invocation, not one
  // per V element and key: on lavapipe a test of every loaded V element cost more than loading V
  // (docs/devices.md), and the decode form does the same. The test is of the accumulators' sum (NaN
  // or Inf in any of them makes it NaN or Inf; a finite sum that overflows only sends the rows to
  // the careful pass), not of each: `careful || !finite(acc[e])` unrolled over the accumulators is
  // one short-circuit branch each, which took lavapipe's JIT from 2 s to 11 s (d128 f16, Mesa 22.3.6).
  float acc_sum = 0.0;
  [[unroll]] for (uint e = 0u; e < R * DVP; ++e) acc_sum += acc[e];
  careful = careful || !finite(acc_sum);

  // ---- The rows of the invocations that met no such key are final: their outputs. The sink of
  // the row's head joins its denominator (unsplit calls only: split, the combine adds it); a row
  // with no visible key then has l = 1, m = the sink and acc = 0: O = 0, LSE = the sink. l == 0
  // only for rows whose every key was masked (and no sink): O = 0 and LSE = -inf. ----
  float sink_factor[R], inv_l[R];
  [[unroll]] for (uint r = 0u; r < R; ++r) {
    sink_factor[r] = add_head_sink(m[r], l[r], qrow[r].head);
    inv_l[r] = l[r] == 0.0 ? 0.0 : 1.0 / l[r];
  }
  [[dont_unroll]] for (uint n = 0u; n < NV; ++n) {
    float chunk[R * LANES];
    [[unroll]] for (uint e = 0u; e < R * LANES; ++e) chunk[e] = 0.0;
    [[unroll]] for (uint nn = 0u; nn < NV; ++nn)
      [[unroll]] for (uint r = 0u; r < R; ++r)
        [[unroll]] for (uint t = 0u; t < LANES; ++t)
          if (nn == n) chunk[r * LANES + t] = acc[r * DVP + nn * LANES + t];
    [[unroll]] for (uint r = 0u; r < R; ++r) {
      if (!qrow[r].valid || careful) continue;
      float row_chunk[LANES];
      [[unroll]] for (uint t = 0u; t < LANES; ++t) row_chunk[t] = chunk[r * LANES + t] * sink_factor[r];
      store_chunk(VEC, partial, split, b, qrow[r], n, row_chunk, inv_l[r]);
    }
  }
  [[unroll]] for (uint r = 0u; r < R; ++r)
    if (qrow[r].valid && !careful) store_stats(partial, split, b, qrow[r], m[r], l[r]);

  // The careful pass redoes the rows of this ballot (none: it returns at once).
  const uvec4 who = subgroupBallot(careful);
  if (subgroupElect()) redo[wg] = who;
}
