// The one error policy for Vulkan calls: VK_TRY names the call and the VkResult in a vkattn::Error.
#pragma once

#include <vulkan/vulkan.h>

#include <string>

#include "vkattn/error.hpp"

namespace vkattn::detail {

const char* vk_result_name(VkResult result);
// The ErrorCode of a failing VkResult: out_of_memory for VK_ERROR_OUT_OF_HOST_MEMORY and
// VK_ERROR_OUT_OF_DEVICE_MEMORY, device_lost for VK_ERROR_DEVICE_LOST, vulkan_error otherwise.
ErrorCode error_code(VkResult result);
// An Error for `result` (its code, value and name) with `message`.
Error vk_error(const std::string& message, VkResult result);
// Throws vk_error("Vulkan call failed: <call> returned <name>", result).
[[noreturn]] void throw_vk_error(const char* call, VkResult result);

}  // namespace vkattn::detail

#define VK_TRY(call)                                                   \
  do {                                                                 \
    const VkResult vkattn_result_ = (call);                            \
    if (vkattn_result_ != VK_SUCCESS)                                  \
      ::vkattn::detail::throw_vk_error(#call, vkattn_result_);         \
  } while (0)
