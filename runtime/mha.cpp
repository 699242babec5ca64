// The multi-head attention layer: its weights on the device, and the host-array forward pass, which
// uploads the inputs and runs a pass prepared for their shape (mha_prepared.cpp).
#include "vkattn/mha.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "attention_record.hpp"
#include "mha_layer.hpp"
#include "mha_mask.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn {
namespace {

using detail::allocate_at_least;
using detail::upload_values;

// Rounds `values` to `dtype` into `buffer` from element `at`.
void write(Buffer& buffer, DType dtype, std::span<const float> values, int64_t at = 0) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size(), uint64_t(at) * dtype_size(dtype));
}

}  // namespace

// The layer's buffers (allocated for `weights`' sizes, checked) filled with its values.
void MultiHeadAttention::write_weights(Impl& l, const MhaWeights& weights) {
  const DType dt = l.dtype;
  write(*l.w_in, dt, weights.q_proj_weight);
  write(*l.w_in, dt, weights.k_proj_weight, l.wk_at());
  write(*l.w_in, dt, weights.v_proj_weight, l.wv_at());
  write(*l.wo, dt, weights.out_proj_weight);
  if (weights.bias) {
    write(*l.in_bias, dt, weights.in_proj_bias);
    write(*l.out_bias, dt, weights.out_proj_bias);
  }
  const PerHeadValues per_head = weights.per_head();
  for (PerHeadTensor t : kPerHeadTensors)
    if (per_head.layout(t)) write(*l.per_head[t], DType::f32, per_head.values(t));
}

MultiHeadAttention::MultiHeadAttention(Context& context, const MhaWeights& weights, DType dtype)
    : impl_(std::make_shared<Impl>()) {
  impl_->dims = check_mha_weights(weights);
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16)
    throw Error("dtype: invalid value " + std::to_string(static_cast<int>(dtype)));
  if (dtype != DType::f32 && !context.device_info().storage_16bit)
    throw detail::unsupported(std::string("dtype: ") + to_string(dtype) + " needs storageBuffer16BitAccess, which " +
                              context.device_info().name + " does not offer");
  impl_->context = &context;
  impl_->dtype = dtype;
  // Wq, Wk, Wv in one buffer (mha_layer.hpp), each seen through a view.
  Impl& l = *impl_;
  const uint64_t es = dtype_size(dtype);
  l.w_in.emplace(allocate_at_least(context, uint64_t(l.wv_at() + l.dims.kv_dim() * l.dims.vdim) * es));
  l.wq.emplace(Buffer::wrap(context, l.w_in->handle(), l.w_in->offset(), uint64_t(l.wk_at()) * es));
  l.wk.emplace(Buffer::wrap(context, l.w_in->handle(), l.w_in->offset() + uint64_t(l.wk_at()) * es,
                            uint64_t(l.wv_at() - l.wk_at()) * es));
  l.wv.emplace(Buffer::wrap(context, l.w_in->handle(), l.w_in->offset() + uint64_t(l.wv_at()) * es,
                            uint64_t(l.dims.kv_dim() * l.dims.vdim) * es));
  l.wo.emplace(allocate_at_least(context, uint64_t(weights.out_proj_weight.size()) * es));
  if (weights.bias) {
    l.in_bias.emplace(allocate_at_least(context, uint64_t(weights.in_proj_bias.size()) * es));
    l.out_bias.emplace(allocate_at_least(context, uint64_t(weights.out_proj_bias.size()) * es));
  }
  // Per-head score modifiers: f32, as attention() reads them.
  const PerHeadValues per_head = weights.per_head();
  for (PerHeadTensor t : kPerHeadTensors)
    if (per_head.layout(t)) l.per_head[t].emplace(allocate_at_least(context, uint64_t(per_head.values(t).size()) * 4));
  write_weights(l, weights);
}

void MultiHeadAttention::set_weights(const MhaWeights& weights) {
  Impl& l = impl();
  const MhaDims d = check_mha_weights(weights);
  const MhaDims& o = l.dims;
  if (d.embed_dim != o.embed_dim || d.num_heads != o.num_heads || d.kv_heads != o.kv_heads || d.kdim != o.kdim ||
      d.vdim != o.vdim || d.bias != o.bias || d.has_sinks != o.has_sinks || d.has_alibi != o.has_alibi)
    throw Error("set_weights: the weights' sizes or arrays differ from the layer's (a layer keeps its shape; make a new one)");
  write_weights(l, weights);
}

