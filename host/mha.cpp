// The multi-head attention layer on the GPU: three projection GEMMs that write the heads split
// (BHSD), attention on either path, and the output projection GEMM that reads them merged, all
// recorded into one command buffer.
#include "vkattn/mha.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "attention_record.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "gemm.hpp"
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

// The slots of the layer's command list: its inputs, intermediates, outputs and weights.
enum LayerSlot : uint32_t {
  kQuery = 1, kKey, kValue,  // the inputs (B, S, features)
  kQ, kK, kV, kAttn,         // the projected heads (BHSD) and attention's output
  kOut, kWeights, kMask,     // the layer's output, P and the merged mask
  kWq, kWk, kWv, kWo, kInBias, kOutBias,
  kWorkspace,
  kLayerSlotCount
};

// A dense row-major (rows, cols) matrix per batch index: the (B, S, features) arrays, and the weights
// (batches = 1: the same matrix for every batch index).
detail::GemmOperand dense(uint32_t slot, DType dtype, int64_t batches, int64_t rows, int64_t cols) {
  detail::GemmOperand o;
  o.slot = slot;
  o.dtype = dtype;
  o.end = std::max<int64_t>(batches * rows * cols, 1);
  o.stride_batch = batches > 1 ? rows * cols : 0;  // one matrix (the weights) serves every batch
  o.stride_row = cols;
  return o;
}

// (B, heads, S, D) seen as (B, S, heads·D): column c = h·D + d. Projections store into it (heads
// split) and the output projection loads from it (heads merged), with no transpose pass.
detail::GemmOperand heads_split(uint32_t slot, DType dtype, int64_t batches, int64_t heads, int64_t seq,
                                int64_t head_dim) {
  detail::GemmOperand o;
  o.slot = slot;
  o.dtype = dtype;
  o.end = std::max<int64_t>(batches * heads * seq * head_dim, 1);
  o.stride_batch = heads * seq * head_dim;
  o.stride_row = head_dim;
  o.col_block = head_dim;
  o.stride_block = seq * head_dim;
  return o;
}

}  // namespace

struct MultiHeadAttention::Impl {
  Context* context = nullptr;
  MhaDims dims;
  DType dtype = DType::f32;
  std::optional<Buffer> wq, wk, wv, wo, in_bias, out_bias;
};

