// f32 to and from the 16-bit storage formats, f16 and bf16: the one definition of each conversion,
// for storage_types.glsl (one dtype for Q, K, V and O) and element_types.glsl (one per GEMM operand).
// Narrowing rounds to nearest even and keeps NaN a NaN. Only 16-bit storage is used
// (storageBuffer16BitAccess), no 16-bit arithmetic: 16-bit values appear only in buffers and in these
// conversions, hence macros for the widening ones (they take a uint16_t).
#ifndef VKATTN_HALF_FLOATS_GLSL
#define VKATTN_HALF_FLOATS_GLSL

#extension GL_EXT_shader_16bit_storage : require

// Widening one f16 value: unpackHalf2x16, one instruction on GPUs. llvmpipe runs it on a single
// 16-bit value far slower than integer operations and selects (f16 prefill on lavapipe 1.2-1.4x
// faster with them: the benchmark notebook (docs/performance.md), "f16 widening on CPU devices"), so the CPU devices'
// kernels define F16_WIDEN_BY_BITS before including this file. (Pairs from a 32-bit word, as the
// decode form reads them, keep unpackHalf2x16: that is not slower there.)
#ifdef F16_WIDEN_BY_BITS
float f16_bits_to_f32(uint h) {
  const uint em = h & 0x7fffu;
  float f = uintBitsToFloat((em << 13) + 0x38000000u);                  // normal: exponent bias 15 -> 127
  f = em < 0x400u ? float(em) * 5.9604644775390625e-8 : f;             // zero, subnormal: m x 2^-24
  f = em >= 0x7c00u ? uintBitsToFloat((em << 13) | 0x7f800000u) : f;  // Inf, NaN (its payload kept)
  return uintBitsToFloat(floatBitsToUint(f) | ((h & 0x8000u) << 16));
}
#define F16_TO_F32(value) f16_bits_to_f32(uint(value))
#else
#define F16_TO_F32(value) (unpackHalf2x16(uint(value)).x)
#endif
// bf16 is the upper half of an f32: widening is a shift.
#define BF16_TO_F32(value) uintBitsToFloat(uint(value) << 16)

uint f32_to_f16_bits(float v) { return packHalf2x16(vec2(v, 0.0)) & 0xffffu; }
// One expression, not an early return for NaN: written with the `if`, a shader that stores many bf16
// values (the decode kernel writes 64 per lane) took Mesa 25.0.7's lavapipe 2.3x as long to JIT as its
// f16 twin (3.8 s against 1.7 s; 1.65 s with the select).
uint f32_to_bf16_bits(float v) {
  const uint u = floatBitsToUint(v);
  return isnan(v) ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

#endif
