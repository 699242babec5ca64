#version 450
// Fused scaled dot-product attention for GPUs, the "tiled" variant (docs/design.md), after
// the scalar flash-attention kernels known to be fast through Vulkan (ggml-vulkan's flash_attn.comp,
// FlashAttention 2).
//
// A workgroup owns ROWS = BR query rows x HEADS query heads of one GQA group (HEADS > 1: each K/V
// tile read serves the whole group) of one batch and one key split. Its invocations form row groups
// of TPR lanes; a row group owns RPT rows, and lane `lane` of it owns the vec4 slices
// lane, lane + TPR, ... of the head dims of those rows: their Q, in registers, pre-multiplied by
// scale * log2(e) / 2, and their f32 output accumulators.
//
// Per tile of BC keys (K and V staged in shared memory, 16-bit for f16/bf16 storage):
//   1. scores, TPR keys at a time: every lane forms the partial dot products of its slices with the
//      TPR keys for its RPT rows, and a reduce-scatter over the row group's lanes (subgroupShuffleXor
//      within the aligned group: TPR divides every subgroup size the device may use, the planner's
//      rule) leaves lane l with the whole score of key l: each score is formed once, not per lane;
//   2. each lane applies the masks to its own keys, keeps their scores in shared memory and its own
//      maximum; the row's maximum is merged over the lanes (log2(TPR) shuffles per row per tile);
//   3. each lane turns its own scores into weights exp2(2 (t - m)) (one exp per (row, key)) and
//      adds them to its own running sum; the sums are merged once, at the end;
//   4. every lane accumulates weight x V for its dim slices over the tile's keys.
// Key tiles past the last visible key of the workgroup (causal, the window, key lengths, end of the
// split) or before its first (the window's left side) are not visited: the workgroup's key range
// (workgroup_key_range) may start at any key, and its tiles count from that key. Each row masks the keys
// outside its own range (row_key_range: causal and the window). With an explicit mask, its tile (ROWS x BC, -inf where the row's key range ends) is staged
// in shared memory by the whole workgroup, coalesced, where the scores go; a tile no row of the
// workgroup sees is skipped by a uniform test after the barrier (the last tile some row sees, a
// shared uint every invocation that saw a key raised with atomicMax).
//
// Scores: the contract's rule (score.glsl) in units of log2(e)/2: t = s * log2(e)/2, so that scores
// saturated to +-FLT_MAX stay finite (+-T_MAX) and ties among them stay ties. The fast product of
// pre-scaled Q is used where it is exact enough; a visible key whose fast score is not finite, or a
// row whose pre-scaled Q over- or underflowed, takes score.glsl's careful route (the owner lane,
// from the unscaled Q in memory).
//
// Score modifiers (modifiers.glsl), each compiled only when its specialization constant is on: the
// score's (modify_score) in natural units (converted from and back to log2(e)/2, saturating),
// before the float mask; unsplit, the sink joins each row's max and sum before O and LSE are written
// (split-KV: attention_combine.comp adds it, once per row).
//
// Masked keys never touch the output: their weight is a negative sentinel and the accumulation selects
// (not multiplies) it away, so NaN/Inf in a masked K or V row never reaches O. The running max starts
// at -T_MAX (the lowest visible score), finite. With PARTIAL the normalised partial O and its
// (max, sum), the max in units of log2(e)/2, go to the workspace for attention_combine.comp.
//
// lavapipe ends every invocation's loops after 65535 iterations in total (docs/devices.md): the host
// bounds keys_per_split with the count in runtime/attention_plan.cpp (fused_loop_iterations). Keep that
// count in step with the loops here. Only the loops over dims, rows and lanes are unrolled.
//
// TPR = 1 is compiled without subgroup operations (TILED_SHUFFLE undefined): for devices without
// subgroup shuffles, each invocation owns whole rows.

#extension GL_EXT_control_flow_attributes : enable
#if TILED_SHUFFLE
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#endif
#include "storage_types.glsl"
#include "attention_push.glsl"

