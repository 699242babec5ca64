// vkattn::Error — the one exception type every public entry point throws.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace vkattn {

// What kind of failure an Error is, for a caller to switch on; the message gives the details.
enum class ErrorCode {
  // The call itself is wrong: a shape, layout, buffer, option, path or enum value that no device
  // would accept, or any use of a moved-from object. The message names the argument and its values.
  invalid_argument,
  // The call is valid but this device cannot run it: 16-bit storage for f16/bf16 missing (or not
  // enabled on an adopted device), no usable device (Vulkan 1.2, VK_KHR_push_descriptor, a compute
  // queue) or no validation layer when a Context is created, no timestamp queries, or a shape beyond
  // the device's limits (shared memory, maxComputeWorkGroupCount, maxStorageBufferRange, lavapipe's
  // loop budget, buffer and allocation sizes, device memory). The message names the device and the
  // limit; another device or a smaller problem may work.
  unsupported,
  // Vulkan ran out of memory (VK_ERROR_OUT_OF_HOST_MEMORY, VK_ERROR_OUT_OF_DEVICE_MEMORY), or no
  // memory type of the device can hold an allocation. Nothing is left allocated and the Context
  // stays usable: the next call runs normally.
  out_of_memory,
  // VK_ERROR_DEVICE_LOST, in this call or an earlier one on the same Context: that Context (and its
  // buffers) can no longer run work; every later call fails at once with this code. Create a new one.
  device_lost,
  // Any other failing VkResult; vk_result() and vk_result_code() say which.
  vulkan_error,
};

// "invalid_argument" | "unsupported" | "out_of_memory" | "device_lost" | "vulkan_error".
constexpr const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::device_lost: return "device_lost";
    case ErrorCode::vulkan_error: return "vulkan_error";
  }
  return "invalid";
}

// Thrown for bad arguments (the message names the argument and its values), for what the device
// cannot do (the message names the device and the limit) and for Vulkan failures (the message names
// the failing call). code() says which; for a Vulkan failure vk_result() carries the VkResult's
// name (e.g. "VK_ERROR_OUT_OF_DEVICE_MEMORY") and vk_result_code() its value. When an Error is
// thrown, nothing has been dispatched and no buffer the caller owns has been modified.
class Error : public std::runtime_error {
 public:
  // An argument error: ErrorCode::invalid_argument.
  explicit Error(const std::string& message) : Error(ErrorCode::invalid_argument, message) {}
  // An error of kind `code` with no VkResult (vk_result_code() == 0, VK_SUCCESS).
  Error(ErrorCode code, const std::string& message) : Error(code, message, 0, {}) {}
  // A Vulkan failure: the VkResult as its value and its name.
  Error(ErrorCode code, const std::string& message, int32_t vk_result_code, std::string vk_result)
      : std::runtime_error(message), code_(code), vk_result_code_(vk_result_code), vk_result_(std::move(vk_result)) {}

  ErrorCode code() const noexcept { return code_; }
  // The VkResult's value (e.g. -2 for VK_ERROR_OUT_OF_DEVICE_MEMORY); 0 (VK_SUCCESS) when the error
  // is not a Vulkan failure.
  int32_t vk_result_code() const noexcept { return vk_result_code_; }
  // The VkResult's name; empty when the error is not a Vulkan failure.
  const std::string& vk_result() const noexcept { return vk_result_; }

 private:
  ErrorCode code_;
  int32_t vk_result_code_;
  std::string vk_result_;
};

namespace detail {
// A refusal due to the device (its features or limits) rather than the arguments.
inline Error unsupported(const std::string& message) { return Error(ErrorCode::unsupported, message); }
}  // namespace detail

}  // namespace vkattn
