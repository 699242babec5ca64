#version 450
// Fused attention, one query row per invocation: the variant for CPU devices (llvmpipe), where the
// invocations of a workgroup are the lanes of SIMD vectors. Every shared-memory read below has an
// index that is the same for all invocations (key c, dim d4), and Q and the accumulator live in
// private arrays indexed by uniform loop counters, which llvmpipe keeps as whole vectors; the tiled
// kernel's per-lane shared-memory addresses become gathers there, several times slower.
//
// Semantics, bindings, push constants and the split-KV partial output are those of
// attention_fused.comp. Masked keys are removed with selects, not branches, so control flow stays
// uniform. host/attention_plan.cpp counts the loops below against lavapipe's 65535-iteration limit.

#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_push.glsl"

layout(constant_id = 0) const uint BR = 32;    // query rows per workgroup (= invocations)
layout(constant_id = 1) const uint TPR = 1;    // always 1 here; kept so both variants share ids
layout(constant_id = 2) const uint BC = 32;    // keys per tile
layout(constant_id = 3) const uint DQK = 64;
layout(constant_id = 4) const uint DV = 64;
layout(local_size_x_id = 5) in;                // BR

const uint DQK4 = (DQK + 3u) / 4u;
const uint DV4 = (DV + 3u) / 4u;

#include "attention_common.glsl"

shared vec4 sK[BC * DQK4];
shared vec4 sV[BC * DV4];



vec4 load_kv(bool is_k, uint base, uint d4, uint dim) {
  vec4 r = vec4(0.0);
  [[unroll]] for (uint c = 0u; c < 4u; ++c) {
    uint d = d4 * 4u + c;
    if (d < dim) r[c] = is_k ? to_f32(k[base + d]) : to_f32(v[base + d]);
  }
  return r;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint h = gl_WorkGroupID.y;
  const uint b = gl_WorkGroupID.z / pc.splits;
  const uint split = gl_WorkGroupID.z % pc.splits;
  const uint kvh = h / pc.group;
  const uint i0 = gl_WorkGroupID.x * BR;
  const uint i = i0 + tid;
  const bool row_valid = i < pc.seq_q;
  const uint causal = pc.flags & CAUSAL_MASK;
  const uint mask_kind = (pc.flags >> MASK_KIND_SHIFT) & 3u;

  const uvec2 keys = workgroup_key_range(split, b, min(i0 + BR, pc.seq_q) - 1u);
  const uint key_begin = keys.x, key_end = keys.y;
  const uint row_key_end = row_valid ? min(key_end, causal_key_end(causal, i)) : 0u;

  vec4 q_row[DQK4];
  const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh + min(i, pc.seq_q - 1u) * pc.q_ss;
  for (uint d4 = 0u; d4 < DQK4; ++d4) {
    vec4 r = vec4(0.0);
    [[unroll]] for (uint c = 0u; c < 4u; ++c)
      if (d4 * 4u + c < DQK) r[c] = to_f32(q[q_base + d4 * 4u + c]);
    q_row[d4] = r * pc.scale;  // scaled once here instead of once per score
  }

  const uint mask_row = pc.m_off + b * pc.m_sb + h * pc.m_sh + i * pc.m_ss;
  const uint k_head = pc.k_off + b * pc.k_sb + kvh * pc.k_sh;
  const uint v_head = pc.v_off + b * pc.v_sb + kvh * pc.v_sh;

  float m = M_INIT;
  float l = 0.0;
  vec4 acc[DV4];
  for (uint d4 = 0u; d4 < DV4; ++d4) acc[d4] = vec4(0.0);
  float scores[BC];

  for (uint tile = key_begin; tile < key_end; tile += BC) {
    barrier();
    for (uint e = tid; e < BC * DQK4; e += BR) {
      const uint c = e / DQK4, j = tile + c;
      sK[e] = j < key_end ? load_kv(true, k_head + j * pc.k_ss, e % DQK4, DQK) : vec4(0.0);
    }
    for (uint e = tid; e < BC * DV4; e += BR) {
      const uint c = e / DV4, j = tile + c;
      sV[e] = j < key_end ? load_kv(false, v_head + j * pc.v_ss, e % DV4, DV) : vec4(0.0);
    }
    barrier();

    float tile_max = M_INIT;
    // Key loops stay loops: unrolled over all BC keys with the dim loop inside, llvmpipe's JIT takes
    // minutes (DESIGN.md §5); the dim loops inside may unroll.
    [[dont_unroll]] for (uint c = 0u; c < BC; ++c) {
      const uint j = tile + c;
      vec4 partial = vec4(0.0);
      for (uint d4 = 0u; d4 < DQK4; ++d4) partial = fma(q_row[d4], sK[c * DQK4 + d4], partial);
      float s = partial.x + partial.y + partial.z + partial.w;
      // The mask is read only for visible keys (the index is clamped so no read leaves the mask).
      const float bias = mask_kind != MASK_NONE ? mask_bias(mask_kind, j < row_key_end ? mask_row + j : pc.m_off) : 0.0;
      // A key hidden by the mask stays -inf even when its K holds NaN or Inf.
      s = (j < row_key_end && bias != NEG_INF) ? s + bias : NEG_INF;
      scores[c] = s;
      tile_max = max(tile_max, s);
    }
    const float m_new = max(m, tile_max);
    const float alpha = exp(m - m_new);
    l *= alpha;
    for (uint d4 = 0u; d4 < DV4; ++d4) acc[d4] *= alpha;
    [[dont_unroll]] for (uint c = 0u; c < BC; ++c) {
      const bool visible = scores[c] != NEG_INF;
      const float p = visible ? exp(scores[c] - m_new) : 0.0;
      l += p;
      // A select, not a branch: a masked key's V (maybe NaN) is dropped, not multiplied by 0.
      for (uint d4 = 0u; d4 < DV4; ++d4) acc[d4] = mix(acc[d4], fma(vec4(p), sV[c * DV4 + d4], acc[d4]), bvec4(visible));
    }
    m = m_new;
  }

  if (!row_valid) return;
  const bool empty = l == 0.0;
  const float inv_l = empty ? 0.0 : 1.0 / l;
  const float row_lse = empty ? NEG_INF : m + log(l);
  if ((pc.flags & FLAG_PARTIAL) != 0u) {
    const uint rows_total = (gl_NumWorkGroups.z / pc.splits) * pc.heads * pc.seq_q;
    const uint prow = split * rows_total + (b * pc.heads + h) * pc.seq_q + i;
    for (uint d4 = 0u; d4 < DV4; ++d4) {
      const vec4 val = acc[d4] * inv_l;
      [[unroll]] for (uint c = 0u; c < 4u; ++c)
        if (d4 * 4u + c < DV) partial_o[prow * DV + d4 * 4u + c] = val[c];
    }
    partial_lse[prow] = row_lse;
  } else {
    const uint out_row = pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss;
    for (uint d4 = 0u; d4 < DV4; ++d4) {
      const vec4 val = acc[d4] * inv_l;
      [[unroll]] for (uint c = 0u; c < 4u; ++c)
        if (d4 * 4u + c < DV) o[out_row + d4 * 4u + c] = from_f32(val[c]);
    }
    if ((pc.flags & FLAG_WRITE_LSE) != 0u) lse[pc.lse_off + (b * pc.heads + h) * pc.seq_q + i] = row_lse;
  }
}
