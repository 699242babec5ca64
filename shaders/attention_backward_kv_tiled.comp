#version 450
// The backward pass's key-outer kernel for GPUs: dK and dV, FlashAttention 2's tiled plan with shared
// memory (the contract: docs/semantics.md, "Backward"; the portable form: attention_backward_kv.comp,
// whose sums this kernel forms in the same order). A workgroup owns a block of BC keys of one KV head:
// their K and V rows stay in shared memory, and its dK and dV accumulators (f32) in registers, each
// invocation owning a slice of the dims of one key (LANES_PER_KEY invocations a key, dims lane, lane +
// LANES_PER_KEY, ...). It walks the query rows of every query head of the GQA group (the group's sums
// stay with one owner: no atomics, a fixed order) that can see one of its keys, BR rows at a time:
//   1. the block's Q and dO rows, LSE and D into shared memory (barrier);
//   2. the BR x BC tile, one pair per invocation and step: the score s again (masks and modifiers as the
//      portable kernel: key_visible, backward_score, dropout_factor), P = e^(s - LSE_i), dP = dO_i·V_j,
//      P∘Z and dS = P (dP Z - D_i) (softcap: × (1 - tanh²)) into shared memory (barrier);
//   3. dV_j += Σ_i (P∘Z)_ij dO_i and dK_j += Σ_i dS_ij Q_i over the block's rows in order (barrier).
// dK is scaled by `scale` at the end. A hidden pair (masked, or a row past the walk's end) is marked by
// P∘Z = -1 (a real one is never negative) and skipped, not multiplied by 0: NaN or Inf in a hidden
// row's values never reaches a gradient. The grid: x blocks of BC keys, y KV heads, z split * batches
// + b; a split takes pc.split query rows (the host bounds each invocation's loop iterations by it,
// lavapipe's limit), and with several splits each writes its f32 partial sums to the workspace
// (partial_slot), which attention_backward_reduce.comp adds in split order. Only barriers and shared
// memory: no subgroup operation, so no subgroup size is assumed.
#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(constant_id = SPEC_BACKWARD_TILE_ROWS) const uint BR = 16u;
layout(constant_id = SPEC_BACKWARD_TILE_KEYS) const uint BC = 16u;
const uint LANES_PER_KEY = WORKGROUP / BC;  // (the host makes the workgroup a multiple of BC)
const uint DK_SLICE = (DQK + LANES_PER_KEY - 1u) / LANES_PER_KEY;
const uint DV_SLICE = (DV + LANES_PER_KEY - 1u) / LANES_PER_KEY;
const uint TILE_STEPS = (BR * BC + WORKGROUP - 1u) / WORKGROUP;  // pairs of the tile per invocation
const uint K_STRIDE = BACKWARD_TILE_KEY_STRIDE(DQK), V_STRIDE = BACKWARD_TILE_KEY_STRIDE(DV);

