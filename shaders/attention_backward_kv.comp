#version 450
// The backward pass's key-outer kernel: dK and dV (the contract: docs/semantics.md, "Backward";
// FlashAttention 2's plan). An invocation owns one key j of one KV head g and keeps its K and V rows
// and its dK and dV accumulators (f32) in registers; it walks the query rows of every query head of
// the GQA group (so dK and dV are summed over the group without atomics, in a fixed order) that can
// see a key of its workgroup, forming each visible pair's score again:
//   P = e^(s - LSE_i),  dV_j += P Z dO_i,  dS = P (Z dO_i·V_j - D_i) (softcap: × (1 - tanh²)),
//   dK_j += dS Q_i,  and dK_j is scaled by `scale` at the end.
// Z is dropout's factor (1 without). Masked pairs are skipped, so NaN/Inf in a masked key's or row's
// values never reaches a gradient. The grid: x tiles of WORKGROUP keys, y KV heads, z split * batches
// + b; a split takes pc.split query rows (the host bounds each invocation's loop iterations by it,
// lavapipe's limit), and with several splits each writes its f32 partial sums to the workspace,
// [split][batch][KV head][key][dim], which attention_backward_reduce.comp adds in split order.
#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(binding = BACKWARD_ROWS_BINDING) readonly buffer RowsBuf { float row_d[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DkBuf { STORAGE_T dk_out[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DkPartBuf { float dk_part[]; };
layout(binding = BACKWARD_GRAD_B_BINDING) writeonly buffer DvBuf { STORAGE_T dv_out[]; };
layout(binding = BACKWARD_GRAD_B_BINDING) writeonly buffer DvPartBuf { float dv_part[]; };

void main() {
  const uint g = gl_WorkGroupID.y;
  const uint rows_total = VARLEN ? pc.m_sb : pc.seq_q;
  const uint splits = split_count(rows_total);
  const uint batches = gl_NumWorkGroups.z / splits;
  const uint b = gl_WorkGroupID.z % batches, split = gl_WorkGroupID.z / batches;
  begin_sequence(b);
  const uint j0 = gl_WorkGroupID.x * WORKGROUP;
  const uint j = j0 + gl_LocalInvocationID.x;
  if (j0 >= g_keys_seen) return;  // (uniform: the workgroup's keys are past its sequence's)
  const uint key_end = sequence_key_end(b);
  const bool live = j < key_end;

  float kj[DQK], vj[DV], dk[DQK], dv[DV];
  const uint k_base = low_half(pc.k_off) + k_row(b, g, min(j, max(key_end, 1u) - 1u));
  const uint v_base = low_half(pc.v_off) + v_row(b, g, min(j, max(key_end, 1u) - 1u));
  [[unroll]] for (uint d = 0u; d < DQK; ++d) {
    kj[d] = live ? to_f32(k[k_base + d]) : 0.0;
    dk[d] = 0.0;
  }
  [[unroll]] for (uint d = 0u; d < DV; ++d) {
    vj[d] = live ? to_f32(v[v_base + d]) : 0.0;
    dv[d] = 0.0;
  }

  if (j0 < key_end) {
    uvec2 rows = query_rows_of_keys(j0, min(j0 + WORKGROUP, key_end));
    rows.x = max(rows.x, split * pc.split);
    rows.y = min(rows.y, min(rows_total, (split + 1u) * pc.split));
    for (uint hh = 0u; hh < pc.group; ++hh) {
      const uint h = g * pc.group + hh;
      const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;
      for (uint i = rows.x; i < rows.y; ++i) {
        float bias;
        if (!live || !key_visible(b, h, i, j, bias)) continue;
        const uint r = row_index(b, h, i);
        const float row_lse = lse[lse_offset() + r], row_dd = row_d[r];
        const uint q_base = low_half(pc.q_off) + q_row(b, h, i);
        const uint do_base = high_half(pc.o_off) + o_row(b, h, i);
        float dot = 0.0, dp = 0.0;
        [[unroll]] for (uint d = 0u; d < DQK; ++d) dot += to_f32(q[q_base + d]) * kj[d];
        [[unroll]] for (uint d = 0u; d < DV; ++d) dp += to_f32(grad_out[do_base + d]) * vj[d];
        float cap_derivative;
        const float s = backward_score(dot, slope, i, j, bias, cap_derivative);
        const float p = exp(s - row_lse);
        const float z = dropout_factor(b, h, i, j);
        const float pz = p * z;
        const float ds = p * (dp * z - row_dd) * cap_derivative;
        [[unroll]] for (uint d = 0u; d < DV; ++d) dv[d] += pz * to_f32(grad_out[do_base + d]);
        [[unroll]] for (uint d = 0u; d < DQK; ++d) dk[d] += ds * to_f32(q[q_base + d]);
      }
    }
  }

  if (j >= g_keys_seen) return;
  if (PARTIAL) {
    const uint kv_heads = pc.heads / pc.group;
    const uint key_slot = partial_slot(split, batches, b, kv_heads, g, pc.seq_k, g_row_k + j);
    [[unroll]] for (uint d = 0u; d < DQK; ++d) dk_part[key_slot * DQK + d] = dk[d] * pc.scale;
    [[unroll]] for (uint d = 0u; d < DV; ++d) dv_part[key_slot * DV + d] = dv[d];
  } else {
    const uint dk_base = high_half(pc.k_off) + k_row(b, g, j), dv_base = high_half(pc.v_off) + v_row(b, g, j);
    [[unroll]] for (uint d = 0u; d < DQK; ++d) dk_out[dk_base + d] = from_f32(dk[d] * pc.scale);
    [[unroll]] for (uint d = 0u; d < DV; ++d) dv_out[dv_base + d] = from_f32(dv[d]);
  }
}
