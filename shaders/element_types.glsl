// Per-operand storage types for kernels whose buffers do not share one dtype (the GEMM of the
// three-stage path reads f16 Q and K but writes f32 scores). An operand X is declared with
// X_TYPE = TYPE_F32 | TYPE_F16 | TYPE_BF16 before including this file; it then gets
//   X_T              the element type as declared in its buffer
//   X_to_f32(x)      a loaded element as f32
//   X_from_f32(v)    an f32 rounded to the element type (round to nearest even; NaN stays NaN)
// (The conversions themselves: half_floats.glsl.)
#ifndef VKATTN_ELEMENT_TYPES_GLSL
#define VKATTN_ELEMENT_TYPES_GLSL

#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_BF16 2

#include "half_floats.glsl"

#if A_TYPE == TYPE_F32
#define A_T float
#define A_to_f32(x) (x)
#elif A_TYPE == TYPE_F16
#define A_T uint16_t
#define A_to_f32(x) F16_TO_F32(x)
#else
#define A_T uint16_t
#define A_to_f32(x) BF16_TO_F32(x)
#endif

#if B_TYPE == TYPE_F32
#define B_T float
#define B_to_f32(x) (x)
#elif B_TYPE == TYPE_F16
#define B_T uint16_t
#define B_to_f32(x) F16_TO_F32(x)
#else
#define B_T uint16_t
#define B_to_f32(x) BF16_TO_F32(x)
#endif

#if C_TYPE == TYPE_F32
#define C_T float
#define C_to_f32(x) (x)
#define C_from_f32(v) (v)
#elif C_TYPE == TYPE_F16
#define C_T uint16_t
#define C_to_f32(x) F16_TO_F32(x)
#define C_from_f32(v) uint16_t(f32_to_f16_bits(v))
#else
#define C_T uint16_t
#define C_to_f32(x) BF16_TO_F32(x)
#define C_from_f32(v) uint16_t(f32_to_bf16_bits(v))
#endif

// Four consecutive elements at once, for kernels that read or write a binding through a second view
// of it (gemm_subgroup.comp): X4_T is the element type of that view (vec4, or four 16-bit values in
// a uvec2), B4_to_vec4 widens one, C4_from_vec4 narrows four f32 (as C_from_f32, element by element).
#if B_TYPE == TYPE_F32
#define B4_T vec4
#define B4_to_vec4(u4) (u4)
#elif B_TYPE == TYPE_F16
#define B4_T uvec2
#define B4_to_vec4(u4) vec4(unpackHalf2x16((u4).x), unpackHalf2x16((u4).y))
#else
#define B4_T uvec2
#define B4_to_vec4(u4) vec4(uintBitsToFloat((u4).x << 16), uintBitsToFloat((u4).x & 0xffff0000u), \
                            uintBitsToFloat((u4).y << 16), uintBitsToFloat((u4).y & 0xffff0000u))
#endif

#if C_TYPE == TYPE_F32
#define C4_T vec4
#define C4_from_vec4(v) (v)
#elif C_TYPE == TYPE_F16
#define C4_T uvec2
#define C4_from_vec4(v) uvec2(packHalf2x16((v).xy), packHalf2x16((v).zw))
#else
#define C4_T uvec2
#define C4_from_vec4(v) uvec2(f32_to_bf16_bits((v).x) | (f32_to_bf16_bits((v).y) << 16), \
                              f32_to_bf16_bits((v).z) | (f32_to_bf16_bits((v).w) << 16))
#endif

#endif
