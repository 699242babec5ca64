// The score modifiers (docs/semantics.md, "Score modifiers"), shared by every kernel that forms or normalises
// scores. For query row i and key j, after s = scale * q.k (score.glsl):
//   softcap -> + ALiBi -> + float mask -> the boolean masks (causal, window, key lengths, bool mask)
//   -> softmax, with the sink of head h in each row's denominator.
// Each is a specialization constant of the pipeline (the host's modifier_constants): a call without
// one compiles none of its code. Include after the kernel's push block `pc` (seq_q, seq_k, heads,
// lse_off and, for the score modifiers, kv_len_off), having defined MOD_KERNEL as the kernel's kind
// below: which constants and bindings (shader_abi.h) the modifiers take is decided here, per kind, as
// the host's runtime/per_head_bindings.hpp and modifier_constants decide it.
#ifndef VKATTN_MODIFIERS_GLSL
#define VKATTN_MODIFIERS_GLSL

#include "shader_abi.h"

#define MOD_KERNEL_ATTENTION 1  // the fused kernels: form scores, every modifier
#define MOD_KERNEL_SOFTMAX 2    // the three-stage path's row softmax: forms the scores' final values
#define MOD_KERNEL_COMBINE 3    // the split-KV combine: only the sinks (the split kernels leave them to it)
#define MOD_KERNEL_BACKWARD 4   // the backward pass's kernels: form scores again, every modifier

#if MOD_KERNEL == MOD_KERNEL_ATTENTION
#define MOD_SPEC_MODIFIERS SPEC_ATTENTION_MODIFIERS
#define MOD_FORMS_SCORES  // the block of MOD_SPEC_BLOCK constants at MOD_SPEC_MODIFIERS
#define ALIBI_BINDING ATTENTION_ALIBI_BINDING
#define SINKS_BINDING ATTENTION_SINKS_BINDING
#elif MOD_KERNEL == MOD_KERNEL_SOFTMAX
#define MOD_SPEC_MODIFIERS SPEC_SOFTMAX_MODIFIERS
#define MOD_FORMS_SCORES
#define ALIBI_BINDING SOFTMAX_ALIBI_BINDING
#define SINKS_BINDING SOFTMAX_SINKS_BINDING
#elif MOD_KERNEL == MOD_KERNEL_BACKWARD
#define MOD_SPEC_MODIFIERS SPEC_BACKWARD_MODIFIERS
#define MOD_FORMS_SCORES
#define ALIBI_BINDING BACKWARD_ALIBI_BINDING
#define SINKS_BINDING BACKWARD_SINKS_BINDING
#elif MOD_KERNEL == MOD_KERNEL_COMBINE
#define MOD_SPEC_MODIFIERS SPEC_COMBINE_MODIFIERS
#define SINKS_BINDING COMBINE_SINKS_BINDING
#else
#error "define MOD_KERNEL as one of the kinds above before including modifiers.glsl"
#endif

layout(constant_id = MOD_SPEC_MODIFIERS) const uint MODIFIERS = 0u;  // MOD_* bits
const bool HAS_SINKS = (MODIFIERS & MOD_SINKS) != 0u;

layout(binding = SINKS_BINDING) readonly buffer SinksBuf { float sinks[]; };

// The LSE's element offset in its binding: the low half of lse_off (the high half is the sinks').
uint lse_offset() { return pc.lse_off & 0xffffu; }

// The sink logit of query head h.
float sink_logit(uint h) { return sinks[(pc.lse_off >> 16) + h]; }

// Adds the sink of a row to its running max m and sum l (natural units; m = -inf and l = 0 for a row
// with no visible key) and returns the factor exp(m - m') its accumulator must take. A row with no
// visible key ends with l = 1 and m = the sink: O = 0, LSE = the sink.
float add_sink(inout float m, inout float l, float sink) {
  const float m_new = max(m, sink);
  const float factor = exp(m - m_new);
  l = l * factor + exp(sink - m_new);
  m = m_new;
  return factor;
}

// The sink of query head h added to a row (add_sink) when the pipeline has the sinks; else the row
// is left as it is and the factor is 1. Kernels call it where a whole row ends (not in a split part:
// the combine adds the sink of a split row once).
float add_head_sink(inout float m, inout float l, uint h) {
  return HAS_SINKS ? add_sink(m, l, sink_logit(h)) : 1.0;
}

// A row max in the tiled kernel's units of log2(e)/2 (attention_tiled.comp) in natural units, finite:
// +-T_MAX (a saturated score) is +-FLT_MAX exactly, not the product T_MAX * 2 ln 2, which rounds a few
// ulps below it, so that saturated scores tie with a sink of +-FLT_MAX as they do in natural units.
float half_log2_to_natural(float m) {
  const float flt_max = uintBitsToFloat(0x7f7fffffu), t_max = uintBitsToFloat(TILED_T_MAX_BITS);
  if (abs(m) >= t_max) return sign(m) * flt_max;
  return clamp(m * uintBitsToFloat(TILED_TWO_LN2_BITS), -flt_max, flt_max);
}

