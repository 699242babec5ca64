// NumPy arrays seen as vkattn layouts, in place: the array's own strides become the layout's, and the
// bytes from its first element to its last are what travels to and from the device. The Python side
// (vkattn/_arrays.py) hands over arrays whose strides vkattn takes (non-negative, whole elements,
// last dimension contiguous) and copies the others; these functions check it again, so a wrong
// array is a TypeError or vkattn.Error here, never a read outside its memory.
#pragma once

#include <pybind11/numpy.h>

#include <cstdint>
#include <optional>
#include <variant>

#include <vkattn/types.hpp>

namespace vkattn::python {

// Host memory of one tensor: `bytes` bytes from `data` (the array's first element) hold every
// element of `layout`, whose offset is 0.
template <class Layout>
struct HostView {
  void* data = nullptr;
  uint64_t bytes = 0;
  Layout layout;
};

// A 4-D (batch, heads, seq, dim) array of `dtype` ("f32", "f16", "bf16"; a bf16 array arrives as
// 16-bit integers). `name` is the argument's name in messages.
HostView<TensorLayout> tensor_view(const char* name, const pybind11::array& array, DType dtype);

// A 4-D (batch | 1, heads | 1, seq_q, seq_k) mask of bool, float32 or float16.
HostView<MaskLayout> mask_view(const pybind11::array& array);

// A float32 array of `ndim` dimensions, C-contiguous (a per-head tensor, an LSE or weights output,
// int32 offsets): its bytes.
HostView<std::monostate> dense_view(const char* name, const pybind11::array& array, char kind, int itemsize);

// An output array must be writeable and hold nothing but its elements between its first and last
// (so that downloading its byte span writes its elements only).
void check_output(const char* name, const pybind11::array& array, int64_t elements);

}  // namespace vkattn::python
