// q8_0 blocks (ggml's block_q8_0): the quantizer and the dequantizer the references use, so that a
// q8_0 cache means one thing on the CPU and on the device.
#include "vkattn/q8_0.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn {
namespace {

std::string float_text(float v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

int64_t q8_0_bytes(int64_t elements) {
  if (elements < 0 || elements % kQ8_0BlockElements != 0)
    throw Error("q8_0: " + std::to_string(elements) + " elements is not a whole number of blocks of " +
                std::to_string(kQ8_0BlockElements));
  return elements / kQ8_0BlockElements * kQ8_0BlockBytes;
}

std::vector<uint8_t> quantize_q8_0(std::span<const float> values, int64_t dim) {
  if (dim < kQ8_0BlockElements || dim % kQ8_0BlockElements != 0)
    throw Error("quantize_q8_0: dim (" + std::to_string(dim) + ") must be a positive multiple of " +
                std::to_string(kQ8_0BlockElements) + " (q8_0 blocks are 32 elements of a row)");
  if (values.size() % static_cast<std::size_t>(dim) != 0)
    throw Error("quantize_q8_0: " + std::to_string(values.size()) + " values are not whole rows of dim " +
                std::to_string(dim));
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw Error("quantize_q8_0: values[" + std::to_string(i) + "] is " + float_text(values[i]) +
                  ": q8_0 holds finite values only");

  const std::size_t blocks = values.size() / kQ8_0BlockElements;
  std::vector<uint8_t> bytes(blocks * kQ8_0BlockBytes);
  for (std::size_t b = 0; b < blocks; ++b) {
    const float* x = values.data() + b * kQ8_0BlockElements;
    uint8_t* out = bytes.data() + b * kQ8_0BlockBytes;
    float amax = 0.0f;
    for (int64_t i = 0; i < kQ8_0BlockElements; ++i) amax = std::max(amax, std::fabs(x[i]));
    const uint16_t d_bits = f32_to_f16_bits(amax / 127.0f);
    const float d = f16_bits_to_f32(d_bits);
    if (std::isinf(d))
      throw Error("quantize_q8_0: block " + std::to_string(b) + " (values " + std::to_string(b * 32) + ".." +
                  std::to_string(b * 32 + 31) + ") has max |x| = " + float_text(amax) +
                  ": its scale max|x| / 127 overflows f16 (largest 65504)");
    out[0] = static_cast<uint8_t>(d_bits & 0xffu);
    out[1] = static_cast<uint8_t>(d_bits >> 8);
    for (int64_t i = 0; i < kQ8_0BlockElements; ++i) {
      // In double, x / d is close enough to the exact quotient that round() sees the true ties.
      const double q = d == 0.0f ? 0.0 : std::round(static_cast<double>(x[i]) / static_cast<double>(d));
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0, 127.0)));
    }
  }
  return bytes;
}

std::vector<float> dequantize_q8_0(std::span<const uint8_t> bytes) {
  if (bytes.size() % kQ8_0BlockBytes != 0)
    throw Error("dequantize_q8_0: " + std::to_string(bytes.size()) + " bytes are not whole blocks of " +
                std::to_string(kQ8_0BlockBytes));
  const std::size_t blocks = bytes.size() / kQ8_0BlockBytes;
  std::vector<float> values(blocks * kQ8_0BlockElements);
  for (std::size_t b = 0; b < blocks; ++b) {
    const uint8_t* in = bytes.data() + b * kQ8_0BlockBytes;
    const float d = f16_bits_to_f32(static_cast<uint16_t>(in[0] | (in[1] << 8)));
    for (int64_t i = 0; i < kQ8_0BlockElements; ++i)
      values[b * kQ8_0BlockElements + static_cast<std::size_t>(i)] = d * static_cast<float>(static_cast<int8_t>(in[2 + i]));
  }
  return values;
}

}  // namespace vkattn
