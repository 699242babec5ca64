// What a MultiHeadAttention holds: its sizes, dtype and weights on the device. Shared by the layer
// (mha.cpp) and the passes prepared from it (mha_prepared.cpp, mha_backward_pass.cpp), which keep the
// weights alive.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "vkattn/buffer.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/context.hpp"
#include "vkattn/mha.hpp"

namespace vkattn {

struct MultiHeadAttention::Impl {
  Context* context = nullptr;
  MhaDims dims;
  DType dtype = DType::f32;
  // Wq, Wk and Wv stacked in one buffer, (E + 2*kv_dim) rows when kdim == vdim == E: the backward of
  // self-attention multiplies the three projections' gradients by all three at once (one GEMM, no
  // sum of three). wq, wk and wv are views of it.
  std::optional<Buffer> w_in;
  std::optional<Buffer> wq, wk, wv, wo, in_bias, out_bias;
  PerHead<std::optional<Buffer>> per_head;  // f32 (num_heads), when the weights have them

  // Elements of w_in before Wk and before Wv.
  int64_t wk_at() const { return dims.embed_dim * dims.embed_dim; }
  int64_t wv_at() const { return wk_at() + dims.kv_dim() * dims.kdim; }
};

namespace detail {
// Checks a pass's spec against the layer's sizes (sizes >= 0, self-attention's seq_k and kdim/vdim,
// weights not on the fused path, no array past 2^60 values); throws Error naming the field.
void check_mha_spec(const MhaDims& dims, const MhaSpec& spec);

// The host-vector calls' buffers: Buffer::allocate wants at least one byte, so an empty array still
// gets a small buffer; and `values` rounded to `dtype` in a new buffer.
inline Buffer allocate_at_least(Context& context, uint64_t bytes) {
  return Buffer::allocate(context, std::max<uint64_t>(bytes, 16));
}
inline Buffer upload_values(Context& context, DType dtype, std::span<const float> values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer buffer = allocate_at_least(context, bytes.size());
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size());
  return buffer;
}
}  // namespace detail

}  // namespace vkattn
