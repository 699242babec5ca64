// Device Buffers of dropped DeviceArrays, kept by their Context for the next array of about their
// size: a decode loop's output is a new DeviceArray every step, and the Buffer of the step before's,
// dropped by then, serves it without an allocation and a free (on lavapipe these cost tens of
// microseconds a step next to a long call). Bounded in count and bytes; thread-safe, and a Buffer
// may come back from a thread without the GIL (a call's copy of an array outliving the array).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <vkattn/buffer.hpp>
#include <vkattn/context.hpp>

namespace vkattn::python {

class RecycledBuffers : public std::enable_shared_from_this<RecycledBuffers> {
 public:
  // A Buffer of at least `bytes` bytes (and at most twice that, so a small array never pins a large
  // Buffer): a kept one, else a new one. When the last owner drops it, it comes back here.
  std::shared_ptr<Buffer> take(Context& context, uint64_t bytes);

 private:
  static constexpr std::size_t kKept = 8;
  static constexpr uint64_t kKeptBytes = uint64_t(64) << 20;
  void give_back(Buffer* buffer);
  std::mutex mutex_;
  std::vector<std::unique_ptr<Buffer>> kept_;
  uint64_t kept_bytes_ = 0;
};

}  // namespace vkattn::python
