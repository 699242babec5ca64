#include "weights_budget.hpp"

#include <unistd.h>

#include <limits>

#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::numeric_limits<uint64_t>::max();
  return a * b;
}

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;  // unknown: not checked
  return saturating_mul(static_cast<uint64_t>(pages), static_cast<uint64_t>(page));
}

}  // namespace

uint64_t weights_bytes(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k) {
  uint64_t bytes = sizeof(float);
  for (const int64_t n : {batch, heads, seq_q, seq_k})
    bytes = saturating_mul(bytes, n > 0 ? static_cast<uint64_t>(n) : 0);
  return bytes;
}

void check_weights_fit(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k, const DeviceInfo& device,
                       const std::string& flags) {
  const uint64_t bytes = weights_bytes(batch, heads, seq_q, seq_k);
  std::string where;
  uint64_t limit = 0;
  if (device.device_memory_bytes > 0 && bytes > device.device_memory_bytes) {
    limit = device.device_memory_bytes;
    where = "of device memory of " + device.name;
  } else if (const uint64_t host = host_memory_bytes(); host > 0 && bytes > host) {
    limit = host;
    where = "of host memory (the weights are downloaded whole)";
  } else {
    return;
  }
  // Built with += (GCC 12 warns falsely, -Wrestrict, on "(" + std::string).
  std::string shape(1, '(');
  for (const int64_t n : {batch, heads, seq_q, seq_k}) {
    if (shape.size() > 1) shape += ", ";
    shape += std::to_string(n);
  }
  shape += ')';
  const std::string needs =
      bytes == std::numeric_limits<uint64_t>::max() ? "more than 2^64" : std::to_string(bytes);
  throw Error("weights: P " + shape + " f32 needs " + needs + " bytes, more than the " + std::to_string(limit) +
              " bytes " + where + "; drop " + flags + " to use the fused path, which never stores the scores");
}

}  // namespace vkattn::cli
