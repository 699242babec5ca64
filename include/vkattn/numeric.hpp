// Conversions between f32 and the 16-bit storage types, bit-exact with the shaders (round to
// nearest even; NaN stays NaN). Used by callers to prepare data and by the reference to see the same
// rounded inputs the GPU sees.
#pragma once

#include <cstdint>

#include "vkattn/types.hpp"

namespace vkattn {

uint16_t f32_to_f16_bits(float value);
float f16_bits_to_f32(uint16_t bits);
uint16_t f32_to_bf16_bits(float value);
float bf16_bits_to_f32(uint16_t bits);

// value rounded to `dtype` and back to f32 (identity for f32).
float round_to(DType dtype, float value);

// Packs `count` floats into `dtype` storage at `dst` (dtype_size(dtype) * count bytes), and back.
void encode(DType dtype, const float* src, void* dst, std::size_t count);
void decode(DType dtype, const void* src, float* dst, std::size_t count);

}  // namespace vkattn
