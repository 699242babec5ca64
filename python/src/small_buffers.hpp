// Small device Buffers kept for reuse across calls on one Context: a KV-cache call's block table and
// cache lengths travel to the device every call, and allocating and freeing a Buffer for them each
// time costs more than the rest of the call's host work (a decode step's budget is tens of
// microseconds). A Lease holds a Buffer for one call and gives it back when the call is done.
// Thread-safe: each lease is its holder's alone.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include <vkattn/buffer.hpp>
#include <vkattn/context.hpp>

namespace vkattn::python {

class SmallBuffers {
 public:
  class Lease {
   public:
    Lease(SmallBuffers& pool, Buffer buffer) : pool_(pool), buffer_(std::move(buffer)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_.give_back(std::move(buffer_)); }
    Buffer& buffer() { return buffer_; }

   private:
    SmallBuffers& pool_;
    Buffer buffer_;
  };

  // A Buffer of at least `bytes` bytes (a kept one when one is large enough, else a new one of the
  // next power of two, at least 1 KiB). Its contents are undefined.
  Lease acquire(Context& context, uint64_t bytes);

 private:
  // Few: one per call in flight at once, beyond which Buffers are freed rather than kept.
  static constexpr std::size_t kKept = 8;
  void give_back(Buffer buffer);
  std::mutex mutex_;
  std::vector<Buffer> kept_;
};

}  // namespace vkattn::python
