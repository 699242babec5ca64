#include "conform/host_bytes.hpp"

#include <algorithm>

namespace vkattn::conform {

Buffer upload_bytes(Context& ctx, const void* data, std::size_t bytes) {
  Buffer buffer = Buffer::allocate(ctx, std::max<std::size_t>(bytes, 16));
  if (bytes) buffer.upload(data, bytes);
  return buffer;
}

std::vector<uint8_t> encoded(DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  return bytes;
}

std::vector<float> decoded(DType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / dtype_size(dtype));
  decode(dtype, bytes.data(), values.data(), values.size());
  return values;
}

}  // namespace vkattn::conform
