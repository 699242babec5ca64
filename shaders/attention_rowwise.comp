#version 450
// Fused attention, four query rows per invocation: the variant for CPU devices (llvmpipe), where
// the invocations of a workgroup are the lanes of SIMD vectors. Every shared-memory read below has
// an index that is the same for all invocations (key c, dim d4); on llvmpipe each is still a gather,
// so each one feeds 16 multiply-adds: the four rows of an invocation travel together as the four
// components of a vec4 (qT[d] holds dim d of the four rows, scores and accumulators likewise).
// Private arrays indexed by uniform loop counters stay whole vectors there.
//
// Semantics, bindings, push constants and the split-KV partial output are those of
// attention_tiled.comp. Masked keys are removed with selects, not branches, so control flow stays
// uniform. runtime/attention_plan.cpp counts the loops below against lavapipe's 65535-iteration limit.

#extension GL_EXT_control_flow_attributes : enable
#define F16_WIDEN_BY_BITS  // a CPU devices' kernel: half_floats.glsl
#include "storage_types.glsl"
#include "attention_push.glsl"

layout(constant_id = SPEC_ATTENTION_BR) const uint BR = 32;    // query rows per workgroup (= 4 x invocations)
layout(constant_id = SPEC_ATTENTION_TPR) const uint TPR = 1;    // always 1 here; kept so both variants share ids
layout(constant_id = SPEC_ATTENTION_BC) const uint BC = 32;    // keys per tile
layout(constant_id = SPEC_ATTENTION_DQK) const uint DQK = 64;
layout(constant_id = SPEC_ATTENTION_DV) const uint DV = 64;
layout(local_size_x_id = SPEC_ATTENTION_WORKGROUP) in;                // BR / 4

const uint LANES = BR / 4u;

const uint DQK4 = VEC4S(DQK);
const uint DV4 = VEC4S(DV);

#include "attention_common.glsl"
#include "score.glsl"

