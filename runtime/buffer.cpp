#include "vkattn/buffer.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "context_impl.hpp"
#include "vk_check.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"

namespace vkattn {

const detail::ContextImpl* detail::context_of(const Buffer& buffer) { return buffer.context_.get(); }

VkBufferView detail::texel_view_of(const Buffer& buffer) {
  return buffer.owned_ ? buffer.owned_->texel_view : VK_NULL_HANDLE;
}

namespace {

void check_range(const char* what, uint64_t offset, uint64_t bytes, uint64_t size) {
  if (offset > size || bytes > size - offset)
    throw Error(std::string("buffer.") + what + ": range [" + std::to_string(offset) + ", " +
                std::to_string(offset) + " + " + std::to_string(bytes) + ") exceeds the buffer size " +
                std::to_string(size));
}

// Orders every earlier transfer/shader/host access before the next command's transfer.
void full_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                       nullptr, 0, nullptr);
}

void host_barrier(VkCommandBuffer cmd, VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                       0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

Buffer Buffer::allocate(Context& context, uint64_t bytes) {
  Buffer b;
  b.context_ = detail::shared_impl_of(context);
  b.owned_ = detail::allocate_buffer(detail::impl_of(context), bytes, detail::MemoryUse::device);
  b.buffer_ = b.owned_->buffer;
  b.offset_ = 0;
  b.size_ = bytes;
  return b;
}

Buffer Buffer::wrap(Context& context, VkBuffer buffer, uint64_t offset, uint64_t size) {
  const detail::ContextImpl& c = detail::impl_of(context);
  if (buffer == VK_NULL_HANDLE) throw Error("buffer.wrap: buffer is VK_NULL_HANDLE");
  if (size == 0) throw Error("buffer.wrap: size must be > 0");
  // Every later byte address is offset() + something below size(): that sum must not wrap.
  if (offset > UINT64_MAX - size)
    throw Error("buffer.wrap: offset (" + std::to_string(offset) + ") + size (" + std::to_string(size) +
                ") overflows 64 bits");
  // Vulkan cannot tell the size a VkBuffer was created with; its memory requirements are at least that
  // (the driver rounds up), so a range past them is certainly out of bounds (see buffer.hpp).
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(c.device, buffer, &req);
  if (offset + size > req.size)
    throw Error("buffer.wrap: range [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                ") exceeds the VkBuffer, whose memory requirements (an upper bound of its size) are " +
                std::to_string(req.size) + " bytes");
  Buffer b;
  b.context_ = detail::shared_impl_of(context);
  b.buffer_ = buffer;
  b.offset_ = offset;
  b.size_ = size;
  return b;
}

Buffer::Buffer() = default;
Buffer::~Buffer() = default;

// A moved-from Buffer is empty (valid() false), not a second view of the same handle.
Buffer::Buffer(Buffer&& other) noexcept
    : context_(std::move(other.context_)),
      buffer_(std::exchange(other.buffer_, VK_NULL_HANDLE)),
      offset_(std::exchange(other.offset_, 0)),
      size_(std::exchange(other.size_, 0)),
      owned_(std::move(other.owned_)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    owned_ = std::move(other.owned_);
    context_ = std::move(other.context_);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    offset_ = std::exchange(other.offset_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void Buffer::upload(const void* data, uint64_t bytes, uint64_t offset) {
  if (!valid()) throw Error("buffer.upload: empty buffer");
  if (!data && bytes > 0) throw Error("buffer.upload: data is null for " + std::to_string(bytes) + " bytes");
  context_->check_usable();  // a lost device's memory may be gone: fail fast, even for mapped memory
  check_range("upload", offset, bytes, size_);
  if (bytes == 0) return;
  detail::ContextImpl& c = *context_;
  std::lock_guard lock(c.queue_mutex);  // no kernel of this context may be reading it meanwhile
  if (owned_ && owned_->mapped) {
    // Earlier submissions on this context have completed (every synchronous call waits).
    std::memcpy(static_cast<char*>(owned_->mapped) + offset_ + offset, data, bytes);
    return;
  }
  auto staging = detail::allocate_buffer(c, bytes, detail::MemoryUse::staging);
  std::memcpy(staging->mapped, data, bytes);
  c.submit_and_wait([&](VkCommandBuffer cmd) {
    full_barrier(cmd);
    VkBufferCopy region{0, offset_ + offset, bytes};
    vkCmdCopyBuffer(cmd, staging->buffer, buffer_, 1, &region);
  });
}

void Buffer::download(void* data, uint64_t bytes, uint64_t offset) const {
  if (!valid()) throw Error("buffer.download: empty buffer");
  if (!data && bytes > 0) throw Error("buffer.download: data is null for " + std::to_string(bytes) + " bytes");
  context_->check_usable();
  check_range("download", offset, bytes, size_);
  if (bytes == 0) return;
  detail::ContextImpl& c = *context_;
  std::lock_guard lock(c.queue_mutex);
  if (owned_ && owned_->mapped) {
    std::memcpy(data, static_cast<const char*>(owned_->mapped) + offset_ + offset, bytes);
    return;
  }
  auto staging = detail::allocate_buffer(c, bytes, detail::MemoryUse::staging);
  c.submit_and_wait([&](VkCommandBuffer cmd) {
    full_barrier(cmd);
    VkBufferCopy region{offset_ + offset, 0, bytes};
    vkCmdCopyBuffer(cmd, buffer_, staging->buffer, 1, &region);
    host_barrier(cmd, VK_ACCESS_HOST_READ_BIT);
  });
  std::memcpy(data, staging->mapped, bytes);
}

void Buffer::fill(uint8_t value, uint64_t offset, uint64_t bytes) {
  if (!valid()) throw Error("buffer.fill: empty buffer");
  context_->check_usable();
  if (bytes == UINT64_MAX) bytes = offset <= size_ ? size_ - offset : 0;
  check_range("fill", offset, bytes, size_);
  const std::vector<uint8_t> pattern(bytes, value);
  upload(pattern.data(), bytes, offset);
}

}  // namespace vkattn
