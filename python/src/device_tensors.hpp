// The device Buffers of one call: each host tensor's byte span uploaded to a Buffer of its own, the
// outputs downloaded back into their arrays after the run. Runs without the GIL: it touches only the
// arrays' memory, which the caller keeps alive.
#pragma once

#include <cstdint>
#include <deque>

#include <vkattn/buffer.hpp>
#include <vkattn/context.hpp>

namespace vkattn::python {

class DeviceTensors {
 public:
  explicit DeviceTensors(Context& context) : context_(context) {}

  // A Buffer holding `bytes` bytes from `data` (uploaded now).
  const Buffer* input(const void* data, uint64_t bytes);
  // A Buffer of `bytes` bytes that download_outputs() copies to `data`.
  const Buffer* output(void* data, uint64_t bytes);
  // A Buffer of `bytes` bytes that stays on the device.
  const Buffer* scratch(uint64_t bytes);
  void download_outputs() const;

 private:
  struct Tensor {
    Buffer buffer;
    void* host = nullptr;  // an output's array; null for an input
    uint64_t bytes = 0;
  };
  Buffer allocate(uint64_t bytes);
  Context& context_;
  std::deque<Tensor> tensors_;  // a deque: the Buffers the call points to never move
};

}  // namespace vkattn::python
