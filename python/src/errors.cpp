#include "errors.hpp"

#include <vkattn/error.hpp>

namespace py = pybind11;

namespace vkattn::python {

namespace {

// The exception classes outlive every call into the module, so they are created once and kept (the
// one piece of global state: pybind11's own exception registrations work the same way).
PyObject* error_class = nullptr;
PyObject* device_error_class = nullptr;

bool is_device_failure(ErrorCode code) {
  return code == ErrorCode::out_of_memory || code == ErrorCode::device_lost || code == ErrorCode::vulkan_error;
}

void raise(const Error& e) {
  PyObject* cls = is_device_failure(e.code()) ? device_error_class : error_class;
  py::object exception = py::reinterpret_borrow<py::object>(cls)(e.what());
  exception.attr("code") = to_string(e.code());
  exception.attr("vk_result") = e.vk_result();
  PyErr_SetObject(cls, exception.ptr());
}

}  // namespace

void register_errors(py::module_& module) {
  error_class = PyErr_NewExceptionWithDoc(
      "vkattn.Error",
      "A call vkattn refused or could not run (a ValueError). str(e) is the library's message, naming "
      "the argument and its values; e.code is the kind of failure (\"invalid_argument\", \"unsupported\", "
      "\"out_of_memory\", \"device_lost\", \"vulkan_error\") and e.vk_result the failing VkResult's name "
      "(\"\" when none).",
      PyExc_ValueError, nullptr);
  py::tuple device_bases = py::make_tuple(py::handle(error_class), py::handle(PyExc_RuntimeError));
  device_error_class = PyErr_NewExceptionWithDoc(
      "vkattn.DeviceError",
      "The device failed (out of memory, device lost, another Vulkan error): a vkattn.Error that is also "
      "a RuntimeError.",
      device_bases.ptr(), nullptr);
  if (error_class == nullptr || device_error_class == nullptr) throw py::error_already_set();
  module.attr("Error") = py::handle(error_class);
  module.attr("DeviceError") = py::handle(device_error_class);
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const Error& e) {
      raise(e);
    }
  });
}

void throw_type_error(const std::string& message) { throw py::type_error(message); }

}  // namespace vkattn::python
