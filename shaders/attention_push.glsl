// Push constants of attention_fused.comp. Mirrored by host/attention_push.hpp (AttentionPush);
// keep the two in the same order. Strides and offsets are in elements of their buffer.
#ifndef VKATTN_ATTENTION_PUSH_GLSL
#define VKATTN_ATTENTION_PUSH_GLSL

#include "attention_flags.glsl"

layout(push_constant) uniform AttentionPush {
  uint seq_q, seq_k, heads, group;        // group = heads / kv_heads
  uint splits, keys_per_split, flags;    // splits: of this dispatch (see split_base)
  float scale;
  uint q_sb, q_sh, q_ss, q_off;
  uint k_sb, k_sh, k_ss, k_off;
  uint v_sb, v_sh, v_ss, v_off;
  uint o_sb, o_sh, o_ss, o_off;
  uint m_sb, m_sh, m_ss, m_off;
  uint lse_off, kv_len_off;
  uint split_base;  // global index of this dispatch's first split (splits = splits in this dispatch)
  uint tile_base;   // global index of this dispatch's first query tile (one range of query tiles)
} pc;

#endif
