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

ErrorCode error_code(VkResult result) {
  switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return ErrorCode::out_of_memory;
    case VK_ERROR_DEVICE_LOST:
      return ErrorCode::device_lost;
    default:
      return ErrorCode::vulkan_error;
  }
}

Error vk_error(const std::string& message, VkResult result) {
  return Error(error_code(result), message, static_cast<int32_t>(result), vk_result_name(result));
}

void throw_vk_error(const char* call, VkResult result) {
  throw vk_error(std::string("Vulkan call failed: ") + call + " returned " + vk_result_name(result), result);
}

}  // namespace vkattn::detail
