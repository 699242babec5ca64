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
#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn {
namespace {

// Buffer::allocate wants at least one byte; an empty array still gets a small buffer.
Buffer allocate(Context& context, uint64_t bytes) { return Buffer::allocate(context, std::max<uint64_t>(bytes, 16)); }

Buffer upload(Context& context, DType dtype, std::span<const float> values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer buffer = allocate(context, bytes.size());
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

}  // namespace

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
  impl_->wq.emplace(upload(context, dtype, weights.q_proj_weight));
  impl_->wk.emplace(upload(context, dtype, weights.k_proj_weight));
  impl_->wv.emplace(upload(context, dtype, weights.v_proj_weight));
  impl_->wo.emplace(upload(context, dtype, weights.out_proj_weight));
  if (weights.bias) {
    impl_->in_bias.emplace(upload(context, dtype, weights.in_proj_bias));
    impl_->out_bias.emplace(upload(context, dtype, weights.out_proj_bias));
  }
  // Per-head score modifiers: f32, as attention() reads them.
  const PerHeadValues per_head = weights.per_head();
  for (PerHeadTensor t : kPerHeadTensors)
    if (per_head.layout(t)) impl_->per_head[t].emplace(upload(context, DType::f32, per_head.values(t)));
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

  // Masks: key_padding_mask (true = ignore) becomes a boolean (B, 1, Sq, Sk) mask broadcast over rows
  // (stride 0); with an attn_mask both merge into one f32 additive (B, 1, Sq, Sk) mask.
  std::vector<std::byte> mask_bytes;
  MhaSpec spec;
  const bool padding = !in.key_padding_mask.empty(), additive = !in.attn_mask.empty();
  if (padding && !additive) {
    mask_bytes.resize(in.key_padding_mask.size());
    for (std::size_t i = 0; i < mask_bytes.size(); ++i)
      mask_bytes[i] = std::byte{in.key_padding_mask[i] ? uint8_t(0) : uint8_t(1)};
    MaskLayout l;
    l.type = MaskType::boolean;
    l.batch = B, l.heads = 1, l.seq_q = Sq, l.seq_k = Sk;
    l.stride_batch = Sk, l.stride_head = 0, l.stride_q = 0;
    spec.mask = l;
  } else if (additive) {
    const int64_t mb = padding ? B : 1;
    std::vector<float> bias(static_cast<std::size_t>(mb * Sq * Sk));
    for (int64_t b = 0; b < mb; ++b)
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < Sk; ++j) {
          const bool hidden = padding && in.key_padding_mask[static_cast<std::size_t>(b * Sk + j)] != 0;
          bias[static_cast<std::size_t>((b * Sq + i) * Sk + j)] =
              hidden ? -std::numeric_limits<float>::infinity() : in.attn_mask[static_cast<std::size_t>(i * Sk + j)];
        }
    mask_bytes.resize(bias.size() * 4);
    if (!bias.empty()) std::memcpy(mask_bytes.data(), bias.data(), mask_bytes.size());
    spec.mask = MaskLayout::dense(MaskType::f32, mb, 1, Sq, Sk);
  }
  spec.batch = B, spec.seq_q = Sq, spec.seq_k = Sk;
  spec.self_attention = call.self_attention;
  spec.options = in.options;
  spec.weights = in.need_weights;
  spec.path = path;
  // Every check and the plan before anything is uploaded.
  const PreparedMha pass = prepare(spec);

  const uint64_t es = dtype_size(dt);
  const Buffer query = upload(context, dt, in.query);
  std::optional<Buffer> key, value, mask, weights;
  if (!call.self_attention) {
    key.emplace(upload(context, dt, in.key));
    value.emplace(upload(context, dt, in.value));
  }
  if (spec.mask) {
    mask.emplace(allocate(context, mask_bytes.size()));
    if (!mask_bytes.empty()) mask->upload(mask_bytes.data(), mask_bytes.size());
  }
  const Buffer out = allocate(context, uint64_t(B * Sq * E) * es);
  if (in.need_weights) weights.emplace(allocate(context, uint64_t(B * H * Sq * Sk) * 4));
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