#ifdef MOD_FORMS_SCORES
// The window's sides as the host resolved them (modifier_constants): WINDOW_UNBOUNDED, or a side below
// the call's seq_q + seq_k (a longer side bounds nothing: the host gives it as unbounded). Unsigned, so
// that every side up to 2^32 - 2 is held exactly (sequences are below 2^31).
const uint WINDOW_UNBOUNDED = 0xffffffffu;
layout(constant_id = MOD_SPEC_MODIFIERS + MOD_SPEC_WINDOW_LEFT_OFFSET) const uint WINDOW_LEFT = WINDOW_UNBOUNDED;
layout(constant_id = MOD_SPEC_MODIFIERS + MOD_SPEC_WINDOW_RIGHT_OFFSET) const uint WINDOW_RIGHT = WINDOW_UNBOUNDED;
layout(constant_id = MOD_SPEC_MODIFIERS + MOD_SPEC_SOFTCAP_OFFSET) const float SOFTCAP = 0.0;
const bool HAS_SOFTCAP = (MODIFIERS & MOD_SOFTCAP) != 0u;
const bool HAS_ALIBI = (MODIFIERS & MOD_ALIBI) != 0u;
// Whether modify_score changes a score at all: the kernels skip its unit conversions when not.
const bool MODIFIES_SCORES = HAS_SOFTCAP || HAS_ALIBI;
const bool HAS_WINDOW = WINDOW_LEFT != WINDOW_UNBOUNDED || WINDOW_RIGHT != WINDOW_UNBOUNDED;

layout(binding = ALIBI_BINDING) readonly buffer AlibiBuf { float alibi_slopes[]; };

// The key lengths' element offset: the low half of kv_len_off (the high half is ALiBi's).
uint kv_len_offset() { return pc.kv_len_off & 0xffffu; }

// The diagonal of the call's alignment: query i sits at key i + diagonal_offset().
int diagonal_offset() { return (MODIFIERS & MOD_ALIGN_TOP_LEFT) != 0u ? 0 : int(SEQ_K) - int(SEQ_Q); }

// Keys [window_key_begin(i), window_key_end(i)) of query row i are inside the window, clamped to
// [0, seq_k]; the whole range without one. No sum here can leave 32 bits for any side: the diagonal
// d = i + off lies in (-seq_q, seq_k), and each side is compared with the room it has before it is
// added (a side of 2^31 - 1 once wrapped d + side + 1 to a negative end: every key masked).
uint window_key_begin(uint i) {
  if (WINDOW_LEFT == WINDOW_UNBOUNDED) return 0u;
  const int d = int(i) + diagonal_offset();
  if (d <= 0 || WINDOW_LEFT >= uint(d)) return 0u;
  return min(uint(d) - WINDOW_LEFT, SEQ_K);
}
uint window_key_end(uint i) {
  if (WINDOW_RIGHT == WINDOW_UNBOUNDED) return SEQ_K;
  const int d = int(i) + diagonal_offset();
  // seq_k - d is in [1, seq_q + seq_k]: exact in 32 unsigned bits, as is WINDOW_RIGHT + 1 (< 2^32 - 1).
  if (WINDOW_RIGHT + 1u >= SEQ_K - uint(d)) return SEQ_K;
  // d + right + 1 is now below seq_k (and above -seq_q): exact once the wrapped sum is read as int.
  return uint(max(int(uint(d) + WINDOW_RIGHT + 1u), 0));
}

// The ALiBi slope of (batch b, query head h): slopes (heads) or (batch, heads).
float alibi_slope(uint b, uint h) {
  const uint row = (MODIFIERS & MOD_ALIBI_PER_BATCH) != 0u ? b * pc.heads : 0u;
  return alibi_slopes[(pc.kv_len_off >> 16) + row + h];
}

// ALiBi's bias -slope * |d| for a distance d: the f32 value of the exact product, saturating to
// +-FLT_MAX beyond the f32 range like every product of finite inputs (score.glsl), so that a finite
// slope never gives an infinite bias; a NaN or infinite slope propagates.
float alibi_bias(float slope, int distance) {
  const float bias = -slope * float(abs(distance));
  return isinf(slope) ? bias : saturate_finite(bias);
}

// tanh(x) / x from tanh's Taylor series, for |x| <= SOFTCAP_SERIES_LIMIT, where the closed form below
// would cancel in 1 - e^-2|x|: the series alternates with falling terms there, so its error is below
// the first omitted term, 21844/6081075 x^12 < 2^-28.
const float SOFTCAP_SERIES_LIMIT = 0.3;
float tanh_over_x(float x2) {
  return 1.0 +
         x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0 + x2 * (-1382.0 / 155925.0)))));
}

// c * tanh(s / c) for a finite score; NaN and +-inf (from NaN/Inf inputs) stay as they are. Where
// |s / c| is small (a large c: how users write "almost no cap") it is s * (tanh(x) / x), which keeps
// s exactly when x underflows; elsewhere tanh as (1 - e^-2|x|) / (1 + e^-2|x|): no overflow for any
// |x|, within an ulp of 1 where it saturates.
float softcap_score(float s) {
  if (isnan(s) || isinf(s)) return s;
  const float x = s / SOFTCAP;
  if (abs(x) <= SOFTCAP_SERIES_LIMIT) return s * tanh_over_x(x * x);
  const float t = exp(-2.0 * abs(x));
  return SOFTCAP * sign(x) * ((1.0 - t) / (1.0 + t));
}

// The score after the score modifiers, in the chain's order (before the float mask); modify_capped_score
// the steps after the softcap (the backward kernels apply the softcap themselves, for its derivative): s from scale_dot / scale_rescaled_dot,
// `slope` from alibi_slope (unused without ALiBi). add_bias (score.glsl) keeps the saturation rule.
float modify_capped_score(float s, float slope, uint i, uint j) {
  if (HAS_ALIBI) s = add_bias(s, alibi_bias(slope, int(i) + diagonal_offset() - int(j)));
  return s;
}
float modify_score(float s, float slope, uint i, uint j) {
  if (HAS_SOFTCAP) s = softcap_score(s);
  return modify_capped_score(s, slope, i, j);
}
#endif

#endif