MultiHeadAttention::MultiHeadAttention(Context& context, const MhaWeights& weights, DType dtype)
    : impl_(std::make_unique<Impl>()) {
  impl_->dims = check_mha_weights(weights);
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16)
    throw Error("dtype: invalid value " + std::to_string(static_cast<int>(dtype)));
  if (dtype != DType::f32 && !context.device_info().storage_16bit)
    throw Error(std::string("dtype: ") + to_string(dtype) + " needs storageBuffer16BitAccess, which " +
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
  const DeviceInfo& device = context.device_info();
  const DType dt = layer.dtype;
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k, E = d.embed_dim, H = d.num_heads;
  const int64_t G = d.kv_heads, D = d.head_dim(), KVD = d.kv_dim();
  if (in.need_weights && path == AttentionPath::fused)
    throw Error("path: fused, but need_weights is set; only the unfused (three-stage) path computes the weights");

  MhaResult result;
  result.out.assign(static_cast<std::size_t>(B * Sq * E), 0.0f);
  if (in.need_weights)
    result.weights.assign(static_cast<std::size_t>(in.average_weights ? B * Sq * Sk : B * H * Sq * Sk), 0.0f);
  if (B * Sq == 0) return result;

  const uint64_t weights_bytes = in.need_weights ? uint64_t(B * H * Sq * Sk) * 4 : 0;
  if (weights_bytes > device.device_memory_bytes / 2)
    throw Error("need_weights: the weights (" + std::to_string(B) + ", " + std::to_string(H) + ", " + std::to_string(Sq) +
                ", " + std::to_string(Sk) + ") f32 need " + std::to_string(weights_bytes) +
                " bytes, more than half of the device memory of " + device.name +
                "; without need_weights the layer runs the fused path, which never stores the scores");
  for (const auto& [what, m, n, k] : {std::tuple{"q projection", Sq, E, E}, std::tuple{"k projection", Sk, KVD, d.kdim},
                                      std::tuple{"v projection", Sk, KVD, d.vdim}, std::tuple{"out projection", Sq, E, E}})
    detail::check_gemm_shape(device, what, m, n, k);

  // Inputs and intermediates, in the layer's dtype.
  const Buffer query = upload(context, dt, in.query);
  std::optional<Buffer> key, value;
  if (!call.self_attention) {
    key.emplace(upload(context, dt, in.key));
    value.emplace(upload(context, dt, in.value));
  }
  const Buffer& key_buf = key ? *key : query;  // self-attention: the same slot contents
  const Buffer& value_buf = value ? *value : query;
  const uint64_t es = dtype_size(dt);
  Buffer q = allocate(context, uint64_t(B * Sq * E) * es), k = allocate(context, uint64_t(B * Sk * KVD) * es),
         v = allocate(context, uint64_t(B * Sk * KVD) * es), attn = allocate(context, uint64_t(B * Sq * E) * es),
         out = allocate(context, uint64_t(B * Sq * E) * es);
  std::optional<Buffer> weights;
  if (in.need_weights) weights.emplace(allocate(context, weights_bytes));

  // Masks: key_padding_mask (true = ignore) becomes a boolean (B, 1, Sq, Sk) mask broadcast over rows
  // (stride 0); with an attn_mask both merge into one f32 additive (B, 1, Sq, Sk) mask.
  std::optional<Buffer> mask;
  std::optional<MaskLayout> mask_layout;
  const bool padding = !in.key_padding_mask.empty(), additive = !in.attn_mask.empty();
  if (padding && !additive) {
    std::vector<uint8_t> attend(in.key_padding_mask.size());
    for (std::size_t i = 0; i < attend.size(); ++i) attend[i] = in.key_padding_mask[i] ? 0 : 1;
    mask.emplace(allocate(context, attend.size()));
    if (!attend.empty()) mask->upload(attend.data(), attend.size());
    MaskLayout l;
    l.type = MaskType::boolean;
    l.batch = B, l.heads = 1, l.seq_q = Sq, l.seq_k = Sk;
    l.stride_batch = Sk, l.stride_head = 0, l.stride_q = 0;
    mask_layout = l;
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
    mask.emplace(allocate(context, bias.size() * 4));
    if (!bias.empty()) mask->upload(bias.data(), bias.size() * 4);
    mask_layout = MaskLayout::dense(MaskType::f32, mb, 1, Sq, Sk);
  }

  AttentionLayouts layouts;
  layouts.q = TensorLayout::bhsd(dt, B, H, Sq, D);
  layouts.k = TensorLayout::bhsd(dt, B, G, Sk, D);
  layouts.v = TensorLayout::bhsd(dt, B, G, Sk, D);
  layouts.out = TensorLayout::bhsd(dt, B, H, Sq, D);
  layouts.mask = mask_layout;
  layouts.options.causal = in.causal;
  detail::ContextImpl& c = context.impl();
  const detail::PlannedAttention planned = detail::plan_path(c.info, c.kernel, layouts, weights.has_value(), path);

  const auto projection = [&](uint32_t x, int64_t seq, int64_t features, uint32_t w, int64_t outputs, int64_t heads,
                              uint32_t dst, uint64_t bias_element) {
    detail::GemmCall g;
    g.a = dense(x, dt, B, seq, features);
    g.b = dense(w, dt, 1, outputs, features);
    g.c = heads_split(dst, dt, B, heads, seq, D);
    if (layer.in_bias) {
      g.has_bias = true;
      g.bias_slot = kInBias;
      g.bias_base = bias_element * es;
    }
    g.m = seq, g.n = outputs, g.k = features, g.batch = B;
    return g;
  };
  detail::GemmCall project_out;
  project_out.a = heads_split(kAttn, dt, B, H, Sq, D);
  project_out.b = dense(kWo, dt, 1, E, E);
  project_out.c = dense(kOut, dt, B, Sq, E);
  if (layer.out_bias) {
    project_out.has_bias = true;
    project_out.bias_slot = kOutBias;
  }
  project_out.m = Sq, project_out.n = E, project_out.k = E, project_out.batch = B;

  detail::AttentionSlots attention_slots;
  attention_slots.q = kQ, attention_slots.k = kK, attention_slots.v = kV, attention_slots.out = kAttn;
  attention_slots.lse = attention_slots.kv_lengths = detail::kPlaceholderSlot;  // the layer has neither
  attention_slots.mask = kMask, attention_slots.weights = kWeights, attention_slots.workspace = kWorkspace;
  detail::CommandList list(planned.alignment());
  detail::emit_gemm(c, list, projection(kQuery, Sq, E, kWq, E, H, kQ, 0));
  detail::emit_gemm(c, list, projection(kKey, Sk, d.kdim, kWk, KVD, G, kK, uint64_t(E)));
  detail::emit_gemm(c, list, projection(kValue, Sk, d.vdim, kWv, KVD, G, kV, uint64_t(E + KVD)));
  list.barrier_between_dispatches();
  detail::emit_attention(c, list, planned, layouts, attention_slots);
  list.barrier_between_dispatches();
  detail::emit_gemm(c, list, project_out);

  std::array<detail::SlotBase, kLayerSlotCount> slots{};
  const auto at = [](const Buffer& b) { return detail::SlotBase{b.handle(), b.offset()}; };
  slots[kQuery] = at(query);
  slots[kKey] = at(key_buf);
  slots[kValue] = at(value_buf);
  slots[kQ] = at(q), slots[kK] = at(k), slots[kV] = at(v), slots[kAttn] = at(attn), slots[kOut] = at(out);
  if (weights) slots[kWeights] = at(*weights);
  if (mask) slots[kMask] = at(*mask);
  slots[kWq] = at(*layer.wq), slots[kWk] = at(*layer.wk), slots[kWv] = at(*layer.wv), slots[kWo] = at(*layer.wo);
  if (layer.in_bias) slots[kInBias] = at(*layer.in_bias);
  if (layer.out_bias) slots[kOutBias] = at(*layer.out_bias);
  c.submit_with_scratch(planned.workspace_bytes(), [&](VkCommandBuffer cmd, VkBuffer workspace) {
    slots[kWorkspace] = {workspace, 0};
    detail::barrier_before_attention(cmd);
    list.replay(c, cmd, slots);
    detail::barrier_after_attention(cmd);
  });

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
