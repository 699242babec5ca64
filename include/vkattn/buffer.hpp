// vkattn::Buffer — a storage buffer on the Context's device: allocated by vkattn, or an application's
// VkBuffer (with an offset and size) wrapped without taking ownership.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace vkattn {

class Context;
class Buffer;
namespace detail {
class ContextImpl;
struct Allocation;
// The Context a Buffer belongs to (null for an empty Buffer): internal, for the runtime's checks.
const ContextImpl* context_of(const Buffer& buffer);
// Its texel view, where vkattn allocated it with one (CPU devices): internal, for recording.
VkBufferView texel_view_of(const Buffer& buffer);
}  // namespace detail

class Buffer {
 public:
  // A device-local storage buffer of `bytes` bytes (> 0). Contents are undefined until written.
  // On a CPU device it also carries a uniform texel buffer view of its memory (up to
  // maxTexelBufferElements 8-byte texels), through which some kernels read faster there.
  static Buffer allocate(Context& context, uint64_t bytes);
  // The application's buffer (created with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, TRANSFER_SRC/DST for
  // upload/download, and INDIRECT_BUFFER for a workspace: PreparedAttention::record),
  // seen from `offset` for `size` bytes. Not owned: never destroyed by vkattn.
  // Throws Error when offset + size overflows or exceeds vkGetBufferMemoryRequirements(buffer).size.
  // That is all that can be checked: Vulkan cannot query the size a VkBuffer was created with, and
  // its memory requirements may be rounded up past it, so a range ending between the two is not
  // detected. `buffer` must belong to the Context's device (not checkable either).
  static Buffer wrap(Context& context, VkBuffer buffer, uint64_t offset, uint64_t size);

  Buffer();  // empty: valid() is false
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  ~Buffer();

  // Copies host bytes in / out, synchronously (staging through host-visible memory when needed).
  // `data` may be null only when `bytes` is 0.
  void upload(const void* data, uint64_t bytes, uint64_t offset = 0);
  void download(void* data, uint64_t bytes, uint64_t offset = 0) const;
  // Sets every byte in [offset, offset + bytes) to `value`.
  void fill(uint8_t value, uint64_t offset = 0, uint64_t bytes = UINT64_MAX);

  VkBuffer handle() const { return buffer_; }
  uint64_t offset() const { return offset_; }  // where this Buffer starts inside handle()
  uint64_t size() const { return size_; }
  bool valid() const { return buffer_ != VK_NULL_HANDLE; }

 private:
  friend const detail::ContextImpl* detail::context_of(const Buffer& buffer);
  friend VkBufferView detail::texel_view_of(const Buffer& buffer);
  std::shared_ptr<detail::ContextImpl> context_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  uint64_t offset_ = 0, size_ = 0;
  std::unique_ptr<detail::Allocation> owned_;  // null for wrapped buffers
};

}  // namespace vkattn