layout(binding = BACKWARD_ROWS_BINDING) readonly buffer RowsBuf { float row_d[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DkBuf { STORAGE_T dk_out[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DkPartBuf { float dk_part[]; };
layout(binding = BACKWARD_GRAD_B_BINDING) writeonly buffer DvBuf { STORAGE_T dv_out[]; };
layout(binding = BACKWARD_GRAD_B_BINDING) writeonly buffer DvPartBuf { float dv_part[]; };

// BACKWARD_TILE_FLOATS(BR, BC, DQK, DV) in all (the host checks it against the device's limit).
shared float key_tile[BC * K_STRIDE];
shared float value_tile[BC * V_STRIDE];
shared float query_tile[BR * DQK];
shared float grad_out_tile[BR * DV];
shared float lse_tile[BR], d_tile[BR];
shared float weight_tile[BR * BC];      // P∘Z of pair (r, c) at r * BC + c; -1: hidden
shared float grad_score_tile[BR * BC];  // dS; 0 where hidden

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint g = gl_WorkGroupID.y;
  const uint rows_total = VARLEN ? pc.m_sb : pc.seq_q;
  const uint splits = split_count(rows_total);
  const uint batches = gl_NumWorkGroups.z / splits;
  const uint b = gl_WorkGroupID.z % batches, split = gl_WorkGroupID.z / batches;
  begin_sequence(b);
  const uint j0 = gl_WorkGroupID.x * BC;
  if (j0 >= g_keys_seen) return;  // (uniform: the whole workgroup leaves, before any barrier)
  const uint key_end = sequence_key_end(b);
  const uint own_key = tid / LANES_PER_KEY, lane = tid % LANES_PER_KEY;

  float dk[DK_SLICE], dv[DV_SLICE];
  [[unroll]] for (uint t = 0u; t < DK_SLICE; ++t) dk[t] = 0.0;
  [[unroll]] for (uint t = 0u; t < DV_SLICE; ++t) dv[t] = 0.0;

  if (j0 < key_end) {  // (uniform)
    // The key block, zero past the sequence's keys (those pairs are hidden anyway). The walk's first
    // barrier orders these stores before the tile reads them.
    for (uint e = tid; e < BC * DQK; e += WORKGROUP) {
      const uint c = e / DQK, d = e % DQK, j = j0 + c;
      key_tile[c * K_STRIDE + d] = j < key_end ? to_f32(k[low_half(pc.k_off) + k_row(b, g, j) + d]) : 0.0;
    }
    for (uint e = tid; e < BC * DV; e += WORKGROUP) {
      const uint c = e / DV, d = e % DV, j = j0 + c;
      value_tile[c * V_STRIDE + d] = j < key_end ? to_f32(v[low_half(pc.v_off) + v_row(b, g, j) + d]) : 0.0;
    }

    uvec2 rows = query_rows_of_keys(j0, min(j0 + BC, key_end));
    rows.x = max(rows.x, split * pc.split);
    rows.y = min(rows.y, min(rows_total, (split + 1u) * pc.split));
    for (uint hh = 0u; hh < pc.group; ++hh) {
      const uint h = g * pc.group + hh;
      const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;
      for (uint i0 = rows.x; i0 < rows.y; i0 += BR) {
        // 1. The query block.
        for (uint e = tid; e < BR * DQK; e += WORKGROUP) {
          const uint r = e / DQK, d = e % DQK, i = i0 + r;
          query_tile[e] = i < rows.y ? to_f32(q[low_half(pc.q_off) + q_row(b, h, i) + d]) : 0.0;
        }
        for (uint e = tid; e < BR * DV; e += WORKGROUP) {
          const uint r = e / DV, d = e % DV, i = i0 + r;
          grad_out_tile[e] = i < rows.y ? to_f32(grad_out[high_half(pc.o_off) + o_row(b, h, i) + d]) : 0.0;
        }
        if (tid < BR) {
          const uint i = i0 + tid;
          const uint r = row_index(b, h, min(i, rows.y - 1u));
          lse_tile[tid] = i < rows.y ? lse[lse_offset() + r] : 0.0;
          d_tile[tid] = i < rows.y ? row_d[r] : 0.0;
        }
        barrier();

        // 2. The tile: consecutive invocations take consecutive keys of a row.
        for (uint step = 0u; step < TILE_STEPS; ++step) {
          const uint e = tid + step * WORKGROUP;
          if (e >= BR * BC) break;
          const uint r = e / BC, c = e % BC, i = i0 + r, j = j0 + c;
          float weight = -1.0, grad_score = 0.0, bias;
          if (i < rows.y && j < key_end && key_visible(b, h, i, j, bias)) {
            float dot = 0.0, dp = 0.0;
            [[unroll]] for (uint d = 0u; d < DQK; ++d) dot += query_tile[r * DQK + d] * key_tile[c * K_STRIDE + d];
            [[unroll]] for (uint d = 0u; d < DV; ++d) dp += grad_out_tile[r * DV + d] * value_tile[c * V_STRIDE + d];
            float cap_derivative;
            const float s = backward_score(dot, slope, i, j, bias, cap_derivative);
            const float p = exp(s - lse_tile[r]);
            const float z = dropout_factor(b, h, i, j);
            weight = p * z;
            grad_score = p * (dp * z - d_tile[r]) * cap_derivative;
          }
          weight_tile[e] = weight;
          grad_score_tile[e] = grad_score;
        }
        barrier();

        // 3. Each invocation's slice of its key's dV and dK, over the block's rows in order.
        for (uint r = 0u; r < BR; ++r) {
          const float weight = weight_tile[r * BC + own_key];
          if (weight < 0.0) continue;  // hidden (a NaN weight is not: it propagates)
          const float grad_score = grad_score_tile[r * BC + own_key];
          [[unroll]] for (uint t = 0u; t < DV_SLICE; ++t) {
            const uint d = lane + t * LANES_PER_KEY;
            if (d < DV) dv[t] += weight * grad_out_tile[r * DV + d];
          }
          [[unroll]] for (uint t = 0u; t < DK_SLICE; ++t) {
            const uint d = lane + t * LANES_PER_KEY;
            if (d < DQK) dk[t] += grad_score * query_tile[r * DQK + d];
          }
        }
        barrier();  // (before the next block overwrites the tiles)
      }
    }
  }

  // Every key of the sequence's seen range gets its gradients, zero where no row sees it.
  const uint j = j0 + own_key;
  if (j >= g_keys_seen) return;
  if (PARTIAL) {
    const uint kv_heads = pc.heads / pc.group;
    const uint key_slot = partial_slot(split, batches, b, kv_heads, g, pc.seq_k, g_row_k + j);
    [[unroll]] for (uint t = 0u; t < DK_SLICE; ++t) {
      const uint d = lane + t * LANES_PER_KEY;
      if (d < DQK) dk_part[key_slot * DQK + d] = dk[t] * pc.scale;
    }
    [[unroll]] for (uint t = 0u; t < DV_SLICE; ++t) {
      const uint d = lane + t * LANES_PER_KEY;
      if (d < DV) dv_part[key_slot * DV + d] = dv[t];
    }
  } else {
    const uint dk_base = high_half(pc.k_off) + k_row(b, g, j), dv_base = high_half(pc.v_off) + v_row(b, g, j);
    [[unroll]] for (uint t = 0u; t < DK_SLICE; ++t) {
      const uint d = lane + t * LANES_PER_KEY;
      if (d < DQK) dk_out[dk_base + d] = from_f32(dk[t] * pc.scale);
    }
    [[unroll]] for (uint t = 0u; t < DV_SLICE; ++t) {
      const uint d = lane + t * LANES_PER_KEY;
      if (d < DV) dv_out[dv_base + d] = from_f32(dv[t]);
    }
  }
}
