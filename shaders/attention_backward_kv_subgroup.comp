#version 450
// The dK/dV kernel for CPU devices (lavapipe), written to their JIT's rules (docs/devices.md): the
// same sums as attention_backward_kv.comp (the rows in the same order per key; each dot as LANES
// partial sums, so its rounding differs), but a workgroup is one subgroup
// of LANES and each lane owns ROWS keys (j = j0 + r * LANES + lane). Per query row the lanes load its
// Q and dO one element each (a chunk of LANES elements per load) and pass them around with
// subgroupShuffle at constant lane indices, so one lane-by-lane load feeds every lane's keys, where
// the portable kernel's uniform loads ran lane by lane for every element. Private arrays are indexed
// only by unrolled loops; the walk over query rows is a real loop (lavapipe's limit: the host splits
// it). Dropout, masks and modifiers as the portable kernel.
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
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DkBuf { STORAGE_T dk_out[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DkPartBuf { float dk_part[]; };
layout(binding = BACKWARD_GRAD_B_BINDING) writeonly buffer DvBuf { STORAGE_T dv_out[]; };
layout(binding = BACKWARD_GRAD_B_BINDING) writeonly buffer DvPartBuf { float dv_part[]; };

void main() {
  const uint g = gl_WorkGroupID.y, lane = gl_SubgroupInvocationID;
  const uint rows_total = VARLEN ? pc.m_sb : pc.seq_q;
  const uint splits = split_count(rows_total);
  const uint batches = gl_NumWorkGroups.z / splits;
  const uint b = gl_WorkGroupID.z % batches, split = gl_WorkGroupID.z / batches;
  begin_sequence(b);
  const uint j0 = gl_WorkGroupID.x * LANES * ROWS;
  if (j0 >= g_keys_seen) return;  // (uniform)
  const uint key_end = sequence_key_end(b);

  float kj[ROWS][DQK], vj[ROWS][DV], dk[ROWS][DQK], dv[ROWS][DV];
  uint key[ROWS];
  bool live[ROWS];
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    key[r] = j0 + r * LANES + lane;
    live[r] = key[r] < key_end;
    const uint row = min(key[r], max(key_end, 1u) - 1u);
    const uint k_base = low_half(pc.k_off) + k_row(b, g, row), v_base = low_half(pc.v_off) + v_row(b, g, row);
    [[unroll]] for (uint d = 0u; d < DQK; ++d) {
      kj[r][d] = live[r] ? to_f32(k[k_base + d]) : 0.0;
      dk[r][d] = 0.0;
    }
    [[unroll]] for (uint d = 0u; d < DV; ++d) {
      vj[r][d] = live[r] ? to_f32(v[v_base + d]) : 0.0;
      dv[r][d] = 0.0;
    }
  }

  if (j0 < key_end) {
    uvec2 rows = query_rows_of_keys(j0, min(j0 + LANES * ROWS, key_end));
    rows.x = max(rows.x, split * pc.split);
    rows.y = min(rows.y, min(rows_total, (split + 1u) * pc.split));
    for (uint hh = 0u; hh < pc.group; ++hh) {
      const uint h = g * pc.group + hh;
      const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;
      for (uint i = rows.x; i < rows.y; ++i) {
        // Q and dO of row i: element c * LANES + lane loaded by this lane, then handed to every lane
        // with subgroupShuffle at constant lanes (a broadcast, not a gather) right where it is used,
        // so no lane holds the whole row (at d128 such arrays spilled and halved the speed).
        const uint q_base = low_half(pc.q_off) + q_row(b, h, i), do_base = high_half(pc.o_off) + o_row(b, h, i);
        float q_part[QK_CHUNKS], do_part[V_CHUNKS];
        [[unroll]] for (uint c = 0u; c < QK_CHUNKS; ++c) {
          const uint d = c * LANES + lane;
          q_part[c] = d < DQK ? to_f32(q[q_base + min(d, DQK - 1u)]) : 0.0;
        }
        [[unroll]] for (uint c = 0u; c < V_CHUNKS; ++c) {
          const uint d = c * LANES + lane;
          do_part[c] = d < DV ? to_f32(grad_out[do_base + min(d, DV - 1u)]) : 0.0;
        }
        // The dot Q·K as LANES partial sums (one per position in a chunk, added up at the end):
        // independent chains of multiply-adds, where one running sum waited on each. dO·V is one
        // running sum in the rows kernel's order and form (D = Σ dO·O): where a row's weight is all
        // on one key, O is that key's V and dP - D must come out exactly 0.
        float dot_part[ROWS][LANES], dp[ROWS];
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
          [[unroll]] for (uint t = 0u; t < LANES; ++t) dot_part[r][t] = 0.0;
          dp[r] = 0.0;
        }
        [[unroll]] for (uint c = 0u; c < QK_CHUNKS; ++c)
          [[unroll]] for (uint t = 0u; t < LANES; ++t) {
            const uint d = c * LANES + t;
            if (d < DQK) {
              const float qd = subgroupShuffle(q_part[c], t);
              [[unroll]] for (uint r = 0u; r < ROWS; ++r) dot_part[r][t] = fma(qd, kj[r][d], dot_part[r][t]);
            }
          }
        [[unroll]] for (uint c = 0u; c < V_CHUNKS; ++c)
          [[unroll]] for (uint t = 0u; t < LANES; ++t) {
            const uint d = c * LANES + t;
            if (d < DV) {
              const float od = subgroupShuffle(do_part[c], t);
              [[unroll]] for (uint r = 0u; r < ROWS; ++r) dp[r] += od * vj[r][d];
            }
          }
        const uint r_row = row_index(b, h, i);
        const float row_lse = lse[lse_offset() + r_row], row_dd = row_d[r_row];
        float pz[ROWS], ds[ROWS];
        bool visible[ROWS];
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
          float bias;
          visible[r] = live[r] && key_visible(b, h, i, key[r], bias);
          float dot = 0.0;
          [[unroll]] for (uint t = 0u; t < LANES; ++t) dot += dot_part[r][t];
          float cap_derivative;
          const float s = backward_score(dot, slope, i, key[r], bias, cap_derivative);
          // A hidden pair weighs exactly 0 (selected, never 0 × a NaN).
          const float p = visible[r] ? exp(s - row_lse) : 0.0;
          const float z = visible[r] ? dropout_factor(b, h, i, key[r]) : 0.0;
          pz[r] = p * z;
          ds[r] = visible[r] ? p * (dp[r] * z - row_dd) * cap_derivative : 0.0;
        }
        // (A hidden pair adds nothing, not 0 × its row's values: they may be NaN.)
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
          if (!visible[r]) continue;
          [[unroll]] for (uint c = 0u; c < V_CHUNKS; ++c)
            [[unroll]] for (uint t = 0u; t < LANES; ++t) {
              const uint d = c * LANES + t;
              if (d < DV) dv[r][d] = fma(pz[r], subgroupShuffle(do_part[c], t), dv[r][d]);
            }
          [[unroll]] for (uint c = 0u; c < QK_CHUNKS; ++c)
            [[unroll]] for (uint t = 0u; t < LANES; ++t) {
              const uint d = c * LANES + t;
              if (d < DQK) dk[r][d] = fma(ds[r], subgroupShuffle(q_part[c], t), dk[r][d]);
            }
        }
      }
    }
  }

  const uint kv_heads = pc.heads / pc.group;
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    const uint j = key[r];
    if (j >= g_keys_seen) continue;
    if (PARTIAL) {
      const uint key_slot = partial_slot(split, batches, b, kv_heads, g, pc.seq_k, g_row_k + j);
      [[unroll]] for (uint d = 0u; d < DQK; ++d) dk_part[key_slot * DQK + d] = dk[r][d] * pc.scale;
      [[unroll]] for (uint d = 0u; d < DV; ++d) dv_part[key_slot * DV + d] = dv[r][d];
    } else {
      const uint dk_base = high_half(pc.k_off) + k_row(b, g, j), dv_base = high_half(pc.v_off) + v_row(b, g, j);
      [[unroll]] for (uint d = 0u; d < DQK; ++d) dk_out[dk_base + d] = from_f32(dk[r][d] * pc.scale);
      [[unroll]] for (uint d = 0u; d < DV; ++d) dv_out[dv_base + d] = from_f32(dv[r][d]);
    }
  }
}
