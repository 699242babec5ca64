// f32 <-> f16 / bf16 conversions with round-to-nearest-even, bit-exact with what the shaders do
// (packHalf2x16 / the bf16 rounding in the shaders), so the reference sees the GPU's inputs.
#include "vkattn/numeric.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include "vkattn/error.hpp"

namespace vkattn {

uint16_t f32_to_f16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;

  if (abs >= 0x7f800000u) {
    // Inf stays inf; NaN becomes a quiet NaN (the quiet bit guarantees a nonzero mantissa even when
    // the payload's top bits are all zero), keeping what fits of the payload.
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  // 65520 is the midpoint between the largest half (65504) and 65536: it and above round to inf.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);

  if (abs >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest
    // even. A carry out of the mantissa correctly bumps the exponent.
    const uint32_t r = abs - (112u << 23);
    return static_cast<uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }

  // Subnormal half (or zero): the value is m * 2^-24 with m in [0, 1024].
  const uint32_t e = abs >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to (signed) zero
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t m = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (m & 1u))) ++m;  // m == 1024 is the smallest normal: still right
  return static_cast<uint16_t>(sign | m);
}

float f16_bits_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mant), -24);  // exact
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t f32_to_bf16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // Rounding could carry a NaN's payload into inf; return a quiet NaN with the sign instead.
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u);
  }
  // Round to nearest even; overflow past the largest bf16 carries into the exponent and gives inf.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_bits_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::f32:
      return value;
    case DType::f16:
      return f16_bits_to_f32(f32_to_f16_bits(value));
    case DType::bf16:
      return bf16_bits_to_f32(f32_to_bf16_bits(value));
  }
  throw Error("round_to: invalid dtype " + std::to_string(static_cast<int>(dtype)));
}

void encode(DType dtype, const float* src, void* dst, std::size_t count) {
  switch (dtype) {
    case DType::f32:
      if (count) std::memcpy(dst, src, count * sizeof(float));
      return;
    case DType::f16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (std::size_t i = 0; i < count; ++i) out[i] = f32_to_f16_bits(src[i]);
      return;
    }
    case DType::bf16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (std::size_t i = 0; i < count; ++i) out[i] = f32_to_bf16_bits(src[i]);
      return;
    }
  }
  throw Error("encode: invalid dtype " + std::to_string(static_cast<int>(dtype)));
}

void decode(DType dtype, const void* src, float* dst, std::size_t count) {
  switch (dtype) {
    case DType::f32:
      if (count) std::memcpy(dst, src, count * sizeof(float));
      return;
    case DType::f16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (std::size_t i = 0; i < count; ++i) dst[i] = f16_bits_to_f32(in[i]);
      return;
    }
    case DType::bf16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (std::size_t i = 0; i < count; ++i) dst[i] = bf16_bits_to_f32(in[i]);
      return;
    }
  }
  throw Error("decode: invalid dtype " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace vkattn
