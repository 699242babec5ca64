// f32 <-> f16 / bf16 conversions: exact bit patterns for the cases that matter (ties, subnormals,
// overflow, NaN), and round trips over every 16-bit pattern.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "support.hpp"

using namespace vkattn;

namespace {
bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("f16: exact values, overflow and infinities") {
    CHECK(f32_to_f16_bits(0.0f) == 0x0000);
    CHECK(f32_to_f16_bits(-0.0f) == 0x8000);
    CHECK(f32_to_f16_bits(1.0f) == 0x3c00);
    CHECK(f32_to_f16_bits(-2.0f) == 0xc000);
    CHECK(f32_to_f16_bits(65504.0f) == 0x7bff);       // largest finite half
    CHECK(f32_to_f16_bits(65519.99f) == 0x7bff);      // below the midpoint to 65536: stays finite
    CHECK(f32_to_f16_bits(65520.0f) == 0x7c00);       // the midpoint rounds (to even) to inf
    CHECK(f32_to_f16_bits(1e10f) == 0x7c00);
    CHECK(f32_to_f16_bits(-1e10f) == 0xfc00);
    CHECK(f32_to_f16_bits(kInf) == 0x7c00);
    CHECK(f32_to_f16_bits(-kInf) == 0xfc00);
    CHECK(f16_bits_to_f32(0x7c00) == kInf);
    CHECK(f16_bits_to_f32(0xfc00) == -kInf);
    CHECK(f16_bits_to_f32(0x3555) == doctest::Approx(0.33325195).epsilon(1e-7));
  }

  TEST_CASE("f16: round to nearest even") {
    CHECK(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie: down to even
    CHECK(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie: up to even
    CHECK(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);  // past tie
    CHECK(f32_to_f16_bits(2049.0f) == 0x6800);  // 2048 | 2050: tie to 2048
    CHECK(f32_to_f16_bits(2051.0f) == 0x6802);  // 2050 | 2052: tie to 2052
    CHECK(f32_to_f16_bits(2047.5f) == 0x6800);  // 2047 | 2048 at 2047.5: tie to 2048 (even)
  }

  TEST_CASE("f16: subnormals") {
    const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal half
    CHECK(f32_to_f16_bits(tiny) == 0x0001);
    CHECK(f16_bits_to_f32(0x0001) == tiny);
    CHECK(f16_bits_to_f32(0x03ff) == 1023 * tiny);
    CHECK(f16_bits_to_f32(0x8001) == -tiny);
    CHECK(f32_to_f16_bits(std::ldexp(1.0f, -25)) == 0x0000);         // tie between 0 and tiny: 0
    CHECK(f32_to_f16_bits(std::ldexp(1.5f, -25)) == 0x0001);         // above the tie
    CHECK(f32_to_f16_bits(std::ldexp(3.0f, -25)) == 0x0002);         // 1.5 tiny: tie to even 2
    CHECK(f32_to_f16_bits(std::ldexp(1.0f, -26)) == 0x0000);         // underflow
    CHECK(f32_to_f16_bits(-std::ldexp(1.0f, -30)) == 0x8000);        // keeps its sign
    CHECK(f32_to_f16_bits(1023.5f * tiny) == 0x0400);                // rounds up into the normals
    CHECK(f32_to_f16_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
    CHECK(f32_to_f16_bits(std::ldexp(1.0f, -14)) == 0x0400);         // smallest normal
  }

  TEST_CASE("f16: NaN stays NaN") {
    CHECK(f16_is_nan(f32_to_f16_bits(kNaN)));
    CHECK(f16_is_nan(f32_to_f16_bits(-kNaN)));
    CHECK(f16_is_nan(f32_to_f16_bits(std::bit_cast<float>(0x7f800001u))));  // signalling, low payload
    CHECK(f16_is_nan(f32_to_f16_bits(std::bit_cast<float>(0x7fffe000u))));
    CHECK(std::isnan(f16_bits_to_f32(0x7e00)));
    CHECK(std::isnan(f16_bits_to_f32(0x7c01)));
  }

  TEST_CASE("f16: every pattern round-trips") {
    int failures = 0;
    for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
      const uint16_t h = static_cast<uint16_t>(bits);
      const float f = f16_bits_to_f32(h);
      const uint16_t back = f32_to_f16_bits(f);
      const bool ok = f16_is_nan(h) ? f16_is_nan(back) : back == h;
      if (!ok && failures++ < 5) FAIL_CHECK("f16 0x" << std::hex << bits << " -> " << f << " -> 0x" << back);
    }
    CHECK(failures == 0);
  }

  TEST_CASE("bf16: rounding, overflow, NaN") {
    CHECK(f32_to_bf16_bits(1.0f) == 0x3f80);
    CHECK(f32_to_bf16_bits(-1.0f) == 0xbf80);
    CHECK(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie: down to even
    CHECK(f32_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie: up to even
    CHECK(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
    CHECK(f32_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
    CHECK(f32_to_bf16_bits(kInf) == 0x7f80);
    CHECK(f32_to_bf16_bits(-kInf) == 0xff80);
    CHECK(f32_to_bf16_bits(kNaN) == 0x7fc0);
    CHECK(f32_to_bf16_bits(-kNaN) == 0xffc0);
    // A NaN whose payload lives only in the low bits must not round to inf.
    CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);
    CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x7fffffffu)) == 0x7fc0);
    CHECK(f32_to_bf16_bits(std::ldexp(1.0f, -133)) == 0x0001);  // subnormal bf16
    CHECK(bf16_bits_to_f32(0x3f80) == 1.0f);
    CHECK(std::isnan(bf16_bits_to_f32(0x7fc0)));
  }

  TEST_CASE("bf16: every pattern round-trips") {
    int failures = 0;
    for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
      const uint16_t h = static_cast<uint16_t>(bits);
      const uint16_t back = f32_to_bf16_bits(bf16_bits_to_f32(h));
      const bool ok = bf16_is_nan(h) ? bf16_is_nan(back) : back == h;
      if (!ok && failures++ < 5) FAIL_CHECK("bf16 0x" << std::hex << bits << " -> 0x" << back);
    }
    CHECK(failures == 0);
  }

  TEST_CASE("round_to and array encode/decode") {
    CHECK(round_to(DType::f32, 0.1f) == 0.1f);
    CHECK(round_to(DType::f16, 0.1f) == f16_bits_to_f32(f32_to_f16_bits(0.1f)));
    CHECK(round_to(DType::f16, 0.1f) != 0.1f);
    CHECK(round_to(DType::bf16, 0.1f) == bf16_bits_to_f32(f32_to_bf16_bits(0.1f)));
    CHECK(std::isnan(round_to(DType::f16, kNaN)));
    CHECK(round_to(DType::bf16, -kInf) == -kInf);

    const std::vector<float> values = {0.0f, 1.0f, -2.5f, 0.1f, 65504.0f, 1e-6f, kInf};
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      const std::string name = to_string(dtype);
      CAPTURE(name);
      std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
      encode(dtype, values.data(), bytes.data(), values.size());
      std::vector<float> back(values.size());
      decode(dtype, bytes.data(), back.data(), back.size());
      for (std::size_t i = 0; i < values.size(); ++i) CHECK(back[i] == round_to(dtype, values[i]));
    }
    std::vector<uint8_t> bytes(4);
    const float two = 2.0f;
    encode(DType::f16, &two, bytes.data(), 1);
    CHECK(bytes[0] == 0x00);  // little-endian 0x4000
    CHECK(bytes[1] == 0x40);
  }
}
