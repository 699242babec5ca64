// vkattn.DeviceArray: a tensor held in device memory (a vkattn Buffer) on one Context, so that a call
// given DeviceArrays reads and writes them in place and nothing travels to or from the host (a decode
// loop keeps its KV cache on the device and moves only its new tokens). A DeviceArray is a strided
// view (shape, element strides, element offset) of a Buffer; views (transpose) share the Buffer.
//
// The calls take each tensor argument as either kind: tensor_argument() turns a NumPy array or a
// DeviceArray into the memory the call uses (host bytes to upload or download, or the Buffer itself).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <vkattn/buffer.hpp>
#include <vkattn/types.hpp>

#include "context.hpp"
#include "device_tensors.hpp"

namespace vkattn::python {

struct DeviceArray {
  std::shared_ptr<Buffer> buffer;  // shared with the views of the same memory
  pybind11::object context;        // the vkattn.Context the Buffer belongs to
  PythonContext* owner = nullptr;  // context's C++ object, to tell Contexts apart without Python
  DType dtype = DType::f32;
  std::vector<int64_t> shape, strides;  // strides in elements
  int64_t offset = 0;                   // elements from the Buffer's start

  int64_t size() const;
  bool c_contiguous() const;
  // Elements from offset 0 up to the last element + 1 (what the Buffer must hold).
  int64_t required_elements() const;
};

// Where a call's tensor lives: host memory that the call uploads (an input) or downloads into (an
// output), or a DeviceArray's Buffer, used in place. `layout` is the tensor's (offset 0 for host
// memory, the DeviceArray's offset for a Buffer).
struct TensorArgument {
  TensorLayout layout;
  void* host = nullptr;
  uint64_t bytes = 0;
  std::shared_ptr<Buffer> device;  // set for a DeviceArray: the call keeps it alive
};

// A 4-D (batch, heads, seq, dim) tensor argument of `dtype`: a NumPy array (read in place, as
// tensor_view does) or a DeviceArray of `context`. An output must be writeable and gapless (host) or
// of `context` (device). Throws TypeError or vkattn::Error naming `name`.
TensorArgument tensor_argument(const char* name, const pybind11::handle& x, DType dtype, const PythonContext& context,
                               bool output);

// A dense (C-contiguous) f32 or int32 argument of `elements` elements (an LSE, the weights): a NumPy
// array or a DeviceArray of `context`. `layout` is unused; `device` and the byte offset
// layout.offset * 4 locate it in a Buffer.
TensorArgument dense_argument(const char* name, const pybind11::handle& x, char kind, const PythonContext& context,
                              int64_t elements, bool output);

// The Buffer of an argument (a DeviceArray's own, or host memory uploaded now / to be downloaded
// after the run through `tensors`).
const Buffer* input_buffer(DeviceTensors& tensors, const TensorArgument& argument);
const Buffer* output_buffer(DeviceTensors& tensors, const TensorArgument& argument);

// Where a dense argument starts in its Buffer, in bytes (0 for host memory, which gets a Buffer of its
// own).
inline uint64_t dense_offset_bytes(const TensorArgument& argument) {
  return argument.device ? static_cast<uint64_t>(argument.layout.offset) * 4 : 0;
}

bool is_device_array(const pybind11::handle& x);
const DeviceArray& as_device_array(const pybind11::handle& x);

// vkattn._vkattn.DeviceArray and its factories (upload, empty).
void register_device_array(pybind11::module_& module);

}  // namespace vkattn::python
