// Push constants of attention_softmax.comp. Mirrored by host/attention_push.hpp (SoftmaxPush); keep
// the two in the same order. The kernel works on a chunk of rows of the scores P: batches
// b0 .. b0 + chunk_batches - 1, heads h0 .. h0 + chunk_heads - 1, query rows i0 .. i0 + chunk_rows - 1,
// stored densely in that order. Masks and LSE are indexed with the global (b, h, i).
#ifndef VKATTN_SOFTMAX_PUSH_GLSL
#define VKATTN_SOFTMAX_PUSH_GLSL

#include "attention_flags.glsl"

layout(push_constant) uniform SoftmaxPush {
  uint seq_q, seq_k, heads, flags;
  uint rows, chunk_heads, chunk_rows;  // rows = chunk_batches * chunk_heads * chunk_rows
  uint b0, h0, i0;
  uint p_off, lse_off, kv_len_off;
  uint m_sb, m_sh, m_ss, m_off;
} pc;

#endif