MultiHeadAttention::MultiHeadAttention(MultiHeadAttention&&) noexcept = default;
MultiHeadAttention& MultiHeadAttention::operator=(MultiHeadAttention&&) noexcept = default;
MultiHeadAttention::~MultiHeadAttention() = default;

MultiHeadAttention::Impl& MultiHeadAttention::impl() const {
  if (!impl_)
    throw Error("MultiHeadAttention: used after being moved from (a moved-from MultiHeadAttention holds no layer)");
  return *impl_;
}

int64_t MultiHeadAttention::embed_dim() const { return impl().dims.embed_dim; }
int64_t MultiHeadAttention::num_heads() const { return impl().dims.num_heads; }
int64_t MultiHeadAttention::kv_heads() const { return impl().dims.kv_heads; }
int64_t MultiHeadAttention::kdim() const { return impl().dims.kdim; }
int64_t MultiHeadAttention::vdim() const { return impl().dims.vdim; }
DType MultiHeadAttention::dtype() const { return impl().dtype; }


MhaResult MultiHeadAttention::forward(const MhaInputs& in, AttentionPath path) {
  Impl& layer = impl();
  detail::check_path(path);  // before anything is uploaded
  const MhaDims& d = layer.dims;
  const MhaCall call = check_mha_inputs(d, in);
  Context& context = *layer.context;
  const DType dt = layer.dtype;
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k, E = d.embed_dim, H = d.num_heads;
  if (in.need_weights && path == AttentionPath::fused)
    throw Error("path: fused, but need_weights is set; only the unfused (three-stage) path computes the weights");

  MhaResult result;
  result.out.assign(static_cast<std::size_t>(B * Sq * E), 0.0f);
  if (in.need_weights)
    result.weights.assign(static_cast<std::size_t>(in.average_weights ? B * Sq * Sk : B * H * Sq * Sk), 0.0f);
  if (B * Sq == 0) return result;

  MhaSpec spec;
  detail::MhaMask merged = detail::merge_mha_masks(in, call);
  std::vector<std::byte>& mask_bytes = merged.bytes;
  spec.mask = merged.layout;
  spec.batch = B, spec.seq_q = Sq, spec.seq_k = Sk;
  spec.self_attention = call.self_attention;
  spec.options = in.options;
  spec.weights = in.need_weights;
  spec.path = path;
  // Every check and the plan before anything is uploaded.
  const PreparedMha pass = prepare(spec);

  const uint64_t es = dtype_size(dt);
  const Buffer query = upload_values(context, dt, in.query);
  std::optional<Buffer> key, value, mask, weights;
  if (!call.self_attention) {
    key.emplace(upload_values(context, dt, in.key));
    value.emplace(upload_values(context, dt, in.value));
  }
  if (spec.mask) {
    mask.emplace(allocate_at_least(context, mask_bytes.size()));
    if (!mask_bytes.empty()) mask->upload(mask_bytes.data(), mask_bytes.size());
  }
  const Buffer out = allocate_at_least(context, uint64_t(B * Sq * E) * es);
  if (in.need_weights) weights.emplace(allocate_at_least(context, uint64_t(B * H * Sq * Sk) * 4));
  MhaBuffers buffers;
  buffers.query = &query;
  if (key) buffers.key = &*key, buffers.value = &*value;
  buffers.out = &out;
  if (mask) buffers.mask = &*mask;
  if (weights) buffers.weights = {&*weights, 0};
  pass.run(buffers);

  std::vector<std::byte> raw(static_cast<std::size_t>(B * Sq * E) * es);
  out.download(raw.data(), raw.size());
  decode(dt, raw.data(), result.out.data(), result.out.size());
  if (weights) {
    std::vector<float> per_head(static_cast<std::size_t>(B * H * Sq * Sk));
    if (!per_head.empty()) weights->download(per_head.data(), per_head.size() * 4);
    if (!in.average_weights) {
      result.weights = std::move(per_head);
    } else {
      // Averaged over heads in double, then rounded once.
      std::vector<double> sum(result.weights.size(), 0.0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t e = 0; e < Sq * Sk; ++e)
            sum[static_cast<std::size_t>(b * Sq * Sk + e)] += per_head[static_cast<std::size_t>((b * H + h) * Sq * Sk + e)];
      for (std::size_t e = 0; e < sum.size(); ++e) result.weights[e] = static_cast<float>(sum[e] / double(H));
    }
  }
  return result;
}

}  // namespace vkattn
