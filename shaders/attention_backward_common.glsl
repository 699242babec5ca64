// What the backward pass's kernels share (attention_backward_rows.comp, attention_backward_kv.comp,
// attention_backward_q.comp): their push block and bindings, the sequence a workgroup works on (dense
// batch element or packed sequence), which keys a query row sees and the score it gives them, formed
// again exactly as the forward kernels form it (score.glsl, modifiers.glsl), and dropout's factor.
// Include after storage_types.glsl.
#ifndef VKATTN_ATTENTION_BACKWARD_COMMON_GLSL
#define VKATTN_ATTENTION_BACKWARD_COMMON_GLSL

#include "shader_abi.h"

layout(push_constant) uniform BackwardPush { BACKWARD_PUSH_MEMBERS } pc;

layout(constant_id = SPEC_BACKWARD_DQK) const uint DQK = 64u;
layout(constant_id = SPEC_BACKWARD_DV) const uint DV = 64u;
layout(constant_id = SPEC_BACKWARD_WORKGROUP) const uint WORKGROUP = 64u;
layout(constant_id = SPEC_BACKWARD_VARLEN) const uint VARLEN_SPEC = 0u;
layout(constant_id = SPEC_BACKWARD_PARTIAL) const uint PARTIAL_SPEC = 0u;
layout(constant_id = SPEC_BACKWARD_DROPOUT) const uint DROPOUT_THRESHOLD = 0u;
const bool VARLEN = VARLEN_SPEC != 0u;
const bool PARTIAL = PARTIAL_SPEC != 0u;
const bool HAS_DROPOUT = DROPOUT_THRESHOLD != 0u;

layout(local_size_x_id = SPEC_BACKWARD_WORKGROUP) in;

layout(binding = BACKWARD_Q_BINDING) readonly buffer QBuf { STORAGE_T q[]; };
layout(binding = BACKWARD_K_BINDING) readonly buffer KBuf { STORAGE_T k[]; };
layout(binding = BACKWARD_V_BINDING) readonly buffer VBuf { STORAGE_T v[]; };
layout(binding = BACKWARD_O_BINDING) readonly buffer OBuf { STORAGE_T o[]; };
layout(binding = BACKWARD_DO_BINDING) readonly buffer DoBuf { STORAGE_T grad_out[]; };
layout(binding = BACKWARD_LSE_BINDING) readonly buffer LseBuf { float lse[]; };
layout(binding = BACKWARD_MASK_BINDING) readonly buffer MaskBuf { uint mask_words[]; };
layout(binding = BACKWARD_KV_LENGTHS_BINDING) readonly buffer KvLenBuf { int kv_lengths[]; };
layout(binding = BACKWARD_CU_SEQLENS_Q_BINDING) readonly buffer CuQBuf { int cu_seqlens_q[]; };

// The sequence of batch element b (begin_sequence): its queries and keys, its first rows in the
// packed tensors (0 for dense ones), and the rows computed and keys seen (a packed batch's bounds
// max_seqlen_q and max_seqlen_k cut them, as in the forward kernels).
uint g_seq_q, g_seq_k, g_row_q, g_row_k, g_rows_q, g_keys_seen;
#define SEQ_Q g_seq_q
#define SEQ_K g_seq_k

#include "mask.glsl"
#include "causal.glsl"
#include "score.glsl"
#define MOD_KERNEL MOD_KERNEL_BACKWARD
#include "modifiers.glsl"
#include "philox.glsl"

// As the fused kernels' begin_sequence (attention_common.glsl): the same clamps, so that bad
// cu_seqlens read wrong rows but never out of bounds.
void begin_sequence(uint b) {
  g_seq_q = pc.seq_q;
  g_seq_k = pc.seq_k;
  g_row_q = 0u;
  g_row_k = 0u;
  g_rows_q = g_seq_q;
  g_keys_seen = g_seq_k;
  if (VARLEN) {
    const int q0 = clamp(cu_seqlens_q[pc.m_off + b], 0, int(pc.seq_q));
    const int q1 = clamp(cu_seqlens_q[pc.m_off + b + 1u], q0, int(pc.seq_q));
    const int k0 = clamp(kv_lengths[kv_len_offset() + b], 0, int(pc.seq_k));
    const int k1 = clamp(kv_lengths[kv_len_offset() + b + 1u], k0, int(pc.seq_k));
    g_row_q = uint(q0);
    g_seq_q = uint(q1 - q0);
    g_row_k = uint(k0);
    g_seq_k = uint(k1 - k0);
    g_rows_q = min(g_seq_q, pc.m_sb);
    g_keys_seen = min(g_seq_k, pc.m_sh);
  }
}

// One past the last key of batch element b any row may see: the keys seen, cut by key padding.
uint sequence_key_end(uint b) {
  uint end = g_keys_seen;
  if (!VARLEN && (pc.flags & FLAG_KV_LENGTHS) != 0u) end = min(end, uint(clamp(kv_lengths[kv_len_offset() + b], 0, int(pc.seq_k))));
  return end;
}

// Element offsets of a tensor and of its gradient: the low and high halves of the push word.
uint low_half(uint word) { return word & 0xffffu; }
uint high_half(uint word) { return word >> 16u; }

