// The backward calls of the module: attention_backward (dense) and varlen_attention_backward
// (packed), vkattn's PreparedAttentionBackward on host arrays. vkattn/_autograd.py calls them from a
// torch.autograd.Function's backward with the forward's inputs, its O and LSE, and dO; they write
// dQ, dK, dV (and dsinks) into arrays laid out as Q, K, V (and the sinks).
#pragma once

#include <pybind11/pybind11.h>

namespace vkattn::python {

void register_backward_calls(pybind11::module_& module);

}  // namespace vkattn::python
