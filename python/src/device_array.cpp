#include "device_array.hpp"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <string>

#include <vkattn/error.hpp>

#include "errors.hpp"
#include "host_tensor.hpp"

namespace py = pybind11;

namespace vkattn::python {

namespace {

std::string str(int64_t value) { return std::to_string(value); }

// The names .dtype reports: NumPy's for the types NumPy has, torch's for bfloat16.
const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

// The NumPy type that holds one element's bits (bf16's as uint16: NumPy has no bfloat16).
py::dtype storage_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return py::dtype("float32");
    case DType::f16: return py::dtype("float16");
    case DType::bf16: return py::dtype("uint16");
  }
  return py::dtype("float32");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += str(shape[i]);
  }
  text += shape.size() == 1 ? ",)" : ")";
  return text;
}

// Buffer::allocate refuses 0 bytes: an empty array still gets a small Buffer.
std::shared_ptr<Buffer> allocate(PythonContext& context, uint64_t bytes) {
  return std::make_shared<Buffer>(Buffer::allocate(context.context, std::max<uint64_t>(bytes, 16)));
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(shape[i], 1);
  return strides;
}

DeviceArray upload(const py::object& context_object, const py::array& array, const std::string& dtype_text) {
  PythonContext& context = context_object.cast<PythonContext&>();
  const DType dtype = parse_dtype(dtype_text);
  if (!(array.flags() & py::array::c_style)) throw Error("asarray: expected a C-contiguous array");
  if (static_cast<std::size_t>(array.itemsize()) != dtype_size(dtype)) {
    throw_type_error("asarray: " + str(array.itemsize()) + "-byte elements cannot hold " + to_string(dtype));
  }
  DeviceArray result;
  result.context = context_object;
  result.owner = &context;
  result.dtype = dtype;
  result.shape.assign(array.shape(), array.shape() + array.ndim());
  result.strides = contiguous_strides(result.shape);
  const auto bytes = static_cast<uint64_t>(array.nbytes());
  const void* data = array.data();
  py::gil_scoped_release release;  // the array stays referenced by the caller's frame
  result.buffer = allocate(context, bytes);
  if (bytes != 0) result.buffer->upload(data, bytes);
  return result;
}

DeviceArray empty(const py::object& context_object, const std::vector<int64_t>& shape, const std::string& dtype_text) {
  PythonContext& context = context_object.cast<PythonContext&>();
  DeviceArray result;
  result.context = context_object;
  result.owner = &context;
  result.dtype = parse_dtype(dtype_text);
  for (int64_t size : shape) {
    if (size < 0) throw Error("empty: negative size in shape " + shape_text(shape));
  }
  result.shape = shape;
  result.strides = contiguous_strides(shape);
  const uint64_t bytes = static_cast<uint64_t>(result.size()) * dtype_size(result.dtype);
  py::gil_scoped_release release;
  result.buffer = context.recycled->take(context.context, bytes);  // outputs: a dropped array's Buffer
  return result;
}

// The array's elements copied to a new C-ordered NumPy array (bfloat16 widened to float32, which
// holds every bfloat16 value exactly).
py::array to_numpy(const DeviceArray& a) {
  const std::size_t itemsize = dtype_size(a.dtype);
  const int64_t span = a.size() == 0 ? 0 : a.required_elements() - a.offset;
  py::array raw(storage_dtype(a.dtype), std::vector<py::ssize_t>{static_cast<py::ssize_t>(span)});
  if (span > 0) {
    void* data = raw.mutable_data();
    const uint64_t bytes = static_cast<uint64_t>(span) * itemsize, from = static_cast<uint64_t>(a.offset) * itemsize;
    py::gil_scoped_release release;
    a.buffer->download(data, bytes, from);
  }
  std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end()), byte_strides;
  for (int64_t s : a.strides) byte_strides.push_back(static_cast<py::ssize_t>(s * static_cast<int64_t>(itemsize)));
  py::array view(storage_dtype(a.dtype), shape, byte_strides, raw.data(), raw);
  py::array copy = view.attr("copy")();
  if (a.dtype != DType::bf16) return copy;
  py::array_t<float> widened(shape);
  const auto* bits = static_cast<const uint16_t*>(copy.data());
  float* values = widened.mutable_data();
  for (py::ssize_t i = 0; i < copy.size(); ++i) {
    const uint32_t word = static_cast<uint32_t>(bits[i]) << 16;
    std::memcpy(&values[i], &word, sizeof word);
  }
  return widened;
}

