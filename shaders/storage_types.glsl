// Storage element type of Q, K, V and O, chosen at compile time (one SPIR-V module per dtype) because
// it changes the declared element type of the buffers. All arithmetic is f32.
//   STORAGE_T       element type as declared in the buffers
//   to_f32(x)       a loaded element as f32
//   from_f32(v)     an f32 rounded to the storage type (round to nearest even; NaN stays NaN)
#ifndef VKATTN_STORAGE_TYPES_GLSL
#define VKATTN_STORAGE_TYPES_GLSL

#if defined(DTYPE_F32)
#define STORAGE_T float
#define to_f32(x) (x)
#define from_f32(v) (v)
#elif defined(DTYPE_F16) || defined(DTYPE_BF16)
// Only 16-bit *storage* is used (storageBuffer16BitAccess), not 16-bit arithmetic (shaderInt16), so
// 16-bit values may appear only in buffers and in conversions: hence macros, not functions.
#extension GL_EXT_shader_16bit_storage : require
#define STORAGE_T uint16_t
#if defined(DTYPE_F16)
#define to_f32(value) (unpackHalf2x16(uint(value)).x)
#define from_f32(v) uint16_t(f32_to_f16_bits(v))
uint f32_to_f16_bits(float v) { return packHalf2x16(vec2(v, 0.0)) & 0xffffu; }
#else
// bf16 is the upper half of an f32: widening is a shift; narrowing rounds to nearest even.
#define to_f32(x) uintBitsToFloat(uint(x) << 16)
#define from_f32(v) uint16_t(f32_to_bf16_bits(v))
uint f32_to_bf16_bits(float v) {
  uint u = floatBitsToUint(v);
  if (isnan(v)) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
#endif
#else
#error "define one of DTYPE_F32, DTYPE_F16, DTYPE_BF16"
#endif

#endif
