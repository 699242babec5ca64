// The score modifiers (README, "Score modifiers"), shared by every kernel that forms or normalises
// scores. For query row i and key j, after s = scale * q.k (score.glsl):
//   softcap -> + ALiBi -> + float mask -> the boolean masks (causal, window, key lengths, bool mask)
//   -> softmax, with the sink of head h in each row's denominator.
// Each is a specialization constant of the pipeline (the host's modifier_constants): a call without
// one compiles none of its code. Include after the kernel's push block `pc` (seq_q, seq_k, heads,
// lse_off and, for the score modifiers, kv_len_off), having defined the kernel's ids:
//   MOD_SPEC_MODIFIERS, SINKS_BINDING                     (every including kernel: the sinks)
//   MOD_SPEC_WINDOW_LEFT, MOD_SPEC_WINDOW_RIGHT,
//   MOD_SPEC_SOFTCAP, ALIBI_BINDING                       (kernels that form scores)
#ifndef VKATTN_MODIFIERS_GLSL
#define VKATTN_MODIFIERS_GLSL

#include "shader_abi.h"

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

#ifdef MOD_SPEC_WINDOW_LEFT
layout(constant_id = MOD_SPEC_WINDOW_LEFT) const int WINDOW_LEFT = -1;    // -1: unbounded
layout(constant_id = MOD_SPEC_WINDOW_RIGHT) const int WINDOW_RIGHT = -1;  // -1: unbounded
layout(constant_id = MOD_SPEC_SOFTCAP) const float SOFTCAP = 0.0;
const bool HAS_SOFTCAP = (MODIFIERS & MOD_SOFTCAP) != 0u;
const bool HAS_ALIBI = (MODIFIERS & MOD_ALIBI) != 0u;
const bool HAS_WINDOW = WINDOW_LEFT >= 0 || WINDOW_RIGHT >= 0;

layout(binding = ALIBI_BINDING) readonly buffer AlibiBuf { float alibi_slopes[]; };

// The key lengths' element offset: the low half of kv_len_off (the high half is ALiBi's).
uint kv_len_offset() { return pc.kv_len_off & 0xffffu; }

// The diagonal of the call's alignment: query i sits at key i + diagonal_offset().
int diagonal_offset() { return (MODIFIERS & MOD_ALIGN_TOP_LEFT) != 0u ? 0 : int(SEQ_K) - int(SEQ_Q); }

// Keys [window_key_begin(i), window_key_end(i)) of query row i are inside the window, clamped to
// [0, seq_k]; the whole range without one.
uint window_key_begin(uint i) {
  if (WINDOW_LEFT < 0) return 0u;
  return uint(clamp(int(i) + diagonal_offset() - WINDOW_LEFT, 0, int(SEQ_K)));
}
uint window_key_end(uint i) {
  if (WINDOW_RIGHT < 0) return SEQ_K;
  return uint(clamp(int(i) + diagonal_offset() + WINDOW_RIGHT + 1, 0, int(SEQ_K)));
}

// The ALiBi slope of (batch b, query head h): slopes (heads) or (batch, heads).
float alibi_slope(uint b, uint h) {
  const uint row = (MODIFIERS & MOD_ALIBI_PER_BATCH) != 0u ? b * pc.heads : 0u;
  return alibi_slopes[(pc.kv_len_off >> 16) + row + h];
}

// c * tanh(s / c) for a finite score; NaN and +-inf (from NaN/Inf inputs) stay as they are. tanh as
// (1 - e^-2|x|) / (1 + e^-2|x|): no overflow for any |x|, within an ulp of 1 where it saturates.
float softcap_score(float s) {
  if (isnan(s) || isinf(s)) return s;
  const float x = s / SOFTCAP;
  const float t = exp(-2.0 * abs(x));
  return SOFTCAP * sign(x) * ((1.0 - t) / (1.0 + t));
}

// The score after the softcap and ALiBi (before the float mask): s from scale_dot / scale_rescaled_dot,
// `slope` from alibi_slope (unused without ALiBi). add_bias (score.glsl) keeps the saturation rule.
float modify_score(float s, float slope, uint i, uint j) {
  if (HAS_SOFTCAP) s = softcap_score(s);
  if (HAS_ALIBI) s = add_bias(s, -slope * abs(float(int(i) + diagonal_offset() - int(j))));
  return s;
}
#endif

#endif
