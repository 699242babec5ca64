// The layer's backward pass on host arrays: uploads the inputs, the merged mask and the output's
// gradient, runs the backward prepared for their shape (mha_backward_prepared.cpp) into one f32
// buffer of every gradient, and downloads them.
#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "attention_record.hpp"
#include "mha_layer.hpp"
#include "mha_mask.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha.hpp"
#include "vkattn/mha_backward.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn {

using detail::allocate_at_least;
using detail::upload_values;

std::vector<float> MhaBackwardResult::in_proj_weight() const {
  if (kdim != embed_dim || vdim != embed_dim) return {};
  std::vector<float> stacked = q_proj_weight;
  stacked.insert(stacked.end(), k_proj_weight.begin(), k_proj_weight.end());
  stacked.insert(stacked.end(), v_proj_weight.begin(), v_proj_weight.end());
  return stacked;
}

MhaBackwardResult MultiHeadAttention::backward(const MhaInputs& in, std::span<const float> grad_out, AttentionPath path) {
  const Impl& layer = impl();
  detail::check_path(path);
  const MhaDims& d = layer.dims;
  const MhaCall call = check_mha_inputs(d, in);
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k, E = d.embed_dim, KVD = d.kv_dim();
  if (int64_t(grad_out.size()) != B * Sq * E)
    throw Error("grad_out: expected (" + std::to_string(B) + ", " + std::to_string(Sq) + ", " + std::to_string(E) +
                ") = " + std::to_string(B * Sq * E) + " values (the output's shape), got " + std::to_string(grad_out.size()));
  Context& context = *layer.context;
  const DType dt = layer.dtype;

  detail::MhaMask mask = detail::merge_mha_masks(in, call);
  MhaSpec spec;
  spec.batch = B, spec.seq_q = Sq, spec.seq_k = Sk;
  spec.self_attention = call.self_attention;
  spec.options = in.options;
  spec.mask = mask.layout;
  spec.path = path;
  // Every check and the plan before anything is uploaded.
  const PreparedMhaBackward pass = prepare_backward(spec);

  const Buffer query = upload_values(context, dt, in.query);
  std::optional<Buffer> key, value, mask_buffer;
  if (!call.self_attention) {
    key.emplace(upload_values(context, dt, in.key));
    value.emplace(upload_values(context, dt, in.value));
  }
  if (mask.layout) {
    mask_buffer.emplace(allocate_at_least(context, mask.bytes.size()));
    if (!mask.bytes.empty()) mask_buffer->upload(mask.bytes.data(), mask.bytes.size());
  }
  const Buffer dy = upload_values(context, dt, grad_out);
  const Buffer out = allocate_at_least(context, uint64_t(B * Sq * E) * dtype_size(dt));

  // Every gradient in one f32 buffer, back to back, in MhaBackwardResult's order.
  MhaBackwardResult r;
  r.embed_dim = E, r.kdim = d.kdim, r.vdim = d.vdim;
  MhaBackwardBuffers buffers;
  const std::array<std::pair<std::vector<float>*, BufferSlice*>, 10> parts = {{
      {&r.q_proj_weight, &buffers.grads.q_proj_weight}, {&r.k_proj_weight, &buffers.grads.k_proj_weight},
      {&r.v_proj_weight, &buffers.grads.v_proj_weight}, {&r.in_proj_bias, &buffers.grads.in_proj_bias},
      {&r.out_proj_weight, &buffers.grads.out_proj_weight}, {&r.out_proj_bias, &buffers.grads.out_proj_bias},
      {&r.sinks, &buffers.grads.sinks}, {&r.query, &buffers.grads.query}, {&r.key, &buffers.grads.key},
      {&r.value, &buffers.grads.value}}};
  const std::array<int64_t, 10> sizes = {E * E,
                                         KVD * d.kdim,
                                         KVD * d.vdim,
                                         d.bias ? E + 2 * KVD : 0,
                                         E * E,
                                         d.bias ? E : 0,
                                         d.has_sinks ? d.num_heads : 0,
                                         B * Sq * E,
                                         call.self_attention ? 0 : B * Sk * d.kdim,
                                         call.self_attention ? 0 : B * Sk * d.vdim};
  const bool given[10] = {true, true, true, d.bias, true, d.bias, d.has_sinks, true, !call.self_attention, !call.self_attention};
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  // (One value more: an empty gradient's slice at the end still names a value, as every binding must.)
  const Buffer grads = allocate_at_least(context, uint64_t(total + 1) * 4);
  int64_t at = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (given[i]) *parts[i].second = BufferSlice{&grads, uint64_t(at) * 4};
    at += sizes[i];
  }
  buffers.query = &query;
  if (key) buffers.key = &*key, buffers.value = &*value;
  if (mask_buffer) buffers.mask = &*mask_buffer;
  buffers.out = &out;
  buffers.grad_out = &dy;
  pass.run(buffers);

  std::vector<std::byte> raw(static_cast<std::size_t>(B * Sq * E) * dtype_size(dt));
  if (!raw.empty()) out.download(raw.data(), raw.size());
  r.out.resize(static_cast<std::size_t>(B * Sq * E));
  decode(dt, raw.data(), r.out.data(), r.out.size());
  std::vector<float> all(static_cast<std::size_t>(total));
  if (total > 0) grads.download(all.data(), uint64_t(total) * 4);
  at = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    parts[i].first->assign(all.begin() + at, all.begin() + at + sizes[i]);
    at += sizes[i];
  }
  return r;
}

}  // namespace vkattn
