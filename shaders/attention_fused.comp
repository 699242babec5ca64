#version 450
// Fused scaled dot-product attention (flash-style, one pass). README.md, "How it works".
//
// A workgroup owns BR query rows of one (batch, head) and one key split. TPR invocations share each
// row. Key tiles of BC keys (K and V) are staged through shared memory as f32; each invocation
// computes the scores of keys lane, lane+TPR, ... of its row, then every invocation of the row updates
// the online softmax (running max m, running sum l, both f32) and its slice of the f32 output
// accumulator. Key tiles past the last visible key of the workgroup (causal, key padding, end of the
// split) are not visited.
//
// Masked keys are skipped, not weighted by zero, so NaN/Inf in a masked K or V row never reaches O.
// With FLAG_PARTIAL the normalised partial O and its (max, sum) go to the workspace for
// attention_combine.comp, which merges the splits.
//
// lavapipe ends every invocation's loops after 65535 iterations in total (docs/devices.md); the host
// bounds keys_per_split so that the iterations counted in host/attention_plan.cpp stay below that.
// Keep that count in step with the loops here.

#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_push.glsl"

layout(constant_id = SPEC_ATTENTION_BR) const uint BR = 16;    // query rows per workgroup
layout(constant_id = SPEC_ATTENTION_TPR) const uint TPR = 8;    // invocations per query row
layout(constant_id = SPEC_ATTENTION_BC) const uint BC = 32;    // keys per tile
layout(constant_id = SPEC_ATTENTION_DQK) const uint DQK = 64;   // head dim of Q and K
layout(constant_id = SPEC_ATTENTION_DV) const uint DV = 64;    // head dim of V and O
layout(local_size_x_id = SPEC_ATTENTION_WORKGROUP) in;                // BR * TPR (set by the host)

const uint WG = BR * TPR;
const uint DQK4 = VEC4S(DQK);                  // vec4s per Q/K row
const uint KSTRIDE = FUSED_K_STRIDE(DQK);      // padded K row: spreads a tile's rows over banks
const uint DV4 = VEC4S(DV);                    // vec4s per V row
const uint DVT = (DV4 + TPR - 1u) / TPR;       // accumulator vec4s per invocation
const uint VSTRIDE = FUSED_V_STRIDE(DV, TPR);  // V row padded so every invocation's slice exists

#include "attention_common.glsl"
#include "score.glsl"