// The first element of query row i (of the sequence) of head h in Q / dQ's strides, of key row j of
// KV head g in K's, V's, and of output row i in O / dO's.
uint q_row(uint b, uint h, uint i) { return b * pc.q_sb + h * pc.q_sh + (g_row_q + i) * pc.q_ss; }
uint k_row(uint b, uint g, uint j) { return b * pc.k_sb + g * pc.k_sh + (g_row_k + j) * pc.k_ss; }
uint v_row(uint b, uint g, uint j) { return b * pc.v_sb + g * pc.v_sh + (g_row_k + j) * pc.v_ss; }
uint o_row(uint b, uint h, uint i) { return b * pc.o_sb + h * pc.o_sh + (g_row_q + i) * pc.o_ss; }

// The row of (b, h, i) in the LSE (without its binding's offset) and in the rows workspace (D): (batch,
// heads, seq_q), or (heads, total_q) by packed row.
uint row_index(uint b, uint h, uint i) {
  if (VARLEN) return h * pc.seq_q + g_row_q + i;
  return (b * pc.heads + h) * pc.seq_q + i;
}

// Whether query row i of head h sees key j (below sequence_key_end), and the float mask's bias: causal,
// the window, the mask tensor (a boolean false or a float -inf hides the key).
bool key_visible(uint b, uint h, uint i, uint j, out float bias) {
  bias = 0.0;
  if (j >= causal_key_end(pc.flags & CAUSAL_MASK, i)) return false;
  if (HAS_WINDOW && (j < window_key_begin(i) || j >= window_key_end(i))) return false;
  const uint kind = (pc.flags >> MASK_KIND_SHIFT) & 3u;
  if (kind != MASK_NONE) {
    bias = mask_bias(kind, pc.m_off + b * pc.m_sb + h * pc.m_sh + i * pc.m_ss + j);
    if (bias == NEG_INF) return false;
  }
  return true;
}

// The score of query row i and key j from their dot product, as the forward formed it (score.glsl's
// saturation, the score modifiers, the float mask's bias), and in `slope_of_cap` the derivative of
// the softcap step (1 - tanh², 1 without one): what dS is multiplied by on its way back to the dot.
float backward_score(float dot, float slope, uint i, uint j, float bias, out float cap_derivative) {
  float s = scale_dot(dot, pc.scale);
  cap_derivative = 1.0;
  if (HAS_SOFTCAP) {
    s = softcap_score(s);
    const float t = s / SOFTCAP;
    cap_derivative = 1.0 - t * t;
  }
  s = modify_capped_score(s, slope, i, j);
  return add_bias(s, bias);
}

// Dropout's factor for the weight of (i, j): 1 / (1 - p) where the weight is kept, 0 where it is
// dropped, 1 without dropout. b is the batch element or the packed sequence, i and j its own indices.
float dropout_factor(uint b, uint h, uint i, uint j) {
  if (!HAS_DROPOUT) return 1.0;
  const uint word = dropout_word(b, h, pc.heads, i, j, pc.seed_lo, pc.seed_hi, pc.dropout_offset);
  const float keep_scale = 1.0 / (1.0 - float(DROPOUT_THRESHOLD) * uintBitsToFloat(0x2f800000u));  // 2^-32
  return word >= DROPOUT_THRESHOLD ? keep_scale : 0.0;
}

// The query rows [lo, hi) that can see a key in [ja, jb) (jb > ja) under causal and the window; the
// host keeps seq_q + seq_k below 2^29, so no sum here leaves int32. Each pair is still tested alone
// (key_visible): this only bounds the walk.
uvec2 query_rows_of_keys(uint ja, uint jb) {
  int lo = 0, hi = int(g_rows_q);
  const uint causal = pc.flags & CAUSAL_MASK;
  if (causal == CAUSAL_TOP_LEFT) lo = max(lo, int(ja));
  if (causal == CAUSAL_BOTTOM_RIGHT) lo = max(lo, int(ja) + int(SEQ_Q) - int(SEQ_K));
  if (HAS_WINDOW) {
    const int off = diagonal_offset();
    if (WINDOW_RIGHT != WINDOW_UNBOUNDED) lo = max(lo, int(ja) - off - int(WINDOW_RIGHT));
    if (WINDOW_LEFT != WINDOW_UNBOUNDED) hi = min(hi, int(jb) - off + int(WINDOW_LEFT));
  }
  return uvec2(uint(lo), uint(max(lo, hi)));
}

// The workspace row of a split's partial sums (attention_backward_reduce.comp's layout): [split][batch]
// [head][row], `heads` and `rows` the tensor's (KV heads and keys for dK/dV, query heads and rows for
// dQ), `row` the sequence's own; a packed batch's partials are one batch-1 tensor over its packed rows.
uint partial_slot(uint split, uint batches, uint b, uint heads, uint h, uint rows, uint row) {
  const uint batch = VARLEN ? 0u : b, batch_count = VARLEN ? 1u : batches;
  return ((split * batch_count + batch) * heads + h) * rows + row;
}

// The splits of a dispatch: the grid's z is split * batches + b, and the split size covers `total`.
uint split_count(uint total) { return max((total + pc.split - 1u) / pc.split, 1u); }

#endif
