// q8_0 blocks: exact values a reader can check by hand, the round-trip bound, zeros, ties, and each
// refusal's message.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "support.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

float stored_scale(const std::vector<uint8_t>& bytes, std::size_t block) {
  const uint8_t* b = bytes.data() + block * 34;
  return f16_bits_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
}

int8_t stored_q(const std::vector<uint8_t>& bytes, std::size_t block, std::size_t i) {
  return static_cast<int8_t>(bytes[block * 34 + 2 + i]);
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("q8_0: exact values, the byte layout and ties away from zero") {
    // max|x| = 127 gives d = 1 (f16 0x3c00, little-endian) and q = x.
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;
    x[1] = -127.0f;
    x[2] = 5.0f;
    x[3] = 2.5f;    // tie: 3 (ggml's roundf), not 2
    x[4] = -2.5f;   // -3
    x[5] = 0.49f;   // 0
    const std::vector<uint8_t> bytes = quantize_q8_0(x, 32);
    REQUIRE(bytes.size() == 34);
    CHECK(bytes[0] == 0x00);
    CHECK(bytes[1] == 0x3c);
    CHECK(stored_q(bytes, 0, 0) == 127);
    CHECK(stored_q(bytes, 0, 1) == -127);
    CHECK(stored_q(bytes, 0, 2) == 5);
    CHECK(stored_q(bytes, 0, 3) == 3);
    CHECK(stored_q(bytes, 0, 4) == -3);
    CHECK(stored_q(bytes, 0, 5) == 0);
    const std::vector<float> back = dequantize_q8_0(bytes);
    REQUIRE(back.size() == 32);
    CHECK(back[0] == 127.0f);
    CHECK(back[3] == 3.0f);
    CHECK(back[4] == -3.0f);

    // Bytes written by hand (as ggml would): d = 0.5 (0x3800), q = -128 reads as -64.
    std::vector<uint8_t> hand(34, 0);
    hand[1] = 0x38;
    hand[2] = 0x80;
    hand[3] = 7;
    const std::vector<float> v = dequantize_q8_0(hand);
    CHECK(v[0] == -64.0f);
    CHECK(v[1] == 3.5f);
    CHECK(v[2] == 0.0f);
    CHECK(q8_0_bytes(64) == 68);
  }

  TEST_CASE("q8_0: the scale is max|x| / 127 rounded to f16, and q divides by that stored scale") {
    std::vector<float> x(64, 0.25f);
    x[7] = -1.0f;   // block 0: max|x| = 1
    x[40] = 3.0f;   // block 1: max|x| = 3
    const std::vector<uint8_t> bytes = quantize_q8_0(x, 64);
    REQUIRE(bytes.size() == 68);
    CHECK(stored_scale(bytes, 0) == round_to(DType::f16, 1.0f / 127.0f));
    CHECK(stored_scale(bytes, 1) == round_to(DType::f16, 3.0f / 127.0f));
    CHECK(stored_q(bytes, 0, 7) == -127);
    const double d0 = stored_scale(bytes, 0);
    CHECK(stored_q(bytes, 0, 0) == static_cast<int>(std::round(0.25 / d0)));
  }

  TEST_CASE("q8_0: a block of zeros, and a block too small for an f16 scale") {
    std::vector<float> x(32, 0.0f);
    x[3] = -0.0f;
    std::vector<uint8_t> bytes = quantize_q8_0(x, 32);
    for (const uint8_t b : bytes) CHECK(b == 0);
    for (const float v : dequantize_q8_0(bytes)) CHECK(v == 0.0f);
    // max|x| = 1e-7: d = 1e-7 / 127 rounds to f16 0, so d = 0 and q = 0 (error 1e-7 <= 127 * 2^-25).
    x.assign(32, 1e-7f);
    bytes = quantize_q8_0(x, 32);
    for (const uint8_t b : bytes) CHECK(b == 0);
  }

  TEST_CASE("q8_0: round trip within half a step, d/2 per element (subnormal scales: 127 * 2^-25)") {
    std::mt19937 rng(14);
    const double tiny = 127.0 * std::ldexp(1.0, -25);
    for (const float magnitude : {1.0f, 1000.0f, 60000.0f, 0.05f, 1e-3f, 1e-5f}) {
      std::uniform_real_distribution<float> dist(-magnitude, magnitude);
      std::vector<float> x(4 * 96);
      for (float& v : x) v = dist(rng);
      const std::vector<uint8_t> bytes = quantize_q8_0(x, 96);
      REQUIRE(bytes.size() == 4 * 3 * 34);
      const std::vector<float> back = dequantize_q8_0(bytes);
      REQUIRE(back.size() == x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double d = stored_scale(bytes, i / 32);
        const bool normal = d >= std::ldexp(1.0, -14);
        const double bound = normal ? d / 2 : std::max(d / 2, tiny);
        INFO("magnitude " << magnitude << " element " << i << " d " << d);
        CHECK(std::fabs(static_cast<double>(x[i]) - back[i]) <= bound);
        // The dequantized value is f32(d) * q exactly.
        CHECK(static_cast<double>(back[i]) == d * stored_q(bytes, i / 32, i % 32));
      }
    }
  }

  TEST_CASE("q8_0: refusals name the value or the block") {
    std::vector<float> x(64, 1.0f);
    CHECK(contains(error_message([&] { quantize_q8_0(x, 48); }),
                   "quantize_q8_0: dim (48) must be a positive multiple of 32"));
    CHECK(contains(error_message([&] { quantize_q8_0(x, 0); }), "dim (0) must be a positive multiple of 32"));
    CHECK(contains(error_message([&] { quantize_q8_0(std::span<const float>(x).first(40), 32); }),
                   "quantize_q8_0: 40 values are not whole rows of dim 32"));
    x[37] = std::numeric_limits<float>::quiet_NaN();
    CHECK(contains(error_message([&] { quantize_q8_0(x, 32); }),
                   "quantize_q8_0: values[37] is nan: q8_0 holds finite values only"));
    x[37] = -std::numeric_limits<float>::infinity();
    CHECK(contains(error_message([&] { quantize_q8_0(x, 32); }), "values[37] is -inf"));
    x[37] = 1e7f;  // d = 1e7 / 127 > 65504
    CHECK(contains(error_message([&] { quantize_q8_0(x, 32); }),
                   "quantize_q8_0: block 1 (values 32..63) has max |x| = 1e+07: its scale max|x| / 127 overflows f16"));
    x[37] = 65504.0f * 127.0f;  // the largest f16 scale still fits
    CHECK_NOTHROW(quantize_q8_0(x, 32));
    const std::vector<uint8_t> bytes(35);
    CHECK(contains(error_message([&] { dequantize_q8_0(bytes); }),
                   "dequantize_q8_0: 35 bytes are not whole blocks of 34"));
    CHECK(contains(error_message([&] { q8_0_bytes(33); }), "q8_0: 33 elements is not a whole number of blocks of 32"));
  }
}