// Sizes from shader_abi.h, which the host's shared-memory check uses too.
shared vec4 sQ[FUSED_Q_TILE(BR, DQK)];
shared vec4 sK[FUSED_K_TILE(BC, DQK)];
shared vec4 sV[FUSED_V_TILE(BC, DV, TPR)];
shared float sS[FUSED_S_TILE(BR, BC)];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row = tid / TPR;
  const uint lane = tid % TPR;
  const uint h = gl_WorkGroupID.y;
  const uint b = gl_WorkGroupID.z / pc.splits;
  const uint split = pc.split_base + gl_WorkGroupID.z % pc.splits;
  const uint kvh = h / pc.group;
  const uint i0 = tile_first_row();
  const uint i = i0 + row;
  const bool row_valid = i < pc.seq_q;
  const uint causal = pc.flags & CAUSAL_MASK;
  const uint mask_kind = (pc.flags >> MASK_KIND_SHIFT) & 3u;

  const uvec2 keys = workgroup_key_range(split, b, min(i0 + BR, pc.seq_q) - 1u);
  const uint key_begin = keys.x, key_end = keys.y;
  // Keys visible to this invocation's row (the per-row causal cut inside the last tiles).
  const uint row_key_end = row_valid ? min(key_end, causal_key_end(causal, i)) : 0u;

  for (uint e = tid; e < BR * DQK4; e += WG) {
    const uint r = e / DQK4, d4 = e % DQK4;
    const uint qi = i0 + r;
    sQ[e] = qi < pc.seq_q ? load_row_vec4(TENSOR_Q, pc.q_off + b * pc.q_sb + h * pc.q_sh + qi * pc.q_ss, d4, DQK)
                          : vec4(0.0);
  }

  const uint mask_row = pc.m_off + b * pc.m_sb + h * pc.m_sh + i * pc.m_ss;
  const uint k_head = pc.k_off + b * pc.k_sb + kvh * pc.k_sh;
  const uint v_head = pc.v_off + b * pc.v_sb + kvh * pc.v_sh;

  float m = M_INIT;
  float l = 0.0;
  vec4 acc[DVT];
  [[unroll]] for (uint t = 0u; t < DVT; ++t) acc[t] = vec4(0.0);

  for (uint tile = key_begin; tile < key_end; tile += BC) {
    barrier();  // the previous tile's sK, sV and sS are no longer read
    for (uint e = tid; e < BC * DQK4; e += WG) {
      const uint c = e / DQK4, d4 = e % DQK4;
      const uint j = tile + c;
      sK[c * KSTRIDE + d4] = j < key_end ? load_row_vec4(TENSOR_K, k_head + binding_key(j) * pc.k_ss, d4, DQK) : vec4(0.0);
    }
    for (uint e = tid; e < BC * VSTRIDE; e += WG) {
      const uint c = e / VSTRIDE, d4 = e % VSTRIDE;
      const uint j = tile + c;
      sV[e] = (j < key_end && d4 < DV4) ? load_row_vec4(TENSOR_V, v_head + binding_key(j) * pc.v_ss, d4, DV) : vec4(0.0);
    }
    barrier();

    for (uint c = lane; c < BC; c += TPR) {
      const uint j = tile + c;
      float s = NEG_INF;
      // The explicit mask is read first: a masked key's K row is never read (it may hold NaN).
      const float bias = (j < row_key_end && mask_kind != MASK_NONE) ? mask_bias(mask_kind, mask_row + j) : 0.0;
      if (j < row_key_end && bias != NEG_INF) {
        vec4 partial = vec4(0.0);
        for (uint d4 = 0u; d4 < DQK4; ++d4) partial = fma(sQ[row * DQK4 + d4], sK[c * KSTRIDE + d4], partial);
        const float dot_qk = partial.x + partial.y + partial.z + partial.w;
        if (isinf(dot_qk) || isnan(dot_qk)) {
          // Overflow of finite values, or a non-finite input: again with the operands scaled down.
          vec4 down = vec4(0.0);
          for (uint d4 = 0u; d4 < DQK4; ++d4) down = fma(sQ[row * DQK4 + d4] * DOWN, sK[c * KSTRIDE + d4] * DOWN, down);
          s = scale_rescaled_dot(down.x + down.y + down.z + down.w, pc.scale);
        } else {
          s = scale_dot(dot_qk, pc.scale);
        }
        s = add_bias(s, bias);
      }
      sS[row * BC + c] = s;
    }
    barrier();

    // Online softmax: every invocation of the row reads the whole row of scores (cheaper than a
    // cross-invocation reduction at these tile sizes) and rescales its own accumulator slice.
    float tile_max = M_INIT;
    for (uint c = 0u; c < BC; ++c) tile_max = max(tile_max, sS[row * BC + c]);
    const float m_new = max(m, tile_max);
    const float alpha = exp(m - m_new);
    l *= alpha;
    [[unroll]] for (uint t = 0u; t < DVT; ++t) acc[t] *= alpha;
    for (uint c = 0u; c < BC; ++c) {
      const float s = sS[row * BC + c];
      if (s == NEG_INF) continue;  // masked: its V row must not be touched (it may hold NaN)
      const float p = exp(s - m_new);
      l += p;
      [[unroll]] for (uint t = 0u; t < DVT; ++t) acc[t] = fma(vec4(p), sV[c * VSTRIDE + lane + t * TPR], acc[t]);
    }
    m = m_new;
  }

  if (!row_valid) return;
  // l == 0 only when every key of the row was masked: O = 0 and LSE = -inf, never NaN.
  const bool empty = l == 0.0;
  const float inv_l = empty ? 0.0 : 1.0 / l;
  const float row_lse = empty ? NEG_INF : m + log(l);

  if ((pc.flags & FLAG_PARTIAL) != 0u) {
    const uint prow = partial_row(split, b, h, i);
    [[unroll]] for (uint t = 0u; t < DVT; ++t) {
      const uint d4 = lane + t * TPR;
      const vec4 val = acc[t] * inv_l;
      [[unroll]] for (uint c = 0u; c < 4u; ++c)
        if (d4 * 4u + c < DV) partial_o[prow * DV + d4 * 4u + c] = val[c];
    }
    // (max, sum) rather than max + log(sum): near +-FLT_MAX the f32 sum m + log(l) is m, and the
    // combine would lose each split's count of saturated (tied) scores.
    if (lane == 0u) {
      partial_lse[2u * prow] = empty ? NEG_INF : m;
      partial_lse[2u * prow + 1u] = l;
    }
  } else {
    const uint out_row = pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss;
    [[unroll]] for (uint t = 0u; t < DVT; ++t) {
      const uint d4 = lane + t * TPR;
      const vec4 val = acc[t] * inv_l;
      [[unroll]] for (uint c = 0u; c < 4u; ++c)
        if (d4 * 4u + c < DV) o[out_row + d4 * 4u + c] = from_f32(val[c]);
    }
    if (lane == 0u && (pc.flags & FLAG_WRITE_LSE) != 0u) lse[pc.lse_off + (b * pc.heads + h) * pc.seq_q + i] = row_lse;
  }
}
