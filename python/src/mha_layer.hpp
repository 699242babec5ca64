// vkattn._vkattn.MhaLayer: the library's multi-head layer (vkattn/mha.hpp, MultiHeadAttention) on
// host float32 arrays, batch-first, run as its prepared passes (PreparedMha, PreparedMhaBackward)
// so that the mask may be any (batch | 1, heads | 1, seq_q, seq_k) one. vkattn/_mha.py builds vkattn.MultiheadAttention, PyTorch's
// nn.MultiheadAttention interface, on it: state_dicts, batch_first=False, torch tensors, autograd.
#pragma once

#include <pybind11/pybind11.h>

namespace vkattn::python {

void register_mha_layer(pybind11::module_& module);

}  // namespace vkattn::python
