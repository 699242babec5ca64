// The conformance library's guarded output buffer (conform/guarded_buffer.hpp), failing the current
// doctest test when its guard was overwritten.
#pragma once

#include <string>
#include <vector>

#include "conform/guarded_buffer.hpp"

namespace vkattn::test {

class GuardedBuffer : public conform::GuardedBuffer {
 public:
  using conform::GuardedBuffer::GuardedBuffer;
  // Downloads payload and guard; returns the payload and FAILs (naming `what`) when a guard byte
  // changed.
  std::vector<uint8_t> download_checked(const std::string& what) const;
};

}  // namespace vkattn::test
