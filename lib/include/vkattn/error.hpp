// vkattn::Error — the one exception type every public entry point throws.
#pragma once

#include <stdexcept>
#include <string>

namespace vkattn {

// Thrown for bad arguments (the message names the argument and its values) and for Vulkan failures
// (the message names the failing call; vk_result() carries the VkResult name, e.g.
// "VK_ERROR_OUT_OF_DEVICE_MEMORY"). When an Error is thrown, nothing has been dispatched and no
// buffer the caller owns has been modified.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string vk_result = {})
      : std::runtime_error(message), vk_result_(std::move(vk_result)) {}

  // Empty for argument errors; the VkResult's name for Vulkan failures.
  const std::string& vk_result() const noexcept { return vk_result_; }

 private:
  std::string vk_result_;
};

}  // namespace vkattn
