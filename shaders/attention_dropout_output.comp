#version 450
// Dropout's output pass (the contract: docs/semantics.md, "Dropout"): after a forward call has written
// its LSE (dropout does not change it), O is formed again with each weight's dropout factor,
//   O_i = Σ_j e^(s_ij - LSE_i) Z_ij V_j,   Z = keep / (1 - p),
// the scores formed as the forward formed them (score.glsl, modifiers.glsl) and Z drawn from the same
// generator the backward pass draws it from (philox.glsl). An invocation owns one query row of one
// head and walks the keys its workgroup's rows can see; a fully masked row stays 0. It writes O at
// the GRAD_A binding (its element offset in o_off's high half), in O's strides. The grid: x tiles of
// WORKGROUP rows, y heads, z batch elements or packed sequences. The walk is one loop over the keys:
// on lavapipe the host refuses a call whose keys would pass its loop limit.
#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer OutBuf { STORAGE_T o_out[]; };

void main() {
  const uint h = gl_WorkGroupID.y, g = h / pc.group, b = gl_WorkGroupID.z;
  begin_sequence(b);
  const uint i0 = gl_WorkGroupID.x * WORKGROUP;
  if (i0 >= g_rows_q) return;  // (uniform)
  const uint i = i0 + gl_LocalInvocationID.x;
  const bool in_rows = i < g_rows_q;
  const uint row = min(i, g_rows_q - 1u);
  const float row_lse = lse[lse_offset() + row_index(b, h, row)];
  const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;

  float qi[DQK], acc[DV];
  const uint q_base = low_half(pc.q_off) + q_row(b, h, row);
  [[unroll]] for (uint d = 0u; d < DQK; ++d) qi[d] = to_f32(q[q_base + d]);
  [[unroll]] for (uint d = 0u; d < DV; ++d) acc[d] = 0.0;

  const uint last = min(i0 + WORKGROUP, g_rows_q) - 1u;
  const uint begin = HAS_WINDOW ? window_key_begin(i0) : 0u;
  uint end = min(sequence_key_end(b), causal_key_end(pc.flags & CAUSAL_MASK, last));
  if (HAS_WINDOW) end = min(end, window_key_end(last));
  for (uint j = begin; j < end; ++j) {
    float bias;
    if (!in_rows || !key_visible(b, h, row, j, bias)) continue;
    const uint k_base = low_half(pc.k_off) + k_row(b, g, j), v_base = low_half(pc.v_off) + v_row(b, g, j);
    float dot = 0.0;
    [[unroll]] for (uint d = 0u; d < DQK; ++d) dot += qi[d] * to_f32(k[k_base + d]);
    float cap_derivative;
    const float s = backward_score(dot, slope, row, j, bias, cap_derivative);
    const float z = dropout_factor(b, h, row, j);
    if (z == 0.0) continue;  // a dropped weight: its V never joins O (NaN in it included)
    const float w = exp(s - row_lse) * z;
    [[unroll]] for (uint d = 0u; d < DV; ++d) acc[d] += w * to_f32(v[v_base + d]);
  }
  if (!in_rows) return;
  const uint o_base = high_half(pc.o_off) + o_row(b, h, i);
  [[unroll]] for (uint d = 0u; d < DV; ++d) o_out[o_base + d] = from_f32(acc[d]);
}
