// Reads one element of an explicit attention mask as an additive bias. The mask buffer is declared
// as 32-bit words so that boolean (1-byte) and f16 masks need no 8/16-bit storage features; reads
// extract the element from its word. A boolean false, like a float -inf, becomes -inf: masked.
#ifndef VKATTN_MASK_GLSL
#define VKATTN_MASK_GLSL

#define NEG_INF uintBitsToFloat(0xff800000u)

// Start of the running max: finite, so that exp(m_old - m_new) is never (-inf) - (-inf) = NaN; and
// -FLT_MAX, the lowest score a visible key can have (score.glsl), so that a row whose every score
// saturated to -FLT_MAX still has m = its scores and sum l > 0 (not taken for a fully masked row).
const float M_INIT = -3.40282347e38;

float mask_bias(uint kind, uint e) {
  if (kind == MASK_BOOL) {
    uint byte_value = (mask_words[e >> 2] >> ((e & 3u) * 8u)) & 0xffu;
    return byte_value != 0u ? 0.0 : NEG_INF;
  }
  if (kind == MASK_F32) return uintBitsToFloat(mask_words[e]);
  // MASK_F16
  return unpackHalf2x16((mask_words[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu).x;
}

#endif
