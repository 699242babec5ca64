#version 450
// The dQ kernel for CPU devices (lavapipe): attention_backward_q.comp's sums (the keys in the same
// order per row; each dot as LANES partial sums), with a workgroup of one subgroup of LANES whose lanes own ROWS query rows each (i = i0 + r *
// LANES + lane). Per key the lanes load its K and V one element each and pass them around with
// subgroupShuffle at constant lane indices (docs/devices.md), so one lane-by-lane load feeds every
// lane's rows. The key walk is a real loop (lavapipe's limit: the host splits it).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#define F16_WIDEN_BY_BITS  // a CPU devices' kernel: half_floats.glsl
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(constant_id = SPEC_BACKWARD_ROWS) const uint ROWS = 1u;
const uint LANES = WORKGROUP;
const uint QK_CHUNKS = (DQK + LANES - 1u) / LANES, V_CHUNKS = (DV + LANES - 1u) / LANES;

layout(binding = BACKWARD_ROWS_BINDING) readonly buffer RowsBuf { float row_d[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DqBuf { STORAGE_T dq_out[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DqPartBuf { float dq_part[]; };

void main() {
  const uint h = gl_WorkGroupID.y, g = h / pc.group, lane = gl_SubgroupInvocationID;
  const uint keys_total = VARLEN ? pc.m_sh : pc.seq_k;
  const uint splits = split_count(keys_total);
  const uint batches = gl_NumWorkGroups.z / splits;
  const uint b = gl_WorkGroupID.z % batches, split = gl_WorkGroupID.z / batches;
  begin_sequence(b);
  const uint i0 = gl_WorkGroupID.x * LANES * ROWS;
  if (i0 >= g_rows_q) return;  // (uniform)
  const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;

  float qi[ROWS][DQK], doi[ROWS][DV], dq[ROWS][DQK], row_lse[ROWS], row_dd[ROWS];
  uint query[ROWS];
  bool in_rows[ROWS];
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    query[r] = i0 + r * LANES + lane;
    in_rows[r] = query[r] < g_rows_q;
    const uint row = min(query[r], g_rows_q - 1u);
    const uint ri = row_index(b, h, row);
    row_lse[r] = lse[lse_offset() + ri];
    row_dd[r] = row_d[ri];
    const uint q_base = low_half(pc.q_off) + q_row(b, h, row), do_base = high_half(pc.o_off) + o_row(b, h, row);
    [[unroll]] for (uint d = 0u; d < DQK; ++d) {
      qi[r][d] = to_f32(q[q_base + d]);
      dq[r][d] = 0.0;
    }
    [[unroll]] for (uint d = 0u; d < DV; ++d) doi[r][d] = to_f32(grad_out[do_base + d]);
  }

  // The keys any row of the workgroup sees, within this split.
  const uint last = min(i0 + LANES * ROWS, g_rows_q) - 1u;
  const uint begin = max(split * pc.split, HAS_WINDOW ? window_key_begin(i0) : 0u);
  uint end = min(min(sequence_key_end(b), (split + 1u) * pc.split), causal_key_end(pc.flags & CAUSAL_MASK, last));
  if (HAS_WINDOW) end = min(end, window_key_end(last));
  for (uint j = begin; j < end; ++j) {
    const uint k_base = low_half(pc.k_off) + k_row(b, g, j), v_base = low_half(pc.v_off) + v_row(b, g, j);
    // K and V of key j: element c * LANES + lane loaded by this lane, handed to every lane with
    // subgroupShuffle at constant lanes right where it is used (no lane holds the whole key).
    float k_part[QK_CHUNKS], v_part[V_CHUNKS];
    [[unroll]] for (uint c = 0u; c < QK_CHUNKS; ++c) {
      const uint d = c * LANES + lane;
      k_part[c] = d < DQK ? to_f32(k[k_base + min(d, DQK - 1u)]) : 0.0;
    }
    [[unroll]] for (uint c = 0u; c < V_CHUNKS; ++c) {
      const uint d = c * LANES + lane;
      v_part[c] = d < DV ? to_f32(v[v_base + min(d, DV - 1u)]) : 0.0;
    }
    // The dot Q·K as LANES partial sums, added up at the end: independent chains of multiply-adds,
    // where one running sum waited on each. dO·V is one running sum in the rows kernel's order and
    // form (D = Σ dO·O): where a row's weight is all on one key, O is that key's V and dP - D must
    // come out exactly 0.
    float dot_part[ROWS][LANES], dp[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      [[unroll]] for (uint t = 0u; t < LANES; ++t) dot_part[r][t] = 0.0;
      dp[r] = 0.0;
    }
    [[unroll]] for (uint c = 0u; c < QK_CHUNKS; ++c)
      [[unroll]] for (uint t = 0u; t < LANES; ++t) {
        const uint d = c * LANES + t;
        if (d < DQK) {
          const float kd = subgroupShuffle(k_part[c], t);
          [[unroll]] for (uint r = 0u; r < ROWS; ++r) dot_part[r][t] = fma(qi[r][d], kd, dot_part[r][t]);
        }
      }
    [[unroll]] for (uint c = 0u; c < V_CHUNKS; ++c)
      [[unroll]] for (uint t = 0u; t < LANES; ++t) {
        const uint d = c * LANES + t;
        if (d < DV) {
          const float vd = subgroupShuffle(v_part[c], t);
          [[unroll]] for (uint r = 0u; r < ROWS; ++r) dp[r] += doi[r][d] * vd;
        }
      }
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      float bias;
      const bool visible = in_rows[r] && key_visible(b, h, query[r], j, bias);
      float dot = 0.0;
      [[unroll]] for (uint t = 0u; t < LANES; ++t) dot += dot_part[r][t];
      float cap_derivative;
      const float s = backward_score(dot, slope, query[r], j, bias, cap_derivative);
      const float p = visible ? exp(s - row_lse[r]) : 0.0;
      const float z = visible ? dropout_factor(b, h, query[r], j) : 0.0;
      const float ds = visible ? p * (dp[r] * z - row_dd[r]) * cap_derivative : 0.0;
      // (A hidden key adds nothing, not 0 × its K: it may hold NaN.)
      if (visible) {
        [[unroll]] for (uint c = 0u; c < QK_CHUNKS; ++c)
          [[unroll]] for (uint t = 0u; t < LANES; ++t) {
            const uint d = c * LANES + t;
            if (d < DQK) dq[r][d] = fma(ds, subgroupShuffle(k_part[c], t), dq[r][d]);
          }
      }
    }
  }

  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    if (!in_rows[r]) continue;
    const uint i = query[r];
    if (PARTIAL) {
      const uint row_slot = partial_slot(split, batches, b, pc.heads, h, pc.seq_q, g_row_q + i);
      [[unroll]] for (uint d = 0u; d < DQK; ++d) dq_part[row_slot * DQK + d] = dq[r][d] * pc.scale;
    } else {
      const uint dq_base = high_half(pc.q_off) + q_row(b, h, i);
      [[unroll]] for (uint d = 0u; d < DQK; ++d) dq_out[dq_base + d] = from_f32(dq[r][d] * pc.scale);
    }
  }
}
