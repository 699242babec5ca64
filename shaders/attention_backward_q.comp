#version 450
// The backward pass's query-outer kernel: dQ (the contract: docs/semantics.md, "Backward";
// FlashAttention 2's plan). An invocation owns one query row i of one head h and keeps its Q and dO
// rows and its dQ accumulator (f32) in registers; it walks the keys its workgroup's rows can see,
// forming each visible pair's score again:
//   P = e^(s - LSE_i),  dS = P (Z dO_i·V_j - D_i) (softcap: × (1 - tanh²)),  dQ_i += dS K_j,
// and dQ_i is scaled by `scale` at the end. Z is dropout's factor (1 without). The grid: x tiles of
// WORKGROUP rows, y heads, z split * batches + b; a split takes pc.split keys (lavapipe's loop limit),
// and with several splits each writes its f32 partial sums to the workspace, [split][batch][head][row]
// [dim], which attention_backward_reduce.comp adds in split order.
#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(binding = BACKWARD_ROWS_BINDING) readonly buffer RowsBuf { float row_d[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DqBuf { STORAGE_T dq_out[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DqPartBuf { float dq_part[]; };

void main() {
  const uint h = gl_WorkGroupID.y, g = h / pc.group;
  const uint keys_total = VARLEN ? pc.m_sh : pc.seq_k;
  const uint splits = split_count(keys_total);
  const uint batches = gl_NumWorkGroups.z / splits;
  const uint b = gl_WorkGroupID.z % batches, split = gl_WorkGroupID.z / batches;
  begin_sequence(b);
  const uint i0 = gl_WorkGroupID.x * WORKGROUP;
  if (i0 >= g_rows_q) return;  // (uniform)
  const uint i = i0 + gl_LocalInvocationID.x;
  const bool in_rows = i < g_rows_q;
  const uint row = min(i, g_rows_q - 1u);
  const uint r = row_index(b, h, row);
  const float row_lse = lse[lse_offset() + r], row_dd = row_d[r];
  const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;

  float qi[DQK], doi[DV], dq[DQK];
  const uint q_base = low_half(pc.q_off) + q_row(b, h, row);
  const uint do_base = high_half(pc.o_off) + o_row(b, h, row);
  [[unroll]] for (uint d = 0u; d < DQK; ++d) {
    qi[d] = to_f32(q[q_base + d]);
    dq[d] = 0.0;
  }
  [[unroll]] for (uint d = 0u; d < DV; ++d) doi[d] = to_f32(grad_out[do_base + d]);

  // The keys any row of the workgroup sees, within this split (as the fused kernels' workgroup_key_range).
  const uint last = min(i0 + WORKGROUP, g_rows_q) - 1u;
  uint begin = max(split * pc.split, HAS_WINDOW ? window_key_begin(i0) : 0u);
  uint end = min(min(sequence_key_end(b), (split + 1u) * pc.split), causal_key_end(pc.flags & CAUSAL_MASK, last));
  if (HAS_WINDOW) end = min(end, window_key_end(last));
  for (uint j = begin; j < end; ++j) {
    float bias;
    if (!in_rows || !key_visible(b, h, row, j, bias)) continue;
    const uint k_base = low_half(pc.k_off) + k_row(b, g, j);
    const uint v_base = low_half(pc.v_off) + v_row(b, g, j);
    float dot = 0.0, dp = 0.0;
    [[unroll]] for (uint d = 0u; d < DQK; ++d) dot += qi[d] * to_f32(k[k_base + d]);
    [[unroll]] for (uint d = 0u; d < DV; ++d) dp += doi[d] * to_f32(v[v_base + d]);
    float cap_derivative;
    const float s = backward_score(dot, slope, row, j, bias, cap_derivative);
    const float p = exp(s - row_lse);
    const float ds = p * (dp * dropout_factor(b, h, row, j) - row_dd) * cap_derivative;
    [[unroll]] for (uint d = 0u; d < DQK; ++d) dq[d] += ds * to_f32(k[k_base + d]);
  }

  if (!in_rows) return;
  if (PARTIAL) {
    const uint row_slot = partial_slot(split, batches, b, pc.heads, h, pc.seq_q, g_row_q + i);
    [[unroll]] for (uint d = 0u; d < DQK; ++d) dq_part[row_slot * DQK + d] = dq[d] * pc.scale;
  } else {
    const uint dq_base = high_half(pc.q_off) + q_row(b, h, i);
    [[unroll]] for (uint d = 0u; d < DQK; ++d) dq_out[dq_base + d] = from_f32(dq[d] * pc.scale);
  }
}
