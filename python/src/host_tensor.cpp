#include "host_tensor.hpp"

#include <array>
#include <string>

#include <vkattn/error.hpp>

#include "errors.hpp"

namespace py = pybind11;

namespace vkattn::python {

namespace {

std::string str(int64_t value) { return std::to_string(value); }

// The array's strides in elements; throws when one is negative or not a whole number of elements.
std::array<int64_t, 4> element_strides(const char* name, const py::array& array) {
  std::array<int64_t, 4> strides{};
  const auto itemsize = static_cast<int64_t>(array.itemsize());
  for (py::ssize_t axis = 0; axis < 4; ++axis) {
    const auto stride = static_cast<int64_t>(array.strides(axis));
    if (array.shape(axis) > 1 && (stride < 0 || stride % itemsize != 0)) {
      throw Error(std::string(name) + ": stride " + str(stride) + " bytes of axis " + str(axis) +
                  " is negative or not a whole number of elements; copy it with numpy.ascontiguousarray");
    }
    // A dimension of size 1 is never stepped along: its stride, whatever NumPy says, is 0.
    strides[static_cast<std::size_t>(axis)] = array.shape(axis) > 1 ? stride / itemsize : 0;
  }
  return strides;
}

void check_ndim(const char* name, const py::array& array, py::ssize_t ndim) {
  if (array.ndim() != ndim) {
    throw Error(std::string(name) + ": expected " + str(ndim) + " dimensions, got " + str(array.ndim()));
  }
}

}  // namespace

HostView<TensorLayout> tensor_view(const char* name, const py::array& array, DType dtype) {
  check_ndim(name, array, 4);
  if (static_cast<std::size_t>(array.itemsize()) != dtype_size(dtype)) {
    throw_type_error(std::string(name) + ": " + str(array.itemsize()) + "-byte elements cannot hold " +
                     to_string(dtype));
  }
  const std::array<int64_t, 4> strides = element_strides(name, array);
  if (array.shape(3) > 1 && strides[3] != 1) {
    throw Error(std::string(name) + ": the last dimension must be contiguous (stride " + str(strides[3]) +
                " elements); copy it with numpy.ascontiguousarray");
  }
  HostView<TensorLayout> view;
  view.layout.dtype = dtype;
  view.layout.batch = array.shape(0);
  view.layout.heads = array.shape(1);
  view.layout.seq = array.shape(2);
  view.layout.dim = array.shape(3);
  view.layout.stride_batch = strides[0];
  view.layout.stride_head = strides[1];
  view.layout.stride_seq = strides[2];
  view.data = const_cast<void*>(array.data());
  view.bytes = static_cast<uint64_t>(view.layout.required_elements()) * dtype_size(dtype);
  return view;
}

HostView<MaskLayout> mask_view(const py::array& array) {
  check_ndim("attn_mask", array, 4);
  MaskType type = MaskType::boolean;
  const py::dtype dtype = array.dtype();
  if (dtype.is(py::dtype::of<bool>())) {
    type = MaskType::boolean;
  } else if (dtype.is(py::dtype::of<float>())) {
    type = MaskType::f32;
  } else if (dtype.kind() == 'f' && dtype.itemsize() == 2) {
    type = MaskType::f16;
  } else {
    throw_type_error("attn_mask: expected bool, float32 or float16 elements");
  }
  const std::array<int64_t, 4> strides = element_strides("attn_mask", array);
  if (array.shape(3) > 1 && strides[3] != 1) {
    throw Error("attn_mask: the key dimension must be contiguous (stride " + str(strides[3]) + " elements)");
  }
  HostView<MaskLayout> view;
  view.layout.type = type;
  view.layout.batch = array.shape(0);
  view.layout.heads = array.shape(1);
  view.layout.seq_q = array.shape(2);
  view.layout.seq_k = array.shape(3);
  view.layout.stride_batch = strides[0];
  view.layout.stride_head = strides[1];
  view.layout.stride_q = strides[2];
  view.data = const_cast<void*>(array.data());
  view.bytes = static_cast<uint64_t>(view.layout.required_elements()) * mask_type_size(type);
  return view;
}

HostView<std::monostate> dense_view(const char* name, const py::array& array, char kind, int itemsize) {
  if (array.dtype().kind() != kind || array.itemsize() != itemsize) {
    throw_type_error(std::string(name) + ": expected " + (kind == 'f' ? "float" : "int") + str(8 * itemsize) +
                     " elements");
  }
  if (!(array.flags() & py::array::c_style)) throw Error(std::string(name) + ": expected a C-contiguous array");
  HostView<std::monostate> view;
  view.data = const_cast<void*>(array.data());
  view.bytes = static_cast<uint64_t>(array.nbytes());
  return view;
}

void check_output(const char* name, const py::array& array, int64_t elements) {
  if (!array.writeable()) throw Error(std::string(name) + ": the output array is read-only");
  if (static_cast<int64_t>(array.size()) != elements) {
    throw Error(std::string(name) + ": the output array has gaps between its elements");
  }
}

}  // namespace vkattn::python
