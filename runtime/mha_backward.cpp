// The layer's backward pass on host arrays: uploads the inputs, the merged mask and the output's
// gradient, runs a forward and backward pass planned for their shape (mha_backward_pass.cpp) and
// downloads every gradient.
#include <algorithm>
#include <optional>
#include <string>

#include "attention_record.hpp"
#include "mha_backward_pass.hpp"
#include "mha_layer.hpp"
#include "mha_mask.hpp"
#include "planned_call.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn {
namespace {

Buffer allocate(Context& context, uint64_t bytes) { return Buffer::allocate(context, std::max<uint64_t>(bytes, 16)); }

Buffer upload(Context& context, DType dtype, std::span<const float> values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer buffer = allocate(context, bytes.size());
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

std::vector<float> download_f32(const Buffer& buffer, int64_t at, int64_t count) {
  std::vector<float> values(static_cast<std::size_t>(count));
  if (count > 0) buffer.download(values.data(), uint64_t(count) * 4, uint64_t(at) * 4);
  return values;
}

}  // namespace

std::vector<float> MhaBackwardResult::in_proj_weight() const {
  if (kdim != embed_dim || vdim != embed_dim) return {};
  std::vector<float> stacked = q_proj_weight;
  stacked.insert(stacked.end(), k_proj_weight.begin(), k_proj_weight.end());
  stacked.insert(stacked.end(), v_proj_weight.begin(), v_proj_weight.end());
  return stacked;
}

MhaBackwardResult MultiHeadAttention::backward(const MhaInputs& inputs, std::span<const float> grad_out, AttentionPath path) {
  return detail::MhaBackwardPass::run_host(*this, inputs, grad_out, path, false);
}

namespace detail {

MhaBackwardResult MhaBackwardPass::run_host(const MultiHeadAttention& self, const MhaInputs& in,
                                            std::span<const float> grad_out, AttentionPath path, bool poison) {
  const MultiHeadAttention::Impl& layer = self.impl();
  detail::check_path(path);
  const MhaDims& d = layer.dims;
  const MhaCall call = check_mha_inputs(d, in);
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k, E = d.embed_dim, KVD = d.kv_dim();
  if (int64_t(grad_out.size()) != B * Sq * E)
    throw Error("grad_out: expected (" + std::to_string(B) + ", " + std::to_string(Sq) + ", " + std::to_string(E) +
                ") = " + std::to_string(B * Sq * E) + " values (the output's shape), got " + std::to_string(grad_out.size()));
  // The backward is exact only for the forward it differentiates: no dropout until the forward applies it.
  detail::refuse_forward_dropout(in.options);
  Context& context = *layer.context;
  const DType dt = layer.dtype;

  MhaBackwardResult r;
  r.embed_dim = E, r.kdim = d.kdim, r.vdim = d.vdim;
  const auto zeros = [](int64_t n) { return std::vector<float>(static_cast<std::size_t>(n), 0.0f); };
  if (B * Sq == 0 || Sk == 0) {
    // No key to attend to (or no query): attention's output is 0, so the layer's output is
    // out_proj.bias, whose gradient is dY's column sums; every other gradient is 0. Nothing to dispatch.
    r.q_proj_weight = zeros(E * E), r.k_proj_weight = zeros(KVD * d.kdim), r.v_proj_weight = zeros(KVD * d.vdim);
    r.out_proj_weight = zeros(E * E);
    if (d.has_sinks) r.sinks = zeros(d.num_heads);
    r.query = zeros(B * Sq * E);
    if (!call.self_attention) r.key = zeros(B * Sk * d.kdim), r.value = zeros(B * Sk * d.vdim);
    r.out = zeros(B * Sq * E);
    if (d.bias) {
      r.in_proj_bias = zeros(E + 2 * KVD);
      std::vector<double> sums(static_cast<std::size_t>(E), 0.0);
      for (int64_t t = 0; t < B * Sq; ++t)
        for (int64_t e = 0; e < E; ++e) sums[std::size_t(e)] += grad_out[std::size_t(t * E + e)];
      r.out_proj_bias.assign(sums.begin(), sums.end());
      // The output: the bias as the layer holds it (in its dtype), in every row.
      std::vector<std::byte> raw(static_cast<std::size_t>(E) * dtype_size(dt));
      std::vector<float> bias(static_cast<std::size_t>(E));
      layer.out_bias->download(raw.data(), raw.size());
      decode(dt, raw.data(), bias.data(), bias.size());
      for (int64_t t = 0; t < B * Sq; ++t) std::copy(bias.begin(), bias.end(), r.out.begin() + t * E);
    }
    return r;
  }

  detail::MhaMask mask = detail::merge_mha_masks(in, call);
  MhaSpec spec;
  spec.batch = B, spec.seq_q = Sq, spec.seq_k = Sk;
  spec.self_attention = call.self_attention;
  spec.options = in.options;
  spec.mask = mask.layout;
  spec.path = path;
  // Every check and the plan before anything is uploaded.
  MhaBackwardPass pass(self, spec);
  if (poison) pass.poison();

  const Buffer query = upload(context, dt, in.query);
  std::optional<Buffer> key, value, mask_buffer;
  if (!call.self_attention) {
    key.emplace(upload(context, dt, in.key));
    value.emplace(upload(context, dt, in.value));
  }
  if (mask.layout) {
    mask_buffer.emplace(allocate(context, mask.bytes.size()));
    if (!mask.bytes.empty()) mask_buffer->upload(mask.bytes.data(), mask.bytes.size());
  }
  const Buffer dy = upload(context, dt, grad_out);
  const Buffer out = allocate(context, uint64_t(B * Sq * E) * dtype_size(dt));
  detail::MhaStepBuffers buffers;
  buffers.query = &query;
  if (key) buffers.key = &*key, buffers.value = &*value;
  if (mask_buffer) buffers.mask = &*mask_buffer;
  buffers.out = &out;
  buffers.grad_out = &dy;
  pass.run(buffers);

  std::vector<std::byte> raw(static_cast<std::size_t>(B * Sq * E) * dtype_size(dt));
  out.download(raw.data(), raw.size());
  r.out.resize(static_cast<std::size_t>(B * Sq * E));
  decode(dt, raw.data(), r.out.data(), r.out.size());
  const detail::MhaGradLayout& g = pass.grad_layout();
  const std::vector<float> params = download_f32(pass.grad_params(), 0, g.total);
  const auto part = [&](int64_t from, int64_t to) {
    return std::vector<float>(params.begin() + from, params.begin() + to);
  };
  r.q_proj_weight = part(g.q_w, g.k_w);
  r.k_proj_weight = part(g.k_w, g.v_w);
  r.v_proj_weight = part(g.v_w, g.in_b);
  r.in_proj_bias = part(g.in_b, g.out_w);
  r.out_proj_weight = part(g.out_w, g.out_b);
  r.out_proj_bias = part(g.out_b, g.sinks);
  r.sinks = part(g.sinks, g.total);
  r.query = download_f32(pass.grad_query(), 0, B * Sq * E);
  if (!call.self_attention) {
    r.key = download_f32(*pass.grad_key(), 0, B * Sk * d.kdim);
    r.value = download_f32(*pass.grad_value(), 0, B * Sk * d.vdim);
  }
  return r;
}

}  // namespace detail
}  // namespace vkattn
