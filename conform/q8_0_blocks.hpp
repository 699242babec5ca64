// Test inputs as q8_0 blocks (vkattn/q8_0.hpp): what the conformance cases upload for q8_0 K and V.
#pragma once

#include <cstdint>
#include <vector>

namespace vkattn::conform {

// `values` (a whole number of blocks of 32) as q8_0 blocks, quantize_q8_0's bytes, except that a
// block holding a value q8_0 cannot hold (NaN or Inf: a gap between rows, a poisoned hidden key)
// gets an f16 NaN scale, so that every value it stands for is NaN, which a kernel must not read
// either. `values` becomes what the blocks hold (the reference's input).
std::vector<uint8_t> to_q8_0_blocks(std::vector<float>& values);

}  // namespace vkattn::conform
