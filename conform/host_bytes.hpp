// Moving a case's values to and from the device as bytes: the helpers every conformance runner uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <vkattn/vkattn.hpp>

namespace vkattn::conform {

// A buffer holding `bytes` bytes of `data` (an empty tensor still gets a small buffer: Buffer::allocate
// wants at least a byte).
Buffer upload_bytes(Context& ctx, const void* data, std::size_t bytes);

// `values` in `dtype`'s storage, and back.
std::vector<uint8_t> encoded(DType dtype, const std::vector<float>& values);
std::vector<float> decoded(DType dtype, const std::vector<uint8_t>& bytes);

}  // namespace vkattn::conform