layout(constant_id = SPEC_ATTENTION_BR) const uint BR = 16;     // query rows per workgroup (per head)
layout(constant_id = SPEC_ATTENTION_TPR) const uint TPR = 8;    // lanes per row group (1 without shuffles)
layout(constant_id = SPEC_ATTENTION_BC) const uint BC = 32;     // keys per tile, a multiple of TPR
layout(constant_id = SPEC_ATTENTION_DQK) const uint DQK = 64;   // head dim of Q and K
layout(constant_id = SPEC_ATTENTION_DV) const uint DV = 64;     // head dim of V and O
layout(local_size_x_id = SPEC_ATTENTION_WORKGROUP) in;          // ROWS / RPT * TPR (set by the host)
layout(constant_id = SPEC_ATTENTION_RPT) const uint RPT = 1;    // rows per row group
layout(constant_id = SPEC_ATTENTION_HEADS) const uint HEADS = 1;  // query heads per workgroup

const uint ROWS = BR * HEADS;                  // rows of the workgroup: row = query * HEADS + head
const uint WG = ROWS / RPT * TPR;
const uint DQK4 = VEC4S(DQK);
const uint DV4 = VEC4S(DV);
const uint SK = TILED_STRIDE(DQK, TPR);        // vec4 slots per K row in shared memory
const uint SV = TILED_STRIDE(DV, TPR);
const uint DQKT = SK / TPR;                    // Q vec4s per lane and row
const uint DVT = SV / TPR;                     // accumulator vec4s per lane and row
const uint NB = BC / TPR;                      // blocks of TPR keys per tile
const uint SS = TILED_S_STRIDE(BC);

#include "attention_common.glsl"
#include "score.glsl"

#define HALF_LOG2E uintBitsToFloat(TILED_HALF_LOG2E_BITS)
#define T_MAX uintBitsToFloat(TILED_T_MAX_BITS)
#define TWO_LN2 uintBitsToFloat(TILED_TWO_LN2_BITS)
#define FLT_MIN uintBitsToFloat(0x00800000u)

// Vector views of Q, K and V (the same bindings as attention_common.glsl's): four elements at a time.
#if defined(DTYPE_F32)
#define VEC_T vec4
#define SHARED_T vec4
vec4 shared_to_vec4(vec4 x) { return x; }
#else
// Four 16-bit values in two words: shared tiles stay 16-bit, widened to f32 when read.
#define VEC_T uvec2
#define SHARED_T uvec2
#if defined(DTYPE_F16)
vec4 shared_to_vec4(uvec2 x) { return vec4(unpackHalf2x16(x.x), unpackHalf2x16(x.y)); }
#else
vec4 shared_to_vec4(uvec2 x) {
  return vec4(uintBitsToFloat(x.x << 16), uintBitsToFloat(x.x & 0xffff0000u), uintBitsToFloat(x.y << 16),
              uintBitsToFloat(x.y & 0xffff0000u));
}
#endif
#endif
layout(binding = ATTENTION_Q_BINDING) readonly buffer QVec { VEC_T q_vec[]; };
layout(binding = ATTENTION_K_BINDING) readonly buffer KVec { VEC_T k_vec[]; };
layout(binding = ATTENTION_V_BINDING) readonly buffer VVec { VEC_T v_vec[]; };

// Elements d4*4 .. d4*4+3 of the row starting at element `base` of Q, K or V (zero past `dim`), as
// stored (the shared-memory form): one vector load when `vec` (the host's flag and a multiple-of-4
// binding offset), else element by element.
SHARED_T load_slot(uint tensor, uint base, uint d4, uint dim, bool vec) {
  if (vec) {
    if (tensor == TENSOR_Q) return SHARED_T(q_vec[base / 4u + d4]);
    if (tensor == TENSOR_K) return SHARED_T(k_vec[base / 4u + d4]);
    return SHARED_T(v_vec[base / 4u + d4]);
  }
#if defined(DTYPE_F32)
  return load_row_vec4(tensor, base, d4, dim);
#else
  uint h[4];
  [[unroll]] for (uint c = 0u; c < 4u; ++c) {
    const uint d = d4 * 4u + c;
    h[c] = 0u;
    if (d < dim) {
      // (A q8_0 value d * q, exact in f32, is rounded to the shared tiles' 16-bit type: this kernel
      // stages K and V as the call's dtype.)
      if (tensor == TENSOR_Q) h[c] = uint(q[base + d]);
      else if (tensor == TENSOR_K) h[c] = KV_Q8_0 ? uint(from_f32(k_value(base + d))) : uint(k[base + d]);
      else h[c] = KV_Q8_0 ? uint(from_f32(v_value(base + d))) : uint(v[base + d]);
    }
  }
  return uvec2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
#endif
}

