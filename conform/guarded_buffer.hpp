// A device buffer for an output: its payload is poisoned before a run (0xFF bytes are NaN in f32, f16
// and bf16) and followed by guard bytes holding a sentinel pattern, so a kernel that writes past its
// tensor, or skips an element it should write, is caught.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

namespace vkattn::conform {

class GuardedBuffer {
 public:
  static constexpr uint64_t kGuardBytes = 256;
  static constexpr uint8_t kPoison = 0xFF;

  GuardedBuffer(Context& context, uint64_t payload_bytes, uint8_t poison = kPoison);

  // Writes the poison over the payload and the sentinel over the guard.
  void reset();
  // Downloads payload and guard; returns the payload. A sentence naming `what` is appended to
  // `guard_problem` when a guard byte changed; it is left alone otherwise.
  std::vector<uint8_t> download(const std::string& what, std::string& guard_problem) const;
  // The same, as the payload's first `count` f32 values (LSE, attention weights).
  std::vector<float> download_f32(const std::string& what, uint64_t count, std::string& guard_problem) const;

  const Buffer& buffer() const { return buffer_; }
  Buffer& buffer() { return buffer_; }
  uint64_t payload_bytes() const { return payload_bytes_; }
  uint8_t poison() const { return poison_; }

  static uint8_t sentinel(uint64_t i) { return static_cast<uint8_t>(0xA5u ^ (i * 29u)); }

 private:
  Buffer buffer_;
  uint64_t payload_bytes_;
  uint8_t poison_;
};

}  // namespace vkattn::conform
