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
// of it (gemm_subgroup.comp, which enables GL_EXT_shader_explicit_arithmetic_types_int64): X4_T is
// the element type of that view, X4_to_vec4 widens one, C4_from_vec4 narrows four f32 (as
// C_from_f32, element by element). Four 16-bit values are one 64-bit word and four f32 two: llvmpipe
// loads a vector lane by lane and component by component, so fewer, wider components load faster
// (a f16 GEMM with M = 16 on lavapipe: 1.3-1.4x with 64-bit words against 32-bit ones).
#define X4_OF_HALVES_TO_VEC4(w, WIDEN) vec4(WIDEN(uint(w)), WIDEN(uint((w) >> 32)))
#define F16_PAIR_TO_VEC2(u) unpackHalf2x16(u)
#define BF16_PAIR_TO_VEC2(u) vec2(uintBitsToFloat((u) << 16), uintBitsToFloat((u) & 0xffff0000u))
#define U64X2_TO_VEC4(w) vec4(uintBitsToFloat(uint((w).x)), uintBitsToFloat(uint((w).x >> 32)), \
                              uintBitsToFloat(uint((w).y)), uintBitsToFloat(uint((w).y >> 32)))
#if A_TYPE == TYPE_F32
#define A4_T u64vec2
#define A4_to_vec4(w) U64X2_TO_VEC4(w)
#elif A_TYPE == TYPE_F16
#define A4_T uint64_t
#define A4_to_vec4(w) X4_OF_HALVES_TO_VEC4(w, F16_PAIR_TO_VEC2)
#else
#define A4_T uint64_t
#define A4_to_vec4(w) X4_OF_HALVES_TO_VEC4(w, BF16_PAIR_TO_VEC2)
#endif

#if B_TYPE == TYPE_F32
#define B4_T u64vec2
#define B4_to_vec4(w) U64X2_TO_VEC4(w)
#elif B_TYPE == TYPE_F16
#define B4_T uint64_t
#define B4_to_vec4(w) X4_OF_HALVES_TO_VEC4(w, F16_PAIR_TO_VEC2)
#else
#define B4_T uint64_t
#define B4_to_vec4(w) X4_OF_HALVES_TO_VEC4(w, BF16_PAIR_TO_VEC2)
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
