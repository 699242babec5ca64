// Push constants of attention_fused.comp. Mirrored by host/attention_push.hpp (AttentionPush);
// keep the two in the same order. Strides and offsets are in elements of their buffer.
#ifndef VKATTN_ATTENTION_PUSH_GLSL
#define VKATTN_ATTENTION_PUSH_GLSL

// flags
#define CAUSAL_MASK 3u        // bits 0-1: 0 none, 1 top-left, 2 bottom-right
#define CAUSAL_TOP_LEFT 1u
#define CAUSAL_BOTTOM_RIGHT 2u
#define MASK_KIND_SHIFT 2u    // bits 2-3: 0 none, 1 boolean (bytes), 2 f32, 3 f16
#define MASK_NONE 0u
#define MASK_BOOL 1u
#define MASK_F32 2u
#define MASK_F16 3u
#define FLAG_KV_LENGTHS 16u
#define FLAG_WRITE_LSE 32u
#define FLAG_PARTIAL 64u      // write per-split partial (O, LSE) to the workspace for the combine pass

layout(push_constant) uniform AttentionPush {
  uint seq_q, seq_k, heads, group;        // group = heads / kv_heads
  uint splits, keys_per_split, flags;
  float scale;
  uint q_sb, q_sh, q_ss, q_off;
  uint k_sb, k_sh, k_ss, k_off;
  uint v_sb, v_sh, v_ss, v_off;
  uint o_sb, o_sh, o_ss, o_off;
  uint m_sb, m_sh, m_ss, m_off;
  uint lse_off, kv_len_off;
} pc;

#endif
