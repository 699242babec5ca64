// Quantizing 32 values to one q8_0 block on the device, bit for bit as the library's quantize_q8_0
// (core/q8_0.cpp) does on the host, whatever the device's rounding of division and of
// packHalf2x16: d = f16(f32(max|x| / 127)), both roundings to nearest even; q = x / d rounded half
// away from zero, clamped to [-127, 127]; d = 0 gives q = 0. Only exact f32 operations decide: the
// division's result is corrected by its exact residual, and each q by exact comparisons.
#ifndef VKATTN_Q8_0_QUANTIZE_GLSL
#define VKATTN_Q8_0_QUANTIZE_GLSL

// max|x| / 127 rounded to nearest even in f32, for max|x| >= 0 finite. Vulkan allows 2.5 ulp of error
// in a division: of the five floats around its result, the nearest to the quotient leaves the
// smallest residual |m - 127 c|, computed exactly as (m - 128 c) + c (each step a subtraction of
// numbers within a factor of two of each other: Sterbenz). A tie (the quotient halfway) keeps the
// even one.
float div127_rne(float m) {
  if (m == 0.0) return 0.0;
  const uint a = floatBitsToUint(m / 127.0);
  uint best = a;
  precise float best_r = abs((m - 128.0 * uintBitsToFloat(a)) + uintBitsToFloat(a));
  [[unroll]] for (int k = -2; k <= 2; ++k) {
    if (k == 0) continue;
    const uint cand = uint(int(a) + k);
    const float c = uintBitsToFloat(cand);
    precise float r = abs((m - 128.0 * c) + c);  // (precise: no fused or reordered steps)
    if (r < best_r || (r == best_r && (cand & 1u) == 0u)) best = cand, best_r = r;
  }
  return uintBitsToFloat(best);
}

// f32 (>= 0, finite) to f16 bits, rounded to nearest even: inf at 65520 and above, subnormals below
// 2^-14, 0 below 2^-25 (the integer steps of numeric.cpp's f32_to_f16_bits).
uint f16_bits_rne(float v) {
  const uint x = floatBitsToUint(v);
  if (x >= 0x477ff000u) return 0x7c00u;
  if (x >= 0x38800000u) {
    const uint r = x - (112u << 23);
    return (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  }
  const uint e = x >> 23;
  if (e < 102u) return 0u;
  const uint mant = (x & 0x7fffffu) | 0x800000u;
  const uint shift = 126u - e;  // 14..24
  const uint half_ = 1u << (shift - 1u), rest = mant & ((1u << shift) - 1u);
  uint h = mant >> shift;
  if (rest > half_ || (rest == half_ && (h & 1u) != 0u)) ++h;
  return h;
}

// q for value x and scale d > 0 (an f16 value, so (2n + 1) * d / 2 is exact in f32 for n <= 127):
// n = |x| / d rounded half away from zero, decided by exact comparisons around the division's guess.
int q8_0_level(float x, float d) {
  const float ax = abs(x);
  // (The thresholds are exact products; `precise` keeps them unfused.)
  uint n = uint(min(floor(ax / d), 127.0));
  if (n > 0u && ax < (float(2u * n - 1u) * d) * 0.5) --n;
  if (n < 127u && ax >= (float(2u * n + 1u) * d) * 0.5) ++n;
  if (n > 0u && ax < (float(2u * n - 1u) * d) * 0.5) --n;
  if (n < 127u && ax >= (float(2u * n + 1u) * d) * 0.5) ++n;
  return x < 0.0 ? -int(n) : int(n);
}

#endif
