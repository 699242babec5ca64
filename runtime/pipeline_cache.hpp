// The pipeline cache file an application names (ContextOptions::pipeline_cache_file): reading it back
// only when it is whole and was written for this very device and driver, and writing it atomically.
//
// File format (native byte order; the file is only ever meaningful on the machine that wrote it):
//   8 bytes  magic "VKATTNPC"
//   4 bytes  format version (1)
//   4 bytes  0 (reserved)
//   8 bytes  payload size in bytes
//   8 bytes  FNV-1a 64-bit hash of the payload
//   payload  what vkGetPipelineCacheData returned: VkPipelineCacheHeaderVersionOne, then driver data
// The envelope catches truncated and garbage files (which a driver might not), the Vulkan header a
// cache from another device, driver or driver version (pipelineCacheUUID changes with the driver).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vkattn::detail {

// Whether `data` (vkGetPipelineCacheData's output) starts with a VkPipelineCacheHeaderVersionOne
// that names `device` (vendorID, deviceID, pipelineCacheUUID).
bool pipeline_cache_data_matches(std::span<const uint8_t> data, const VkPhysicalDeviceProperties& device);

// The payload of the cache file at `path` when it can be handed to the driver; empty when the file
// is missing, unreadable, truncated, corrupt or for another device/driver. `note` says which (for
// diagnostics); nothing here throws for a bad file.
std::vector<uint8_t> read_pipeline_cache_file(const std::string& path, const VkPhysicalDeviceProperties& device,
                                              std::string& note);

// Writes `payload` to `path` in the format above: to a temporary file in the same directory, then
// renamed over `path`, so a reader never sees a half-written file. Throws Error naming the path.
void write_pipeline_cache_file(const std::string& path, std::span<const uint8_t> payload);

}  // namespace vkattn::detail