DeviceArray transpose(const DeviceArray& a, const py::args& args) {
  std::vector<int64_t> axes;
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) {
    axes = args[0].cast<std::vector<int64_t>>();
  } else {
    for (const py::handle& axis : args) axes.push_back(axis.cast<int64_t>());
  }
  const auto ndim = static_cast<int64_t>(a.shape.size());
  if (axes.empty()) {
    for (int64_t i = ndim; i-- > 0;) axes.push_back(i);
  }
  std::vector<bool> seen(a.shape.size(), false);
  if (static_cast<int64_t>(axes.size()) != ndim) throw Error("transpose: expected " + str(ndim) + " axes");
  DeviceArray result = a;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + ndim : axes[i];
    if (axis < 0 || axis >= ndim || seen[static_cast<std::size_t>(axis)]) {
      throw Error("transpose: axes " + shape_text(axes) + " are not a permutation of " + str(ndim) + " axes");
    }
    seen[static_cast<std::size_t>(axis)] = true;
    result.shape[i] = a.shape[static_cast<std::size_t>(axis)];
    result.strides[i] = a.strides[static_cast<std::size_t>(axis)];
  }
  return result;
}

// Another view of the same Buffer (the package's reshapes: a packed (total, heads, dim) tensor seen
// as (1, heads, total, dim)); checked to stay within the Buffer.
DeviceArray strided(const DeviceArray& a, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    int64_t offset) {
  if (shape.size() != strides.size()) throw Error("_strided: shape and strides differ in length");
  DeviceArray result = a;
  result.shape = shape;
  result.strides = strides;
  result.offset = offset;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0 || strides[i] < 0) throw Error("_strided: negative size or stride");
  }
  if (offset < 0 || (result.size() > 0 && static_cast<uint64_t>(result.required_elements()) * dtype_size(a.dtype) >
                                              a.buffer->size())) {
    throw Error("_strided: the view " + shape_text(shape) + " reaches past its Buffer");
  }
  return result;
}

std::string repr(const DeviceArray& a) {
  const PythonContext& context = *a.owner;
  return "vkattn.DeviceArray(shape=" + shape_text(a.shape) + ", dtype=" + dtype_name(a.dtype) + ", device='" +
         context.context.device_info().name + "')";
}

void check_context(const char* name, const DeviceArray& a, const PythonContext& context) {
  if (a.owner != &context) {
    throw Error(std::string(name) + ": a DeviceArray of another Context than the call's (" + repr(a) + ")");
  }
}

}  // namespace

int64_t DeviceArray::size() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

bool DeviceArray::c_contiguous() const {
  int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] > 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t DeviceArray::required_elements() const {
  int64_t last = offset;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    last += (shape[i] - 1) * strides[i];
  }
  return last + 1;
}

bool is_device_array(const py::handle& x) { return py::isinstance<DeviceArray>(x); }

const DeviceArray& as_device_array(const py::handle& x) { return x.cast<const DeviceArray&>(); }

TensorArgument tensor_argument(const char* name, const py::handle& x, DType dtype, const PythonContext& context,
                               bool output) {
  TensorArgument argument;
  if (!is_device_array(x)) {
    if (!py::isinstance<py::array>(x)) throw_type_error(std::string(name) + ": expected an array or a DeviceArray");
    const auto array = py::reinterpret_borrow<py::array>(x);
    const HostView<TensorLayout> view = tensor_view(name, array, dtype);
    if (output) check_output(name, array, view.layout.required_elements());
    argument.layout = view.layout;
    argument.host = view.data;
    argument.bytes = view.bytes;
    return argument;
  }
  const DeviceArray& a = as_device_array(x);
  check_context(name, a, context);
  if (a.dtype != dtype) {
    throw_type_error(std::string(name) + ": a " + dtype_name(a.dtype) + " DeviceArray where " + to_string(dtype) +
                     " is expected");
  }
  if (a.shape.size() != 4) throw Error(std::string(name) + ": expected 4 dimensions, got " + shape_text(a.shape));
  if (a.shape[3] > 1 && a.strides[3] != 1) {
    throw Error(std::string(name) + ": the last dimension of a DeviceArray view must be contiguous");
  }
  TensorLayout& l = argument.layout;
  l.dtype = dtype;
  l.batch = a.shape[0];
  l.heads = a.shape[1];
  l.seq = a.shape[2];
  l.dim = a.shape[3];
  // A dimension of size 1 is never stepped along (as host views): its stride is 0.
  l.stride_batch = a.shape[0] > 1 ? a.strides[0] : 0;
  l.stride_head = a.shape[1] > 1 ? a.strides[1] : 0;
  l.stride_seq = a.shape[2] > 1 ? a.strides[2] : 0;
  l.offset = a.offset;
  argument.device = a.buffer;
  return argument;
}

