#version 450
// The masked, numerically stable row softmax of the three-stage path, in place on the f32 scores
// S = scale·Q·Kᵀ written by gemm.comp:
//   P[j] = exp(s'_j - m) / l,  s'_j = s_j + bias_j for visible keys,  m = max s',  l = sum exp(s' - m)
// (s'_j saturating to +-FLT_MAX: score.glsl)
// with the fused kernels' semantics (the contract: README.md, "Semantics"): a key is hidden by the causal rule, by key padding
// or by an explicit mask (boolean false or float -inf) and then gets exactly 0, whatever its score
// (NaN from a NaN in K included); a row with no visible key gets all zeros and LSE -inf. The max
// starts at M_INIT like the fused kernels, so NaN scores of visible keys propagate to the row.
// One workgroup per row; invocations stride over the keys; three passes (max, sum, write), so an
// invocation loops about 3 * seq_k / WG times (the host checks lavapipe's limit).

#extension GL_EXT_control_flow_attributes : enable

#include "softmax_push.glsl"

layout(local_size_x_id = SPEC_SOFTMAX_WORKGROUP) in;

layout(binding = 0) buffer ScoresBuf { float p[]; };
layout(binding = 1) writeonly buffer LseBuf { float lse[]; };
layout(binding = 2) readonly buffer MaskBuf { uint mask_words[]; };
layout(binding = 3) readonly buffer KvLenBuf { int kv_lengths[]; };

#include "mask.glsl"
#include "causal.glsl"
#include "score.glsl"
#define MOD_SPEC_MODIFIERS SPEC_SOFTMAX_MODIFIERS
#define MOD_SPEC_WINDOW_LEFT SPEC_SOFTMAX_WINDOW_LEFT
#define MOD_SPEC_WINDOW_RIGHT SPEC_SOFTMAX_WINDOW_RIGHT
#define MOD_SPEC_SOFTCAP SPEC_SOFTMAX_SOFTCAP
#define ALIBI_BINDING 4
#define SINKS_BINDING 5
#include "modifiers.glsl"

shared float reduction[gl_WorkGroupSize.x];

// The workgroup's max (op 0) or sum (op 1) of one value per invocation.
float workgroup_reduce(float value, uint op) {
  const uint tid = gl_LocalInvocationID.x;
  barrier();
  reduction[tid] = value;
  barrier();
  for (uint width = gl_WorkGroupSize.x / 2u; width > 0u; width /= 2u) {
    if (tid < width) {
      const float other = reduction[tid + width];
      reduction[tid] = op == 0u ? max(reduction[tid], other) : reduction[tid] + other;
    }
    barrier();
  }
  return reduction[0];
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // uniform per workgroup: barriers stay in uniform control flow
  const uint tid = gl_LocalInvocationID.x;
  const uint il = row % pc.chunk_rows;
  const uint hl = (row / pc.chunk_rows) % pc.chunk_heads;
  const uint bl = row / (pc.chunk_rows * pc.chunk_heads);
  const uint b = pc.b0 + bl, h = pc.h0 + hl, i = pc.i0 + il;

  uint key_end = causal_key_end(pc.flags & CAUSAL_MASK, i);
  if ((pc.flags & FLAG_KV_LENGTHS) != 0u) key_end = min(key_end, uint(clamp(kv_lengths[kv_len_offset() + b], 0, int(pc.seq_k))));
  const uint mask_kind = (pc.flags >> MASK_KIND_SHIFT) & 3u;
  const uint mask_row = pc.m_off + b * pc.m_sb + h * pc.m_sh + i * pc.m_ss;
  const uint p_row = pc.p_off + row * pc.seq_k;

  // Pass 1: the max of the visible, biased scores. Hidden keys become -inf here and in pass 3 (the
  // mask is read again rather than stored: P holds only the raw scores until pass 3 overwrites them).
  float m = M_INIT;
  for (uint j = tid; j < key_end; j += gl_WorkGroupSize.x) {
    const float bias = mask_kind != MASK_NONE ? mask_bias(mask_kind, mask_row + j) : 0.0;
    if (bias != NEG_INF) m = max(m, add_bias(p[p_row + j], bias));
  }
  m = workgroup_reduce(m, 0u);

  // Pass 2: the sum.
  float l = 0.0;
  for (uint j = tid; j < key_end; j += gl_WorkGroupSize.x) {
    const float bias = mask_kind != MASK_NONE ? mask_bias(mask_kind, mask_row + j) : 0.0;
    const float s = add_bias(p[p_row + j], bias);
    if (bias != NEG_INF && s != NEG_INF) l += exp(s - m);
  }
  l = workgroup_reduce(l, 1u);

  // Pass 3: the weights; l == 0 only when no key is visible.
  const bool empty = l == 0.0;
  const float inv_l = empty ? 0.0 : 1.0 / l;
  for (uint j = tid; j < pc.seq_k; j += gl_WorkGroupSize.x) {
    float weight = 0.0;
    if (j < key_end) {
      const float bias = mask_kind != MASK_NONE ? mask_bias(mask_kind, mask_row + j) : 0.0;
      const float s = add_bias(p[p_row + j], bias);
      if (bias != NEG_INF && s != NEG_INF) weight = exp(s - m) * inv_l;
    }
    p[p_row + j] = weight;
  }
  if (tid == 0u && (pc.flags & FLAG_WRITE_LSE) != 0u)
    lse[lse_offset() + (b * pc.heads + h) * pc.seq_q + i] = empty ? NEG_INF : m + log(l);
}
