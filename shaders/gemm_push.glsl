// Push constants of gemm.comp. Mirrored by host/gemm_push.hpp (GemmPush); keep the two in the same
// order. Offsets and strides are in elements of their operand's buffer.
//
// Batch index z = (b, h) with b = z / heads, h = z % heads. Element (r, c) of operand X is at
//   X_off + b*X_sb + h'*X_sh + r*X_sr + (c / X_cblk)*X_sblk + (c % X_cblk)*X_sc
// with h' = h for A and C and h' = (head_base + h) / group for B (the KV head of a GQA group).
// The column blocks let A read heads merged and C write heads split, in place (README.md, "How it works").
#ifndef VKATTN_GEMM_PUSH_GLSL
#define VKATTN_GEMM_PUSH_GLSL

#define GEMM_FLAG_BIAS 1u       // C += bias[bias_off + n] (bias in B's element type)
#define GEMM_FLAG_SKIP_ZERO_A 2u  // an A element of exactly 0 contributes nothing, even against NaN/Inf in B

layout(push_constant) uniform GemmPush {
  uint m, n, k, heads, group, head_base, flags;
  float alpha;
  uint a_off, a_sb, a_sh, a_sr, a_sc, a_cblk, a_sblk;
  uint b_off, b_sb, b_sh, b_sr, b_sc, b_cblk, b_sblk;
  uint c_off, c_sb, c_sh, c_sr, c_sc, c_cblk, c_sblk;
  uint bias_off;
} pc;

#endif
