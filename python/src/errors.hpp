// The Python exceptions of vkattn and the translation of vkattn::Error into them.
//   vkattn.Error (a ValueError): every vkattn::Error; .code is its ErrorCode ("invalid_argument",
//     "unsupported", ...), .vk_result the failing VkResult's name ("" when none).
//   vkattn.DeviceError (an Error and a RuntimeError): the device failed rather than the call being
//     wrong: out_of_memory, device_lost, vulkan_error.
// Other C++ exceptions keep pybind11's translation (std::exception -> RuntimeError).
#pragma once

#include <pybind11/pybind11.h>

namespace vkattn::python {

// Creates the two exception classes in `module` and registers the translator.
void register_errors(pybind11::module_& module);

// Raises Python's TypeError from C++ (a wrong kind or dtype of argument).
[[noreturn]] void throw_type_error(const std::string& message);

}  // namespace vkattn::python
