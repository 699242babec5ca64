#include "vk_check.hpp"

#include <string>

#include "vkattn/error.hpp"

namespace vkattn::detail {

const char* vk_result_name(VkResult result) {
  switch (result) {
#define NAME(r) \
  case r:       \
    return #r;
    NAME(VK_SUCCESS)
    NAME(VK_NOT_READY)
    NAME(VK_TIMEOUT)
    NAME(VK_INCOMPLETE)
    NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
    NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    NAME(VK_ERROR_INITIALIZATION_FAILED)
    NAME(VK_ERROR_DEVICE_LOST)
    NAME(VK_ERROR_MEMORY_MAP_FAILED)
    NAME(VK_ERROR_LAYER_NOT_PRESENT)
    NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
    NAME(VK_ERROR_FEATURE_NOT_PRESENT)
    NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
    NAME(VK_ERROR_TOO_MANY_OBJECTS)
    NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
    NAME(VK_ERROR_FRAGMENTED_POOL)
    NAME(VK_ERROR_UNKNOWN)
    NAME(VK_ERROR_OUT_OF_POOL_MEMORY)
    NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    NAME(VK_ERROR_FRAGMENTATION)
    NAME(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    NAME(VK_PIPELINE_COMPILE_REQUIRED)
#undef NAME
    default:
      return "VK_RESULT_UNKNOWN";
  }
}

void throw_vk_error(const char* call, VkResult result) {
  const std::string name = vk_result_name(result);
  throw Error(std::string("Vulkan call failed: ") + call + " returned " + name, name);
}

}  // namespace vkattn::detail