// Lane groups of TPR invocations: consecutive local invocation indices, aligned, within one subgroup
// (subgroups are formed from consecutive indices, and TPR divides the subgroup size). The butterfly
// steps are written out (TPR <= 128), each under a condition on the constant TPR, not as a loop:
// lavapipe counts every loop iteration it runs against its limit, so no loop may be left to chance.
#if TILED_SHUFFLE
#define TPR_STEPS(STEP) \
  if (TPR > 64u) STEP(64u) \
  if (TPR > 32u) STEP(32u) \
  if (TPR > 16u) STEP(16u) \
  if (TPR > 8u) STEP(8u) \
  if (TPR > 4u) STEP(4u) \
  if (TPR > 2u) STEP(2u) \
  if (TPR > 1u) STEP(1u)
float group_max(float x) {
#define MAX_STEP(o) { x = max(x, subgroupShuffleXor(x, o)); }
  TPR_STEPS(MAX_STEP)
  return x;
}
float group_sum(float x) {
#define SUM_STEP(o) { x += subgroupShuffleXor(x, o); }
  TPR_STEPS(SUM_STEP)
  return x;
}
bool group_any(bool x) {
  uint v = x ? 1u : 0u;
#define OR_STEP(o) { v |= subgroupShuffleXor(v, o); }
  TPR_STEPS(OR_STEP)
  return v != 0u;
}
#else
float group_max(float x) { return x; }
float group_sum(float x) { return x; }
bool group_any(bool x) { return x; }
#endif

shared SHARED_T sK[TILED_K_TILE(BC, DQK, TPR)];
shared SHARED_T sV[TILED_V_TILE(BC, DV, TPR)];
shared float sS[TILED_S_TILE(ROWS, BC)];
// With an explicit mask: one more than the last tile in which some row of the workgroup sees a key
// (stale values of earlier tiles are smaller, so it needs no reset).
shared uint sVisibleTile;

