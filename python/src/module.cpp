// The extension module vkattn._vkattn: the C++ half of the Python package (python/vkattn/ is the
// other half, which turns NumPy arrays and torch tensors into the arrays these functions take).
#include <pybind11/pybind11.h>

#include <vkattn/version.hpp>

#include "backward_call.hpp"
#include "calls.hpp"
#include "context.hpp"
#include "device_array.hpp"
#include "errors.hpp"
#include "kvcache_call.hpp"
#include "mha_layer.hpp"

PYBIND11_MODULE(_vkattn, module) {
  module.doc() = "vkattn's compute-shader attention (the C++ library) for Python: use the vkattn package.";
  module.attr("__version__") = vkattn::version();
  vkattn::python::register_errors(module);
  vkattn::python::register_context(module);
  vkattn::python::register_calls(module);
  vkattn::python::register_device_array(module);
  vkattn::python::register_kvcache_call(module);
  vkattn::python::register_backward_calls(module);
  vkattn::python::register_mha_layer(module);
}
