// The f32 score rule, shared by every kernel that forms a product of finite inputs (docs/semantics.md,
// "Scores beyond the f32 range"): finite inputs never give NaN or Inf.
//   - scale * (q . k) is the f32 value of the exact product, and one beyond the f32 range saturates
//     to +-FLT_MAX (then + bias, saturating again; a -inf bias masks, NaN / +inf propagate);
//   - NaN / Inf already in an input still propagate: only overflow of finite values saturates.
// The fast path is the plain f32 dot; a dot that comes out NaN or Inf (an overflowing product or
// partial sum, or a non-finite input) is recomputed by the caller with every operand multiplied
// by DOWN (2^-75, exact), which cannot overflow, and scaled back here with the exponent kept apart.
#ifndef VKATTN_SCORE_GLSL
#define VKATTN_SCORE_GLSL

#define FLT_MAX uintBitsToFloat(0x7f7fffffu)

// 2^-75 per operand: |x| < 2^128 becomes < 2^53, a product < 2^106, and a sum of up to 2^20 of
// them < 2^126 (P.V sums over seq_k keys, projections over the model dim).
#define DOWN uintBitsToFloat(uint(127 - 75) << 23)
const int DOWN_EXP2 = 150;  // the recomputed dot is dot * 2^-150

// x with an overflow to +-inf brought back to +-FLT_MAX; only for results of finite operands.
float saturate_finite(float x) { return isinf(x) ? sign(x) * FLT_MAX : x; }

vec4 saturate_finite(vec4 x) { return mix(x, sign(x) * FLT_MAX, isinf(x)); }

// 2^e for e in [-126, 127], exactly.
float pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23); }

// scale * dot from the dot (finite) of finite operands, saturating.
float scale_dot(float dot, float scale) { return saturate_finite(dot * scale); }
vec4 scale_dot(vec4 dot, float scale) { return saturate_finite(dot * scale); }

// scale * dot from a dot recomputed as sum(a * DOWN * b * DOWN) = dot * 2^-150. Non-finite means a
// NaN or Inf operand: it propagates as in the fast path. Otherwise the product is formed as
// (dot_down * mantissa(scale)) * 2^(exponent(scale) + 150) in steps of at most 2^127, so it
// overflows only if the exact result does (then saturates) and never underflows early.
float scale_rescaled_dot(float dot_down, float scale) {
  if (isinf(dot_down) || isnan(dot_down)) return dot_down * scale;
  int e;
  const float mantissa = frexp(scale, e);  // scale = mantissa * 2^e, |mantissa| in [0.5, 1) or 0
  float x = dot_down * mantissa;
  e += DOWN_EXP2;  // in [1, 278]: scale >= 2^-149 (a subnormal) has e >= -148
  // Three steps cover e <= 381; once e is 0 a step multiplies by 2^0 = 1. Straight-line code, not a
  // loop: lavapipe counts every loop iteration against its per-invocation limit (docs/devices.md).
  int n = min(e, 127);
  x *= pow2(n);
  e -= n;
  n = min(e, 127);
  x *= pow2(n);
  e -= n;
  x *= pow2(min(e, 127));
  return saturate_finite(x);
}

// The biased score: a finite bias added to a finite score saturates; an infinite score (from an
// Inf input) or a non-finite bias (+inf, NaN; -inf is taken as masked before this) propagates.
float add_bias(float score, float bias) {
  const float s = score + bias;
  return (isinf(score) || isinf(bias)) ? s : saturate_finite(s);
}
vec4 add_bias(vec4 score, vec4 bias) {
  const vec4 s = score + bias;
  return mix(saturate_finite(s), s, bvec4(uvec4(isinf(score)) | uvec4(isinf(bias))));
}

#endif
