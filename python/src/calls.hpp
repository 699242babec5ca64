// The attention calls of the module: a dense call on (batch, heads, seq, dim) arrays and a packed
// (varlen) call, each planned through the Context's plan cache and run with the GIL released.
// vkattn/_sdpa.py and vkattn/_flash.py turn PyTorch's and FlashAttention's arguments into these.
#pragma once

#include <pybind11/pybind11.h>

namespace vkattn::python {

void register_calls(pybind11::module_& module);

}  // namespace vkattn::python
