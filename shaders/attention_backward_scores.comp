#version 450
// The three-stage path's softmax backward (the contract: docs/semantics.md, "Backward"), between its
// GEMMs: for one chunk of query rows, the raw dots S = Q·Kᵀ (GRAD_A) and dP = dO·Vᵀ (GRAD_B), both f32
// and dense (chunk rows x seq_k), are turned in place into
//   GRAD_A: dS = P (Z dP - D'_i) (softcap: × (1 - tanh²)),   GRAD_B: P∘Z,
// with P = e^(s - LSE_i) from the score formed exactly as the fused backward kernels form it
// (backward_score: scale, saturation, modifiers, the float mask's bias) and Z dropout's factor.
// D'_i = Σ_j P_ij Z_ij dP_ij is rowsum(dO∘O) formed from this row's own P∘Z and dP (softmax's backward
// as PyTorch forms it): a row whose weight is all on one key then gets Z dP - D' = 0 exactly, and so
// dQ = dK = 0, which rowsum(dO∘O) summed in another order than the GEMM's dP would not give.
// Hidden pairs (causal, window, mask, key padding, another packed sequence's keys, rows past a
// packed sequence's bound) get exactly 0 in both, whatever their dots (NaN from NaN/Inf in hidden K
// or V included), so the GEMMs that follow (dV = (P∘Z)ᵀ·dO, dK = scale·dSᵀ·Q, dQ = scale·dS·K, zeros
// skipped) add nothing for them.
// One workgroup per chunk row (the grid's x and y flattened), invocations striding over the keys
// twice (D', then dS and P∘Z; each invocation sums its keys in order, the workgroup adds the sums in a
// fixed tree: the same bits every run): an invocation loops 2 seq_k / WORKGROUP times (the host
// checks lavapipe's limit). The chunk rides in the push block's Q/K stride words, which this kernel
// does not read (shader_abi.h, BACKWARD_SCORES_*).
#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(binding = BACKWARD_GRAD_A_BINDING) buffer ScoresBuf { float scores[]; };
layout(binding = BACKWARD_GRAD_B_BINDING) buffer DpBuf { float dp[]; };

// The packed sequence of packed query row i: the last b with cu_seqlens_q[b] <= i, by bisection over
// the batch's `sequences` (a sequence with no queries is never chosen over the next one). Offsets are
// clamped into [0, seq_q] as begin_sequence clamps them.
uint packed_sequence_of(uint i, uint sequences) {
  uint lo = 0u, hi = sequences - 1u;
  while (lo < hi) {
    const uint mid = (lo + hi + 1u) / 2u;
    if (uint(clamp(cu_seqlens_q[pc.m_off + mid], 0, int(pc.seq_q))) <= i) lo = mid;
    else hi = mid - 1u;
  }
  return lo;
}

shared float sums[WORKGROUP];

// Pair (i, j)'s weight P and dropout factor Z, or false for a hidden pair.
bool weight_of(uint b, uint h, uint i, uint j, uint key_end, float slope, float row_lse, float dot, out float p, out float z,
               out float cap_derivative) {
  float bias;
  p = 0.0, z = 0.0, cap_derivative = 1.0;
  if (j >= key_end || !key_visible(b, h, i, j, bias)) return false;
  p = exp(backward_score(dot, slope, i, j, bias, cap_derivative) - row_lse);
  z = dropout_factor(b, h, i, j);
  return true;
}

void main() {
  const uint chunk_row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  const uint chunk_heads = pc.BACKWARD_SCORES_CHUNK_HEADS, chunk_rows = pc.BACKWARD_SCORES_CHUNK_ROWS;
  if (chunk_row >= pc.BACKWARD_SCORES_CHUNK_BATCHES * chunk_heads * chunk_rows) return;  // (uniform)
  const uint t = gl_LocalInvocationID.x;
  const uint il = chunk_row % chunk_rows, hl = (chunk_row / chunk_rows) % chunk_heads, bl = chunk_row / (chunk_rows * chunk_heads);
  const uint h = pc.BACKWARD_SCORES_H0 + hl;
  uint b = pc.BACKWARD_SCORES_B0 + bl, i = pc.BACKWARD_SCORES_I0 + il;
  const uint base = chunk_row * pc.seq_k;

  // The row's sequence: the batch element, or in a packed batch (the batch-1 view of total_q rows
  // and total_k keys) the sequence of packed row i, whose own rows and keys are then counted from
  // its first ones; the row's other keys belong to other sequences and stay hidden.
  uint first_key = 0u;
  if (VARLEN) {
    b = packed_sequence_of(i, pc.BACKWARD_SCORES_SEQUENCES);
    begin_sequence(b);
    i -= g_row_q;
    first_key = g_row_k;
  } else {
    begin_sequence(b);
  }
  const bool row_seen = i < g_rows_q;  // (a packed row past its sequence's bound max_seqlen_q: hidden)
  const uint key_end = row_seen ? sequence_key_end(b) : 0u;
  const float row_lse = row_seen ? lse[lse_offset() + row_index(b, h, i)] : 0.0;
  const float slope = HAS_ALIBI ? alibi_slope(b, h) : 0.0;

  // D' = Σ P Z dP.
  float sum = 0.0;
  for (uint jr = t; jr < pc.seq_k; jr += WORKGROUP) {
    float p, z, cap_derivative;
    // (j wraps below the sequence's first key: never visible)
    if (weight_of(b, h, i, jr - first_key, key_end, slope, row_lse, scores[base + jr], p, z, cap_derivative))
      sum += p * z * dp[base + jr];
  }
  sums[t] = sum;
  barrier();
  [[unroll]] for (uint width = WORKGROUP / 2u; width > 0u; width /= 2u) {
    if (t < width) sums[t] += sums[t + width];
    barrier();
  }
  const float row_dd = sums[0];

  for (uint jr = t; jr < pc.seq_k; jr += WORKGROUP) {
    float p, z, cap_derivative, ds = 0.0, pz = 0.0;
    if (weight_of(b, h, i, jr - first_key, key_end, slope, row_lse, scores[base + jr], p, z, cap_derivative)) {
      ds = p * (dp[base + jr] * z - row_dd) * cap_derivative;
      pz = p * z;
    }
    scores[base + jr] = ds;
    dp[base + jr] = pz;
  }
}
