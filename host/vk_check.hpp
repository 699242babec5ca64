// The one error policy for Vulkan calls: VK_TRY names the call and the VkResult in a vkattn::Error.
#pragma once

#include <vulkan/vulkan.h>

namespace vkattn::detail {

const char* vk_result_name(VkResult result);
[[noreturn]] void throw_vk_error(const char* call, VkResult result);

}  // namespace vkattn::detail

#define VK_TRY(call)                                                   \
  do {                                                                 \
    const VkResult vkattn_result_ = (call);                            \
    if (vkattn_result_ != VK_SUCCESS)                                  \
      ::vkattn::detail::throw_vk_error(#call, vkattn_result_);         \
  } while (0)