TensorArgument dense_argument(const char* name, const py::handle& x, char kind, const PythonContext& context,
                              int64_t elements, bool output) {
  TensorArgument argument;
  if (!is_device_array(x)) {
    if (!py::isinstance<py::array>(x)) throw_type_error(std::string(name) + ": expected an array or a DeviceArray");
    const auto array = py::reinterpret_borrow<py::array>(x);
    const HostView<std::monostate> view = dense_view(name, array, kind, 4);
    if (output) check_output(name, array, static_cast<int64_t>(array.size()));
    if (static_cast<int64_t>(array.size()) != elements) {
      throw Error(std::string(name) + ": expected " + str(elements) + " elements, got " + str(array.size()));
    }
    argument.host = view.data;
    argument.bytes = view.bytes;
    return argument;
  }
  const DeviceArray& a = as_device_array(x);
  check_context(name, a, context);
  if (kind != 'f' || a.dtype != DType::f32) {
    throw_type_error(std::string(name) + ": expected " + (kind == 'f' ? "float32" : "int32") + " elements, got a " +
                     dtype_name(a.dtype) + " DeviceArray");
  }
  if (!a.c_contiguous()) throw Error(std::string(name) + ": expected a C-contiguous DeviceArray");
  if (a.size() != elements) {
    throw Error(std::string(name) + ": expected " + str(elements) + " elements, got " + str(a.size()));
  }
  argument.layout.offset = a.offset;
  argument.bytes = static_cast<uint64_t>(elements) * 4;
  argument.device = a.buffer;
  return argument;
}

const Buffer* input_buffer(DeviceTensors& tensors, const TensorArgument& argument) {
  return argument.device ? argument.device.get() : tensors.input(argument.host, argument.bytes);
}

const Buffer* output_buffer(DeviceTensors& tensors, const TensorArgument& argument) {
  return argument.device ? argument.device.get() : tensors.output(argument.host, argument.bytes);
}

void register_device_array(py::module_& module) {
  py::class_<DeviceArray>(module, "DeviceArray",
                          "A tensor in device memory on one vkattn.Context (create one with vkattn.asarray). The "
                          "calls read and write DeviceArrays in place: given DeviceArrays, they return "
                          "DeviceArrays, and nothing is copied to or from the host.")
      .def_property_readonly(
          "shape", [](const DeviceArray& a) { return py::tuple(py::cast(a.shape)); }, "The dimensions, a tuple.")
      .def_property_readonly(
          "dtype", [](const DeviceArray& a) { return dtype_name(a.dtype); },
          "\"float32\", \"float16\" or \"bfloat16\".")
      .def_property_readonly(
          "ndim", [](const DeviceArray& a) { return a.shape.size(); }, "The number of dimensions.")
      .def_property_readonly(
          "size", [](const DeviceArray& a) { return a.size(); }, "The number of elements.")
      .def_property_readonly(
          "strides", [](const DeviceArray& a) { return py::tuple(py::cast(a.strides)); },
          "The strides in elements (not bytes, unlike NumPy's).")
      .def_property_readonly(
          "_offset", [](const DeviceArray& a) { return a.offset; }, "Internal: the first element's index in the Buffer.")
      .def_property_readonly(
          "nbytes", [](const DeviceArray& a) { return a.size() * static_cast<int64_t>(dtype_size(a.dtype)); },
          "The elements' bytes.")
      .def_property_readonly(
          "context", [](const DeviceArray& a) { return a.context; }, "The vkattn.Context whose device holds it.")
      .def("numpy", &to_numpy,
           "A copy on the host: a C-ordered NumPy array of float32 or float16 (bfloat16 is widened to float32, "
           "which holds each of its values exactly).")
      .def(
          "__array__",
          [](const DeviceArray& a, const py::object& dtype, const py::object&) {
            py::array array = to_numpy(a);
            return dtype.is_none() ? array : py::array(array.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none(), "numpy.asarray(x): x.numpy().")
      .def("transpose", &transpose,
           "A view with the axes permuted (as numpy.ndarray.transpose; no axes reverses them), sharing the "
           "memory.")
      .def("_strided", &strided, py::arg("shape"), py::arg("strides"), py::arg("offset"),
           "Internal: another view of the same Buffer (strides and offset in elements).")
      .def("__len__",
           [](const DeviceArray& a) {
             if (a.shape.empty()) throw py::type_error("len() of a 0-d DeviceArray");
             return a.shape[0];
           })
      .def("__repr__", &repr);

  module.def("upload", &upload, py::arg("context"), py::arg("array"), py::arg("dtype"),
             "Internal (vkattn.asarray): a C-contiguous array of `dtype`'s storage type copied to a new "
             "DeviceArray of `context`.");
  module.def("empty", &empty, py::arg("context"), py::arg("shape"), py::arg("dtype"),
             "Internal: a new C-ordered DeviceArray whose contents are undefined.");
}

}  // namespace vkattn::python
