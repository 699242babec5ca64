// Dropout's generator (vkattn/dropout.hpp): Philox 4x32-10 as Random123 defines it, and the keep rule
// every path draws its mask from.
#include "vkattn/dropout.hpp"

#include <cmath>
#include <string>

#include "options_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;  // the round's multipliers
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;  // the key's Weyl increments

// One round: two 32x32 -> 64-bit products, their halves and the other two words mixed with the key.
std::array<uint32_t, 4> philox_round(const std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& k) {
  const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

void check_p(float p) {
  if (!(p >= 0.0f && p < 1.0f))
    throw Error("dropout: p must be in [0, 1), got " + detail::float_text(p));
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped between rounds, not after the last
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

uint32_t dropout_threshold(float p) {
  check_p(p);
  // p is an f32, so p·2^32 is exact in double (24 significant bits, scaled by a power of two) and
  // below 2^32 for p < 1: floor is the only rounding.
  return static_cast<uint32_t>(std::floor(static_cast<double>(p) * 4294967296.0));
}

bool dropout_keep(const Dropout& dropout, int64_t heads, int64_t b, int64_t h, int64_t i, int64_t j) {
  const uint32_t threshold = dropout_threshold(dropout.p);
  // The counter's words are the indices modulo 2^32.
  const std::array<uint32_t, 4> counter = {static_cast<uint32_t>(j / 4), static_cast<uint32_t>(i),
                                           static_cast<uint32_t>(b * heads + h), dropout.offset};
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(dropout.seed & 0xffffffffu),
                                       static_cast<uint32_t>(dropout.seed >> 32)};
  return philox4x32_10(counter, key)[static_cast<std::size_t>(j % 4)] >= threshold;
}

void check_dropout(const Dropout& dropout) { check_p(dropout.p); }

}  // namespace vkattn
