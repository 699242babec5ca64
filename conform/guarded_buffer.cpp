#include "conform/guarded_buffer.hpp"

#include <cstring>

namespace vkattn::conform {

GuardedBuffer::GuardedBuffer(Context& context, uint64_t payload_bytes, uint8_t poison)
    : buffer_(Buffer::allocate(context, payload_bytes + kGuardBytes)), payload_bytes_(payload_bytes), poison_(poison) {
  reset();
}

void GuardedBuffer::reset() {
  std::vector<uint8_t> bytes(payload_bytes_ + kGuardBytes, poison_);
  for (uint64_t i = 0; i < kGuardBytes; ++i) bytes[payload_bytes_ + i] = sentinel(i);
  buffer_.upload(bytes.data(), bytes.size());
}

std::vector<uint8_t> GuardedBuffer::download(const std::string& what, std::string& guard_problem) const {
  std::vector<uint8_t> bytes(payload_bytes_ + kGuardBytes);
  buffer_.download(bytes.data(), bytes.size());
  uint64_t changed = 0, first = 0;
  for (uint64_t i = 0; i < kGuardBytes; ++i) {
    if (bytes[payload_bytes_ + i] != sentinel(i)) {
      if (changed++ == 0) first = i;
    }
  }
  if (changed)
    guard_problem += (guard_problem.empty() ? "" : "; ") + what + ": " + std::to_string(changed) + " guard bytes after the " + std::to_string(payload_bytes_) +
                    "-byte payload were overwritten (first at guard byte " + std::to_string(first) + ")";
  bytes.resize(payload_bytes_);
  return bytes;
}

std::vector<float> GuardedBuffer::download_f32(const std::string& what, uint64_t count,
                                              std::string& guard_problem) const {
  const std::vector<uint8_t> bytes = download(what, guard_problem);
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data(), count * 4);
  return values;
}

}  // namespace vkattn::conform
