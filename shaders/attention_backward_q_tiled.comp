#version 450
// The backward pass's query-outer kernel for GPUs: dQ, FlashAttention 2's tiled plan with shared
// memory (the contract: docs/semantics.md, "Backward"; the portable form: attention_backward_q.comp,
// whose sums this kernel forms in the same order). A workgroup owns BR query rows of one head: their Q
// and dO rows, LSE and D stay in shared memory, and its dQ accumulators (f32) in registers, each
// invocation owning a slice of the dims of one row (LANES_PER_ROW invocations a row, dims lane, lane +
// LANES_PER_ROW, ...). It walks the keys its rows can see, BC keys at a time:
//   1. the block's K and V rows into shared memory (barrier);
//   2. the BR x BC tile, one pair per invocation and step: the score again (key_visible,
//      backward_score, dropout_factor), P = e^(s - LSE_i), dS = P (Z dO_i·V_j - D_i) (softcap:
//      × (1 - tanh²)) into shared memory, with a hidden pair marked (barrier);
//   3. dQ_i += Σ_j dS_ij K_j over the block's keys in order (barrier).
// dQ is scaled by `scale` at the end. A hidden pair (masked, or a key past the walk's end) is marked by
// P∘Z = -1 in the weight tile (a real one is never negative) and skipped, not multiplied by 0: NaN or
// Inf in a hidden key's values never reaches a gradient. The grid: x blocks of BR rows, y heads, z
// split * batches + b; a split takes pc.split keys (lavapipe's loop limit), and with several splits each
// writes its f32 partial sums to the workspace (partial_slot), which attention_backward_reduce.comp adds
// in split order. Only barriers and shared memory: no subgroup operation, no subgroup size assumed.
#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(constant_id = SPEC_BACKWARD_TILE_ROWS) const uint BR = 16u;
layout(constant_id = SPEC_BACKWARD_TILE_KEYS) const uint BC = 16u;
const uint LANES_PER_ROW = WORKGROUP / BR;  // (the host makes the workgroup a multiple of BR)
const uint DQ_SLICE = (DQK + LANES_PER_ROW - 1u) / LANES_PER_ROW;
const uint TILE_STEPS = (BR * BC + WORKGROUP - 1u) / WORKGROUP;  // pairs of the tile per invocation
const uint K_STRIDE = BACKWARD_TILE_KEY_STRIDE(DQK), V_STRIDE = BACKWARD_TILE_KEY_STRIDE(DV);

