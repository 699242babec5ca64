// What a MultiHeadAttention holds: its sizes, dtype and weights on the device. Shared by the layer
// (mha.cpp) and the passes prepared from it (mha_prepared.cpp), which keep the weights alive.
#pragma once

#include <optional>

#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/mha.hpp"

namespace vkattn {

struct MultiHeadAttention::Impl {
  Context* context = nullptr;
  MhaDims dims;
  DType dtype = DType::f32;
  std::optional<Buffer> wq, wk, wv, wo, in_bias, out_bias;
  PerHead<std::optional<Buffer>> per_head;  // f32 (num_heads), when the weights have them
};

}  // namespace vkattn