// Sizes from shader_abi.h, which the host's shared-memory check uses too.
shared vec4 sK[ROWWISE_K_TILE(BC, DQK)];
shared vec4 sV[ROWWISE_V_TILE(BC, DV)];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint h = gl_WorkGroupID.y;
  const uint b = workgroup_batch();
  begin_sequence(b);
  const uint split = workgroup_split();
  const uint kvh = h / pc.group;
  const uint i0 = tile_first_row();
  // A packed sequence shorter than the grid's tiles (sized by the longest): this tile has no row.
  if (VARLEN && i0 >= ROWS_Q) return;  // (ROWS_Q: the rows computed; SEQ_Q aligns)
  // Component r of every vec4 below belongs to query row i[r].
  const uvec4 i = uvec4(i0 + tid) + uvec4(0u, LANES, 2u * LANES, 3u * LANES);
  const bvec4 row_valid = lessThan(i, uvec4(ROWS_Q));
  const uint mask_kind = (pc.flags >> MASK_KIND_SHIFT) & 3u;

  const uvec2 keys = workgroup_key_range(split, b, min(i0, ROWS_Q - 1u), min(i0 + BR, ROWS_Q) - 1u);
  const uint key_begin = keys.x, key_end = keys.y;
  // Each row's keys [row_key_begin, row_key_end): causal and the window cut the workgroup's range
  // (which may start at any key: tiles run from key_begin, not from a multiple of BC).
  uvec4 row_key_begin, row_key_end;
  [[unroll]] for (uint r = 0u; r < 4u; ++r) {
    const uvec2 range = row_valid[r] ? row_key_range(keys, i[r]) : uvec2(0u);
    row_key_begin[r] = range.x;
    row_key_end[r] = range.y;
  }
  const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;

  // Rows past seq_q read row seq_q - 1 (any valid row) and are never written.
  const uvec4 q_row = pc.q_off + b * pc.q_sb + h * pc.q_sh + (g_row_q + min(i, uvec4(ROWS_Q - 1u))) * pc.q_ss;
  vec4 qT[DQK4 * 4u];
  for (uint d4 = 0u; d4 < DQK4; ++d4) {
    const mat4 rows = mat4(load_row_vec4(TENSOR_Q, q_row[0], d4, DQK), load_row_vec4(TENSOR_Q, q_row[1], d4, DQK),
                           load_row_vec4(TENSOR_Q, q_row[2], d4, DQK), load_row_vec4(TENSOR_Q, q_row[3], d4, DQK));
    const mat4 dims = transpose(rows);
    [[unroll]] for (uint c = 0u; c < 4u; ++c) qT[d4 * 4u + c] = dims[c];
  }

  const uvec4 mask_row = pc.m_off + b * pc.m_sb + h * pc.m_sh + i * pc.m_ss;
  const uint k_head = kv_element_base(pc.k_off) + b * pc.k_sb + kvh * pc.k_sh;
  const uint v_head = kv_element_base(pc.v_off) + b * pc.v_sb + kvh * pc.v_sh;

  vec4 m = vec4(M_INIT);
  vec4 l = vec4(0.0);
  vec4 accT[DV4 * 4u];
  for (uint d = 0u; d < DV4 * 4u; ++d) accT[d] = vec4(0.0);
  vec4 scores[BC];

  for (uint tile = key_begin; tile < key_end; tile += BC) {
    barrier();
    for (uint e = tid; e < BC * DQK4; e += LANES) {
      const uint c = e / DQK4, j = tile + c;
      sK[e] = j < key_end ? load_row_vec4(TENSOR_K, k_head + key_row(b, j) * pc.k_ss, e % DQK4, DQK) : vec4(0.0);
    }
    for (uint e = tid; e < BC * DV4; e += LANES) {
      const uint c = e / DV4, j = tile + c;
      sV[e] = j < key_end ? load_row_vec4(TENSOR_V, v_head + key_row(b, j) * pc.v_ss, e % DV4, DV) : vec4(0.0);
    }
    barrier();

    vec4 tile_max = vec4(M_INIT);
    // Key loops stay loops: unrolled over all BC keys with the dim loop inside, llvmpipe's JIT takes
    // minutes (docs/devices.md); the dim loops inside may unroll.
    [[dont_unroll]] for (uint c = 0u; c < BC; ++c) {
      const uint j = tile + c;
      // Four partial sums (dims 4n, 4n+1, ...) as in the tiled kernel: one chain over all dims
      // loses f32 accuracy at dim 256.
      vec4 s0 = vec4(0.0), s1 = vec4(0.0), s2 = vec4(0.0), s3 = vec4(0.0);
      for (uint d4 = 0u; d4 < DQK4; ++d4) {
        const vec4 kd = sK[c * DQK4 + d4];
        s0 = fma(qT[d4 * 4u], vec4(kd.x), s0);
        s1 = fma(qT[d4 * 4u + 1u], vec4(kd.y), s1);
        s2 = fma(qT[d4 * 4u + 2u], vec4(kd.z), s2);
        s3 = fma(qT[d4 * 4u + 3u], vec4(kd.w), s3);
      }
      const vec4 dot_qk = (s0 + s1) + (s2 + s3);
      vec4 s = scale_dot(dot_qk, pc.scale);
      const bvec4 redo = bvec4(uvec4(isinf(dot_qk)) | uvec4(isnan(dot_qk)));
      if (any(redo)) {
        // Overflow of finite values, or a non-finite input: again with the operands scaled down.
        vec4 t0 = vec4(0.0), t1 = vec4(0.0), t2 = vec4(0.0), t3 = vec4(0.0);
        for (uint d4 = 0u; d4 < DQK4; ++d4) {
          const vec4 kd = sK[c * DQK4 + d4] * DOWN;
          t0 = fma(qT[d4 * 4u] * DOWN, vec4(kd.x), t0);
          t1 = fma(qT[d4 * 4u + 1u] * DOWN, vec4(kd.y), t1);
          t2 = fma(qT[d4 * 4u + 2u] * DOWN, vec4(kd.z), t2);
          t3 = fma(qT[d4 * 4u + 3u] * DOWN, vec4(kd.w), t3);
        }
        const vec4 down = (t0 + t1) + (t2 + t3);
        [[unroll]] for (uint r = 0u; r < 4u; ++r)
          if (redo[r]) s[r] = scale_rescaled_dot(down[r], pc.scale);
      }
      // The score modifiers, before the float mask (modify_score, modifiers.glsl); compiled away when off.
      if (MODIFIES_SCORES) {
        [[unroll]] for (uint r = 0u; r < 4u; ++r) s[r] = modify_score(s[r], slope, i[r], j);
      }
      const bvec4 in_range = bvec4(uvec4(greaterThanEqual(uvec4(j), row_key_begin)) & uvec4(lessThan(uvec4(j), row_key_end)));
      vec4 bias = vec4(0.0);
      if (mask_kind != MASK_NONE) {
        // The mask is read only for visible keys (other reads fall on its first element).
        [[unroll]] for (uint r = 0u; r < 4u; ++r) bias[r] = mask_bias(mask_kind, in_range[r] ? mask_row[r] + j : pc.m_off);
      }
      // A key hidden by the mask stays -inf even when its K holds NaN or Inf.
      const bvec4 visible = bvec4(uvec4(in_range) & uvec4(notEqual(bias, vec4(NEG_INF))));
      s = mix(vec4(NEG_INF), add_bias(s, bias), visible);
      scores[c] = s;
      tile_max = max(tile_max, s);
    }
    const vec4 m_new = max(m, tile_max);
    const vec4 alpha = exp(m - m_new);
    l *= alpha;
    for (uint d = 0u; d < DV4 * 4u; ++d) accT[d] *= alpha;
    [[dont_unroll]] for (uint c = 0u; c < BC; ++c) {
      const bvec4 visible = notEqual(scores[c], vec4(NEG_INF));
      const vec4 p = mix(vec4(0.0), exp(scores[c] - m_new), visible);
      l += p;
      // Selects, not branches: a masked key's V (maybe NaN) is dropped, not multiplied by 0.
      for (uint d4 = 0u; d4 < DV4; ++d4) {
        const vec4 vd = sV[c * DV4 + d4];
        accT[d4 * 4u] = mix(accT[d4 * 4u], fma(p, vec4(vd.x), accT[d4 * 4u]), visible);
        accT[d4 * 4u + 1u] = mix(accT[d4 * 4u + 1u], fma(p, vec4(vd.y), accT[d4 * 4u + 1u]), visible);
        accT[d4 * 4u + 2u] = mix(accT[d4 * 4u + 2u], fma(p, vec4(vd.z), accT[d4 * 4u + 2u]), visible);
        accT[d4 * 4u + 3u] = mix(accT[d4 * 4u + 3u], fma(p, vec4(vd.w), accT[d4 * 4u + 3u]), visible);
      }
    }
    m = m_new;
  }

  const bool partial = PARTIAL;
  // The sink joins each row's denominator once: here when the call is not split (a split call's
  // combine adds it). A row with no visible key (m = M_INIT, l = 0)
  // ends with l = 1 and m = the sink: O = 0, LSE = the sink. The accumulators' factor goes into 1 / l
  // (no extra loop over them: lavapipe's loop limit, runtime/attention_plan.cpp).
  vec4 acc_factor = vec4(1.0);
  if (!partial) {
    [[unroll]] for (uint r = 0u; r < 4u; ++r) {
      float mr = m[r], lr = l[r];
      acc_factor[r] = add_head_sink(mr, lr, h);
      m[r] = mr;
      l[r] = lr;
    }
  }

  // l == 0 only for rows whose every key was masked (and no sink): O = 0 and LSE = -inf, never NaN.
  const bvec4 empty = equal(l, vec4(0.0));
  const vec4 inv_l = mix(acc_factor / l, vec4(0.0), empty);
  const vec4 row_lse = mix(m + log(l), vec4(NEG_INF), empty);
  for (uint r = 0u; r < 4u; ++r) {
    if (!row_valid[r]) continue;
    if (partial) {
      const uint prow = partial_row(split, b, h, i[r]);
      for (uint d = 0u; d < DV; ++d) partial_o[prow * DV + d] = accT[d][r] * inv_l[r];
      partial_lse[2u * prow] = empty[r] ? NEG_INF : m[r];  // (max, sum): attention_tiled.comp
      partial_lse[2u * prow + 1u] = l[r];
    } else {
      const uint out_row = pc.o_off + b * pc.o_sb + h * pc.o_sh + query_row(i[r]) * pc.o_ss;
      for (uint d = 0u; d < DV; ++d) o[out_row + d] = from_f32(accT[d][r] * inv_l[r]);
      if ((pc.flags & FLAG_WRITE_LSE) != 0u) lse[lse_index(b, h, i[r])] = row_lse[r];
    }
  }
}
