#include "recycled_buffers.hpp"

#include <algorithm>

namespace vkattn::python {

std::shared_ptr<Buffer> RecycledBuffers::take(Context& context, uint64_t bytes) {
  bytes = std::max<uint64_t>(bytes, 16);  // Buffer::allocate refuses 0 bytes
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard lock(mutex_);
    const auto fits = std::find_if(kept_.begin(), kept_.end(), [&](const std::unique_ptr<Buffer>& b) {
      return b->size() >= bytes && b->size() <= 2 * bytes;
    });
    if (fits != kept_.end()) {
      buffer = std::move(*fits);
      kept_.erase(fits);
      kept_bytes_ -= buffer->size();
    }
  }
  if (!buffer) buffer = std::make_unique<Buffer>(Buffer::allocate(context, bytes));
  // The deleter holds the pool weakly: a Buffer outliving its Context's pool is simply freed.
  std::weak_ptr<RecycledBuffers> pool = weak_from_this();
  return std::shared_ptr<Buffer>(buffer.release(), [pool](Buffer* b) {
    if (const std::shared_ptr<RecycledBuffers> alive = pool.lock()) {
      alive->give_back(b);
    } else {
      delete b;
    }
  });
}

void RecycledBuffers::give_back(Buffer* buffer) {
  std::unique_ptr<Buffer> owned(buffer);
  std::lock_guard lock(mutex_);
  if (kept_.size() < kKept && kept_bytes_ + owned->size() <= kKeptBytes) {
    kept_bytes_ += owned->size();
    kept_.push_back(std::move(owned));
  }
}

}  // namespace vkattn::python