// score.glsl's rule for one visible key, from the unscaled Q row in memory (at q_row) and the key's
// K row in shared memory (slot c), in units of log2(e)/2: the careful route for the rare keys whose
// fast score is not finite and the rows whose pre-scaled Q over- or underflowed. Four vec4s per loop
// iteration (fused_loop_iterations counts them).
float careful_score(uint q_row, uint c, bool vec_q) {
  vec4 plain = vec4(0.0), down = vec4(0.0);
  for (uint d0 = 0u; d0 < DQK4; d0 += 4u) {
    [[unroll]] for (uint u = 0u; u < 4u; ++u) {
      const uint d4 = d0 + u;
      if (d4 < DQK4) {
        const vec4 qv = shared_to_vec4(load_slot(TENSOR_Q, q_row, d4, DQK, vec_q));
        const vec4 kv = shared_to_vec4(sK[c * SK + d4]);
        plain = fma(qv, kv, plain);
        down = fma(qv * DOWN, kv * DOWN, down);
      }
    }
  }
  const float dot_qk = plain.x + plain.y + plain.z + plain.w;
  const float s = (isinf(dot_qk) || isnan(dot_qk)) ? scale_rescaled_dot(down.x + down.y + down.z + down.w, pc.scale)
                                                    : scale_dot(dot_qk, pc.scale);
  // s is finite (then |s| <= FLT_MAX and |t| <= T_MAX) or an Inf/NaN input's, which propagates.
  return s * HALF_LOG2E;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint group = tid / TPR;  // row group
  const uint lane = tid % TPR;
  const uint kvh = gl_WorkGroupID.y;  // HEADS > 1: the workgroup's heads are one GQA group
  const uint h0 = HEADS > 1u ? kvh * pc.group : kvh;
  const uint b = workgroup_batch();
  begin_sequence(b);
  const uint split = workgroup_split();
  const uint kv_head = HEADS > 1u ? kvh : kvh / pc.group;
  const uint i0 = tile_first_row();
  // A packed sequence shorter than the grid's tiles (sized by the longest): this tile has no row.
  // (ROWS_Q: the rows computed, SEQ_Q cut to max_seqlen_q in a packed batch; SEQ_Q aligns.)
  if (VARLEN && i0 >= ROWS_Q) return;
  const uint causal = pc.flags & CAUSAL_MASK;
  const uint mask_kind = (pc.flags >> MASK_KIND_SHIFT) & 3u;
  const bool vec_q = (pc.flags & FLAG_VEC_Q) != 0u && (pc.q_off & 3u) == 0u;
  const bool vec_k = (pc.flags & FLAG_VEC_K) != 0u && (pc.k_off & 3u) == 0u;
  const bool vec_v = (pc.flags & FLAG_VEC_V) != 0u && (pc.v_off & 3u) == 0u;
  const float q_scale = pc.scale * HALF_LOG2E;

  const uvec2 keys = workgroup_key_range(split, b, min(i0, ROWS_Q - 1u), min(i0 + BR, ROWS_Q) - 1u);
  const uint key_begin = keys.x, key_end = keys.y;

  // This invocation's rows: Q slices in registers (pre-scaled), visible key range, mask row.
  vec4 q_reg[RPT * DQKT];
  uint q_row[RPT], row_begin[RPT], row_end[RPT];
  bool careful[RPT];
  float slope[RPT];  // ALiBi's, per row once
  float m[RPT], l[RPT];
  vec4 acc[RPT * DVT];
  [[unroll]] for (uint r = 0u; r < RPT; ++r) {
    const uint row = group * RPT + r;
    const uint i = i0 + row / HEADS;
    const uint h = h0 + row % HEADS;
    const bool valid = i < ROWS_Q;
    q_row[r] = pc.q_off + b * pc.q_sb + h * pc.q_sh + query_row(i) * pc.q_ss;
    const uvec2 row_keys = row_key_range(keys, i);  // causal and the window
    row_begin[r] = row_keys.x;
    row_end[r] = valid ? row_keys.y : 0u;
    slope[r] = HAS_ALIBI ? alibi_slope(b, h) : 0.0;
    bool unsafe = false;
    [[unroll]] for (uint t = 0u; t < DQKT; ++t) {
      const uint d4 = lane + t * TPR;
      const vec4 qv = (valid && d4 < DQK4) ? shared_to_vec4(load_slot(TENSOR_Q, q_row[r], d4, DQK, vec_q)) : vec4(0.0);
      const vec4 qs = qv * q_scale;
      // The pre-scaled value overflowed, or lost precision below the normal range (scale != 0).
      unsafe = unsafe || any(bvec4(uvec4(isinf(qs)) & ~uvec4(isinf(qv)))) ||
               (pc.scale != 0.0 && any(bvec4(uvec4(notEqual(qv, vec4(0.0))) & uvec4(lessThan(abs(qs), vec4(FLT_MIN))))));
      q_reg[r * DQKT + t] = qs;
    }
    careful[r] = group_any(unsafe);
    m[r] = -T_MAX;
    l[r] = 0.0;
    [[unroll]] for (uint t = 0u; t < DVT; ++t) acc[r * DVT + t] = vec4(0.0);
  }

  const uint k_head = kv_element_base(pc.k_off) + b * pc.k_sb + kv_head * pc.k_sh;
  const uint v_head = kv_element_base(pc.v_off) + b * pc.v_sb + kv_head * pc.v_sh;

  if (tid == 0u) sVisibleTile = 0u;
  for (uint tile = key_begin; tile < key_end; tile += BC) {
    barrier();  // the previous tile's sK, sV and sS are no longer read
    for (uint e = tid; e < BC * SK; e += WG) {
      const uint c = e / SK, d4 = e % SK;
      const uint j = tile + c;
      sK[e] = (j < key_end && d4 < DQK4) ? load_slot(TENSOR_K, k_head + key_row(b, j) * pc.k_ss, d4, DQK, vec_k)
                                         : SHARED_T(0);
    }
    for (uint e = tid; e < BC * SV; e += WG) {
      const uint c = e / SV, d4 = e % SV;
      const uint j = tile + c;
      sV[e] = (j < key_end && d4 < DV4) ? load_slot(TENSOR_V, v_head + key_row(b, j) * pc.v_ss, d4, DV, vec_v)
                                        : SHARED_T(0);
    }
    if (mask_kind != MASK_NONE) {
      // The explicit mask's tile, staged where the scores go (each score replaces its own bias): -inf
      // for keys out of the row's range. A tile no row sees is skipped whole.
      bool seen = false;
      for (uint e = tid; e < ROWS * BC; e += WG) {
        const uint row = e / BC, c = e % BC;
        const uint i = i0 + row / HEADS;
        const uint j = tile + c;
        const uvec2 row_keys = row_key_range(keys, i);
        const uint end = i < ROWS_Q ? row_keys.y : 0u;
        // Without a window every row begins at key_begin, which no j here is before.
        const bool in_range = (!HAS_WINDOW || j >= row_keys.x) && j < end;
        const float bias = in_range ? mask_bias(mask_kind, pc.m_off + b * pc.m_sb + (h0 + row % HEADS) * pc.m_sh + i * pc.m_ss + j)
                                   : NEG_INF;
        sS[row * SS + c] = bias;
        seen = seen || bias != NEG_INF;
      }
      if (seen) atomicMax(sVisibleTile, tile + 1u);
    }
    barrier();
    if (mask_kind != MASK_NONE && sVisibleTile != tile + 1u) continue;  // uniform: every row masks the tile

    // 1-2. Scores of blocks of TPR keys; lane `lane` keeps key c0 + lane's.
    float tile_max[RPT];
    [[unroll]] for (uint r = 0u; r < RPT; ++r) tile_max[r] = -T_MAX;
    for (uint c0 = 0u; c0 < BC; c0 += TPR) {
      float part[RPT * TPR];
      [[unroll]] for (uint x = 0u; x < RPT * TPR; ++x) part[x] = 0.0;
      [[unroll]] for (uint kk = 0u; kk < TPR; ++kk)
        [[unroll]] for (uint t = 0u; t < DQKT; ++t) {
          const vec4 kv = shared_to_vec4(sK[(c0 + kk) * SK + lane + t * TPR]);
          [[unroll]] for (uint r = 0u; r < RPT; ++r) part[r * TPR + kk] += dot(q_reg[r * DQKT + t], kv);
        }
#if TILED_SHUFFLE
      // Reduce-scatter: at each step a lane keeps the half of its keys its bit `o` selects and adds
      // the partner's partial sums of that half; at the end part[r * TPR] is key c0 + lane's score.
#define SCATTER_STEP(o)                                                                 \
  {                                                                                     \
    const bool upper = (lane & o) != 0u;                                                \
    [[unroll]] for (uint r = 0u; r < RPT; ++r)                                          \
      [[unroll]] for (uint x = 0u; x < o; ++x) {                                        \
        const float lo = part[r * TPR + x], hi = part[r * TPR + x + o];                 \
        part[r * TPR + x] = (upper ? hi : lo) + subgroupShuffleXor(upper ? lo : hi, o); \
      }                                                                                 \
  }
      TPR_STEPS(SCATTER_STEP)
#endif
      const uint c = c0 + lane;
      const uint j = tile + c;
      [[unroll]] for (uint r = 0u; r < RPT; ++r) {
        const uint at = (group * RPT + r) * SS + c;
        // The staged mask (or the row's key range): a masked key's score is never used (its K may hold NaN).
        const bool in_range = (!HAS_WINDOW || j >= row_begin[r]) && j < row_end[r];
        const float bias = mask_kind != MASK_NONE ? sS[at] : in_range ? 0.0 : NEG_INF;
        const bool visible = bias != NEG_INF;
        float t = part[r * TPR];
        if (visible && (careful[r] || isinf(t) || isnan(t))) t = careful_score(q_row[r], c, vec_q);
        else t = clamp(t, -T_MAX, T_MAX);  // scale * (q . k) beyond the f32 range saturates
        if (MODIFIES_SCORES) {
          // The score modifiers (modify_score, modifiers.glsl) on the score in natural units: +-T_MAX is +-FLT_MAX
          // there (the product may round past it), and a finite result in [-FLT_MAX, FLT_MAX] comes
          // back within +-T_MAX. Inf/NaN scores (Inf/NaN inputs) stay as they are.
          const float s = isinf(t) ? t : saturate_finite(t * TWO_LN2);
          t = modify_score(s, slope[r], i0 + (group * RPT + r) / HEADS, j) * HALF_LOG2E;
        }
        // + bias, saturating unless one of them is infinite (score.glsl's add_bias, scaled).
        const float bt = bias * HALF_LOG2E;
        const bool finite = !(isinf(t) || isnan(t) || isinf(bt) || isnan(bt));
        const float biased = finite ? clamp(t + bt, -T_MAX, T_MAX) : t + bt;
        t = visible ? biased : NEG_INF;
        sS[at] = t;
        tile_max[r] = max(tile_max[r], t);
      }
    }

    // 2-3. The rows' maxima over the lanes; each lane's own weights and sums.
    [[unroll]] for (uint r = 0u; r < RPT; ++r) {
      const float m_new = max(m[r], group_max(tile_max[r]));
      const float dm = m[r] - m_new;
      const float alpha = exp2(dm + dm);
      l[r] *= alpha;
      [[unroll]] for (uint t = 0u; t < DVT; ++t) acc[r * DVT + t] *= alpha;
      m[r] = m_new;
    }
    for (uint c = lane; c < BC; c += TPR) {
      [[unroll]] for (uint r = 0u; r < RPT; ++r) {
        const uint at = (group * RPT + r) * SS + c;
        const float d = sS[at] - m[r];
        // -1: masked (the select below skips it). NaN (an unmasked NaN score) propagates.
        const float p = sS[at] == NEG_INF ? -1.0 : exp2(d + d);
        l[r] += p < 0.0 ? 0.0 : p;
        sS[at] = p;
      }
    }
#if TILED_SHUFFLE
    subgroupMemoryBarrierShared();  // the row group's weights, written by its own lanes
    subgroupBarrier();
#endif

    // 4. weight x V, each lane for its dim slices.
    for (uint c0 = 0u; c0 < BC; c0 += TPR) {
      [[unroll]] for (uint kk = 0u; kk < TPR; ++kk) {
        const uint c = c0 + kk;
        float p[RPT];
        [[unroll]] for (uint r = 0u; r < RPT; ++r) p[r] = sS[(group * RPT + r) * SS + c];
        [[unroll]] for (uint t = 0u; t < DVT; ++t) {
          const vec4 vv = shared_to_vec4(sV[c * SV + lane + t * TPR]);
          [[unroll]] for (uint r = 0u; r < RPT; ++r) {
            const uint x = r * DVT + t;
            acc[x] = mix(fma(vec4(p[r]), vv, acc[x]), acc[x], bvec4(p[r] < 0.0));
          }
        }
      }
    }
  }

  // The lanes' sums, merged once.
  [[unroll]] for (uint r = 0u; r < RPT; ++r) l[r] = group_sum(l[r]);

  [[unroll]] for (uint r = 0u; r < RPT; ++r) {
    const uint row = group * RPT + r;
    const uint i = i0 + row / HEADS;
    const uint h = h0 + row % HEADS;
    if (i >= ROWS_Q) continue;
    // The row's max in natural units (the LSE's).
    float m_natural = half_log2_to_natural(m[r]);
    // Unsplit, the sink joins the row's denominator here (split, the host gives it to the combine):
    // its factor rescales the accumulator. A row with no visible key (m = -T_MAX, l = 0) ends with
    // m = the sink and l = 1: O = 0 and LSE = the sink.
    float sink_factor = 1.0;
    if (!PARTIAL) sink_factor = add_head_sink(m_natural, l[r], h);
    // l == 0 only when every key of the row was masked (and no sink): O = 0 and LSE = -inf, never NaN.
    const bool empty = l[r] == 0.0;
    const float inv_l = empty ? 0.0 : sink_factor / l[r];
    if (PARTIAL) {
      const uint prow = partial_row(split, b, h, i);
      [[unroll]] for (uint t = 0u; t < DVT; ++t) {
        const uint d4 = lane + t * TPR;
        const vec4 val = acc[r * DVT + t] * inv_l;
        [[unroll]] for (uint c = 0u; c < 4u; ++c)
          if (d4 * 4u + c < DV) partial_o[prow * DV + d4 * 4u + c] = val[c];
      }
      // (max, sum), the max in units of log2(e)/2 (attention_combine.comp's half_log2_units).
      if (lane == 0u) {
        partial_lse[2u * prow] = empty ? NEG_INF : m[r];
        partial_lse[2u * prow + 1u] = l[r];
      }
    } else {
      const uint out_row = pc.o_off + b * pc.o_sb + h * pc.o_sh + query_row(i) * pc.o_ss;
      [[unroll]] for (uint t = 0u; t < DVT; ++t) {
        const uint d4 = lane + t * TPR;
        const vec4 val = acc[r * DVT + t] * inv_l;
        [[unroll]] for (uint c = 0u; c < 4u; ++c)
          if (d4 * 4u + c < DV) o[out_row + d4 * 4u + c] = from_f32(val[c]);
      }
      if (lane == 0u && (pc.flags & FLAG_WRITE_LSE) != 0u)
        lse[lse_index(b, h, i)] = empty ? NEG_INF : m_natural + log(l[r]);
    }
  }
}
