// Counts the C++ heap allocations (operator new) a piece of code makes, for the tests of what must
// not allocate (a prepared call's record). The test binary replaces the global operator new with
// one that counts while a ScopedAllocationCount is alive on any thread.
#pragma once

#include <cstddef>

namespace vkattn::test {

class ScopedAllocationCount {
 public:
  ScopedAllocationCount();
  ~ScopedAllocationCount();
  ScopedAllocationCount(const ScopedAllocationCount&) = delete;
  ScopedAllocationCount& operator=(const ScopedAllocationCount&) = delete;
  // operator new calls since construction.
  std::size_t count() const;

 private:
  std::size_t start_;
};

}  // namespace vkattn::test
