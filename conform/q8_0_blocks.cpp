#include "conform/q8_0_blocks.hpp"

#include <cmath>

#include "vkattn/q8_0.hpp"

namespace vkattn::conform {

std::vector<uint8_t> to_q8_0_blocks(std::vector<float>& values) {
  std::vector<float> finite(values);
  std::vector<bool> unheld(values.size() / kQ8_0BlockElements, false);
  for (std::size_t e = 0; e < finite.size(); ++e)
    if (!std::isfinite(finite[e])) finite[e] = 0.0f, unheld[e / kQ8_0BlockElements] = true;
  std::vector<uint8_t> blocks = quantize_q8_0(finite, kQ8_0BlockElements);
  for (std::size_t b = 0; b < unheld.size(); ++b)
    if (unheld[b]) blocks[b * kQ8_0BlockBytes] = 0x00, blocks[b * kQ8_0BlockBytes + 1] = 0x7e;  // f16 NaN
  values = dequantize_q8_0(blocks);
  return blocks;
}

}  // namespace vkattn::conform
