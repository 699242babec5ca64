#include "memory.hpp"

#include <algorithm>
#include <string>

#include "context_impl.hpp"
#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

// The first memory type allowed by `type_bits` that has all `required` flags, preferring one with all
// `preferred` flags and none of `avoided`.
int find_memory_type(const VkPhysicalDeviceMemoryProperties& props, uint32_t type_bits, VkMemoryPropertyFlags required,
                     VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags avoided = 0) {
  int fallback = -1;
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags flags = props.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred && (flags & avoided) == 0) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

}  // namespace

void MemoryCounter::add(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  current_ += bytes;
  ++count_;
  peak_ = std::max(peak_, current_);
}

void MemoryCounter::remove(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  current_ -= bytes;
  --count_;
}

void MemoryCounter::reset_peak() {
  std::lock_guard lock(mutex_);
  peak_ = current_;
}

MemoryStats MemoryCounter::stats() const {
  std::lock_guard lock(mutex_);
  MemoryStats s;
  s.current_bytes = current_;
  s.peak_bytes = peak_;
  s.allocations = count_;
  return s;
}

Allocation::~Allocation() {
  if (device == VK_NULL_HANDLE) return;
  if (counter) counter->remove(counted_bytes);
  if (mapped) vkUnmapMemory(device, memory);
  if (texel_view != VK_NULL_HANDLE) vkDestroyBufferView(device, texel_view, nullptr);
  if (buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer, nullptr);
  if (memory != VK_NULL_HANDLE) vkFreeMemory(device, memory, nullptr);
}

std::unique_ptr<Allocation> allocate_buffer(const ContextImpl& context, uint64_t bytes, MemoryUse use) {
  context.check_usable();
  if (bytes == 0) throw Error("buffer: size must be > 0 bytes");
  if (bytes > UINT64_MAX - 15)
    throw Error("buffer: " + std::to_string(bytes) + " bytes overflow 64 bits once rounded up to a multiple of 16");
  // Rounded up so that shaders reading 32-bit words (masks, 16-bit tensors) never step past the end.
  const uint64_t size = (bytes + 15) & ~uint64_t(15);
  const DeviceInfo& device = context.info;
  for (const auto& [limit, name] : {std::pair{device.max_buffer_size, "maxBufferSize"},
                                    std::pair{device.max_allocation_size, "maxMemoryAllocationSize"},
                                    std::pair{device.device_memory_bytes, "the largest device-local heap"}})
    if (limit > 0 && size > limit)
      throw unsupported("buffer: " + std::to_string(bytes) + " bytes exceed " + name + " (" + std::to_string(limit) +
                        " bytes) of " + device.name);
  auto alloc = std::make_unique<Allocation>();
  alloc->device = context.device;
  alloc->size = size;

  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size;
  // (Indirect: a paged call's work list, in its workspace, holds the grid of its split dispatch.)
  const bool texel = use == MemoryUse::device && size <= context.texel_view_bytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               (use == MemoryUse::device ? VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT : 0) |
               (texel ? VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : 0);
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VK_TRY(vkCreateBuffer(context.device, &info, nullptr, &alloc->buffer));

  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(context.device, alloc->buffer, &req);
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Device buffers: device-local memory. Where the device shares the host's memory (integrated GPUs,
  // CPU devices such as lavapipe) the host-visible kind too, so that uploads and downloads are plain
  // copies. On a discrete GPU host-visible device-local memory is the PCI BAR window: the host reads
  // it uncached (a download crawls) and the driver may map it differently from the rest of VRAM, so
  // device buffers there take device-local memory that is not host-visible, and uploads and
  // downloads go through a staging buffer.
  const bool discrete = context.info.type == DeviceType::discrete;
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  const int type =
      use == MemoryUse::device
          ? find_memory_type(context.memory_properties, req.memoryTypeBits, local, discrete ? local : local | host,
                             discrete ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT : 0)
          : find_memory_type(context.memory_properties, req.memoryTypeBits, host, host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (type < 0)
    throw vk_error("buffer: no suitable memory type for " + std::to_string(bytes) + " bytes", VK_ERROR_OUT_OF_DEVICE_MEMORY);

  VkMemoryAllocateInfo mem{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mem.allocationSize = req.size;
  mem.memoryTypeIndex = static_cast<uint32_t>(type);
  const VkResult injected = context.injected_fault(testing::FaultSite::allocate);
  if (injected != VK_SUCCESS) throw_vk_error("vkAllocateMemory", injected);  // `alloc` frees the buffer
  VK_TRY(vkAllocateMemory(context.device, &mem, nullptr, &alloc->memory));
  if (use == MemoryUse::device && context.memory) {
    alloc->counter = context.memory;
    alloc->counted_bytes = req.size;
    alloc->counter->add(req.size);
  }
  VK_TRY(vkBindBufferMemory(context.device, alloc->buffer, alloc->memory, 0));
  if (texel) {
    // The whole buffer as 8-byte texels (the size is a multiple of 16), made with the buffer so that
    // recording a call creates nothing.
    VkBufferViewCreateInfo view{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
    view.buffer = alloc->buffer;
    view.format = VK_FORMAT_R32G32_UINT;
    view.offset = 0;
    view.range = size;
    VK_TRY(vkCreateBufferView(context.device, &view, nullptr, &alloc->texel_view));
  }
  const VkMemoryPropertyFlags flags = context.memory_properties.memoryTypes[type].propertyFlags;
  // (A test may leave device buffers unmapped, so that lavapipe runs the staging path a discrete GPU
  // takes: testing::set_device_memory_unmapped.)
  const bool unmapped = use == MemoryUse::device && context.device_memory_unmapped;
  if ((flags & host) == host && !unmapped)
    VK_TRY(vkMapMemory(context.device, alloc->memory, 0, VK_WHOLE_SIZE, 0, &alloc->mapped));
  return alloc;
}

}  // namespace vkattn::detail
