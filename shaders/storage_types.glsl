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
#include "half_floats.glsl"
#define STORAGE_T uint16_t
#if defined(DTYPE_F16)
#define to_f32(value) F16_TO_F32(value)
#define from_f32(v) uint16_t(f32_to_f16_bits(v))
#else
#define to_f32(value) BF16_TO_F32(value)
#define from_f32(v) uint16_t(f32_to_bf16_bits(v))
#endif
#else
#error "define one of DTYPE_F32, DTYPE_F16, DTYPE_BF16"
#endif

#endif