layout(binding = BACKWARD_ROWS_BINDING) readonly buffer RowsBuf { float row_d[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DqBuf { STORAGE_T dq_out[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DqPartBuf { float dq_part[]; };

// BACKWARD_TILE_FLOATS(BR, BC, DQK, DV) in all, as the dK/dV kernel's (the host checks it).
shared float key_tile[BC * K_STRIDE];
shared float value_tile[BC * V_STRIDE];
shared float query_tile[BR * DQK];
shared float grad_out_tile[BR * DV];
shared float lse_tile[BR], d_tile[BR];
shared float weight_tile[BR * BC];      // P∘Z of pair (r, c) at r * BC + c; -1: hidden
shared float grad_score_tile[BR * BC];  // dS; 0 where hidden

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint h = gl_WorkGroupID.y, g = h / pc.group;
  const uint keys_total = VARLEN ? pc.m_sh : pc.seq_k;
  const uint splits = split_count(keys_total);
  const uint batches = gl_NumWorkGroups.z / splits;
  const uint b = gl_WorkGroupID.z % batches, split = gl_WorkGroupID.z / batches;
  begin_sequence(b);
  const uint i0 = gl_WorkGroupID.x * BR;
  if (i0 >= g_rows_q) return;  // (uniform: the whole workgroup leaves, before any barrier)
  const uint row_end = min(i0 + BR, g_rows_q);
  const uint own_row = tid / LANES_PER_ROW, lane = tid % LANES_PER_ROW;
  const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;

  // The row block, zero past the sequence's rows (those pairs are hidden). The walk's first barrier
  // orders these stores before the tile reads them.
  for (uint e = tid; e < BR * DQK; e += WORKGROUP) {
    const uint r = e / DQK, d = e % DQK, i = i0 + r;
    query_tile[e] = i < row_end ? to_f32(q[low_half(pc.q_off) + q_row(b, h, i) + d]) : 0.0;
  }
  for (uint e = tid; e < BR * DV; e += WORKGROUP) {
    const uint r = e / DV, d = e % DV, i = i0 + r;
    grad_out_tile[e] = i < row_end ? to_f32(grad_out[high_half(pc.o_off) + o_row(b, h, i) + d]) : 0.0;
  }
  if (tid < BR) {
    const uint i = i0 + tid;
    const uint r = row_index(b, h, min(i, row_end - 1u));
    lse_tile[tid] = i < row_end ? lse[lse_offset() + r] : 0.0;
    d_tile[tid] = i < row_end ? row_d[r] : 0.0;
  }

  float dq[DQ_SLICE];
  [[unroll]] for (uint t = 0u; t < DQ_SLICE; ++t) dq[t] = 0.0;

  // The keys any row of the block sees, within this split (as the portable kernel's).
  const uint last = row_end - 1u;
  const uint begin = max(split * pc.split, HAS_WINDOW ? window_key_begin(i0) : 0u);
  uint end = min(min(sequence_key_end(b), (split + 1u) * pc.split), causal_key_end(pc.flags & CAUSAL_MASK, last));
  if (HAS_WINDOW) end = min(end, window_key_end(last));
  for (uint j0 = begin; j0 < end; j0 += BC) {
    // 1. The key block.
    for (uint e = tid; e < BC * DQK; e += WORKGROUP) {
      const uint c = e / DQK, d = e % DQK, j = j0 + c;
      key_tile[c * K_STRIDE + d] = j < end ? to_f32(k[low_half(pc.k_off) + k_row(b, g, j) + d]) : 0.0;
    }
    for (uint e = tid; e < BC * DV; e += WORKGROUP) {
      const uint c = e / DV, d = e % DV, j = j0 + c;
      value_tile[c * V_STRIDE + d] = j < end ? to_f32(v[low_half(pc.v_off) + v_row(b, g, j) + d]) : 0.0;
    }
    barrier();

    // 2. The tile: consecutive invocations take consecutive keys of a row.
    for (uint step = 0u; step < TILE_STEPS; ++step) {
      const uint e = tid + step * WORKGROUP;
      if (e >= BR * BC) break;
      const uint r = e / BC, c = e % BC, i = i0 + r, j = j0 + c;
      float weight = -1.0, grad_score = 0.0, bias;
      if (i < row_end && j < end && key_visible(b, h, i, j, bias)) {
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

    // 3. Each invocation's slice of its row's dQ, over the block's keys in order.
    for (uint c = 0u; c < BC; ++c) {
      if (weight_tile[own_row * BC + c] < 0.0) continue;  // hidden (a NaN weight is not: it propagates)
      const float grad_score = grad_score_tile[own_row * BC + c];
      [[unroll]] for (uint t = 0u; t < DQ_SLICE; ++t) {
        const uint d = lane + t * LANES_PER_ROW;
        if (d < DQK) dq[t] += grad_score * key_tile[c * K_STRIDE + d];
      }
    }
    barrier();  // (before the next block overwrites the tiles)
  }

  const uint i = i0 + own_row;
  if (i >= row_end) return;
  if (PARTIAL) {
    const uint row_slot = partial_slot(split, batches, b, pc.heads, h, pc.seq_q, g_row_q + i);
    [[unroll]] for (uint t = 0u; t < DQ_SLICE; ++t) {
      const uint d = lane + t * LANES_PER_ROW;
      if (d < DQK) dq_part[row_slot * DQK + d] = dq[t] * pc.scale;
    }
  } else {
    const uint dq_base = high_half(pc.q_off) + q_row(b, h, i);
    [[unroll]] for (uint t = 0u; t < DQ_SLICE; ++t) {
      const uint d = lane + t * LANES_PER_ROW;
      if (d < DQK) dq_out[dq_base + d] = from_f32(dq[t] * pc.scale);
    }
  }
}
