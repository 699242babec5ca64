#include "small_buffers.hpp"

#include <algorithm>
#include <bit>

namespace vkattn::python {

SmallBuffers::Lease SmallBuffers::acquire(Context& context, uint64_t bytes) {
  {
    std::lock_guard lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->size() >= bytes) {
        Buffer buffer = std::move(*it);
        kept_.erase(it);
        return Lease(*this, std::move(buffer));
      }
    }
  }
  return Lease(*this, Buffer::allocate(context, std::bit_ceil(std::max<uint64_t>(bytes, 1024))));
}

void SmallBuffers::give_back(Buffer buffer) {
  std::lock_guard lock(mutex_);
  if (kept_.size() < kKept) kept_.push_back(std::move(buffer));
}

}  // namespace vkattn::python
