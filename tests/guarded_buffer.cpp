#include "guarded_buffer.hpp"

#include <doctest/doctest.h>

namespace vkattn::test {

std::vector<uint8_t> GuardedBuffer::download_checked(const std::string& what) const {
  std::string problem;
  std::vector<uint8_t> bytes = download(what, problem);
  if (!problem.empty()) FAIL_CHECK(problem);
  return bytes;
}

}  // namespace vkattn::test
