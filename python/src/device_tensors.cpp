#include "device_tensors.hpp"

#include <algorithm>

namespace vkattn::python {

// Buffer::allocate refuses 0 bytes; an empty tensor still gets a Buffer, so that the call itself
// says what is wrong with its shape.
Buffer DeviceTensors::allocate(uint64_t bytes) { return Buffer::allocate(context_, std::max<uint64_t>(bytes, 16)); }

const Buffer* DeviceTensors::input(const void* data, uint64_t bytes) {
  Tensor& t = tensors_.emplace_back(Tensor{allocate(bytes), nullptr, bytes});
  t.buffer.upload(data, bytes);
  return &t.buffer;
}

const Buffer* DeviceTensors::output(void* data, uint64_t bytes) {
  Tensor& t = tensors_.emplace_back(Tensor{allocate(bytes), data, bytes});
  return &t.buffer;
}

const Buffer* DeviceTensors::scratch(uint64_t bytes) {
  return &tensors_.emplace_back(Tensor{allocate(bytes), nullptr, bytes}).buffer;
}

void DeviceTensors::download_outputs() const {
  for (const Tensor& t : tensors_) {
    if (t.host != nullptr) t.buffer.download(t.host, t.bytes);
  }
}

}  // namespace vkattn::python
