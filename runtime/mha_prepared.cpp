// A forward pass of the multi-head layer prepared for one input shape: three projection GEMMs that
// write the heads split (BHSD), attention on either path, and the output projection GEMM that reads
// them merged — one command list, whose slots are the caller's buffers, the layer's weights and the
// intermediates, which live in the workspace.
#include <algorithm>
#include <array>
#include <string>
#include <tuple>

#include "attention_record.hpp"
#include "int_math.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "gemm.hpp"
#include "mha_layer.hpp"
#include "planned_call.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha.hpp"

namespace vkattn {
namespace {

using detail::align_up;

std::string str(int64_t v) { return std::to_string(v); }

// The slots of the layer's command list: its inputs, intermediates, outputs and weights.
enum LayerSlot : uint32_t {
  kQuery = 1, kKey, kValue,  // the inputs (B, S, features)
  kQ, kK, kV, kAttn,         // the projected heads (BHSD) and attention's output: in the workspace
  kOut, kWeights, kMask,     // the layer's output, P and the mask
  kWq, kWk, kWv, kWo, kInBias, kOutBias,
  kPerHead,                  // the per-head score modifiers (f32), with the weights: kPerHead + PerHeadTensor
  kWorkspace = kPerHead + kPerHeadTensors.size(),  // attention's own workspace
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

namespace detail {

// B·S·features values stay far below 2^62 bytes (checked), so the byte counts below cannot wrap.
void check_mha_spec(const MhaDims& d, const MhaSpec& s) {
  detail::check_path(s.path);
  if (s.batch < 0 || s.seq_q < 0 || s.seq_k < 0)
    throw Error("MhaSpec: batch, seq_q and seq_k must be >= 0 (got " + str(s.batch) + ", " + str(s.seq_q) + ", " +
                str(s.seq_k) + ")");
  if (s.self_attention && s.seq_k != s.seq_q)
    throw Error("MhaSpec: self_attention needs seq_k == seq_q (got " + str(s.seq_k) + " and " + str(s.seq_q) + ")");
  if (s.self_attention && (d.kdim != d.embed_dim || d.vdim != d.embed_dim))
    throw Error("MhaSpec: self_attention needs the layer's kdim and vdim equal to embed_dim " + str(d.embed_dim) +
                " (they are " + str(d.kdim) + " and " + str(d.vdim) + ")");
  if (s.weights && s.path == AttentionPath::fused)
    throw Error("path: fused, but need_weights is set; only the unfused (three-stage) path computes the weights");
  constexpr int64_t kMax = int64_t(1) << 60;
  const auto product = [&](std::initializer_list<int64_t> factors) {
    int64_t p = 1;
    for (int64_t f : factors) {
      if (f != 0 && p > kMax / f)
        throw Error("MhaSpec: batch " + str(s.batch) + ", seq_q " + str(s.seq_q) + ", seq_k " + str(s.seq_k) +
                    " make arrays of more than 2^60 values");
      p *= f;
    }
  };
  product({s.batch, s.seq_q, std::max(d.embed_dim, d.num_heads * s.seq_k)});
  product({s.batch, s.seq_k, std::max({d.kdim, d.vdim, d.kv_dim()})});
}

}  // namespace detail

struct PreparedMha::Impl {
  std::shared_ptr<detail::ContextImpl> context;
  std::shared_ptr<const MultiHeadAttention::Impl> layer;  // the weights
  MhaSpec spec;
  bool empty = false;  // batch * seq_q == 0: nothing to compute
  std::optional<detail::PathPlan> planned;
  AttentionPlan report;
  detail::CommandList list;
  uint64_t alignment = 16;
  // What each argument must hold, and where the intermediates and attention's workspace sit in the
  // workspace (from its base aligned up to `alignment`; each start aligned).
  uint64_t query_bytes = 0, key_bytes = 0, value_bytes = 0, out_bytes = 0, weights_bytes = 0;
  uint64_t q_at = 0, k_at = 0, v_at = 0, attn_at = 0, attention_at = 0, workspace_bytes = 0;

  void check(const MhaBuffers& b, const BufferSlice* workspace) const;
  // `workspace`: the caller's workspace slice or the Context's scratch, with its texel view where it
  // has one (the attention GEMMs read the projected heads through it on CPU devices).
  void replay(VkCommandBuffer cmd, const MhaBuffers& b, detail::SlotBase workspace) const;
};

void PreparedMha::Impl::check(const MhaBuffers& b, const BufferSlice* workspace) const {
  context->check_usable();
  const uint64_t es = dtype_size(layer->dtype);
  detail::check_binding("query", b.query, 0, es, std::max<uint64_t>(query_bytes / es, 1));
  if (spec.self_attention) {
    if (b.key || b.value)
      throw Error("key, value: given, but the pass was prepared for self-attention (MhaSpec::self_attention): they are the query");
  } else {
    detail::check_binding("key", b.key, 0, es, std::max<uint64_t>(key_bytes / es, 1));
    detail::check_binding("value", b.value, 0, es, std::max<uint64_t>(value_bytes / es, 1));
  }
  detail::check_binding("out", b.out, 0, es, std::max<uint64_t>(out_bytes / es, 1));
  if ((b.mask != nullptr) != spec.mask.has_value())
    throw Error(std::string("mask: ") + (b.mask ? "given, but the pass was prepared without one (MhaSpec::mask)"
                                                : "the pass was prepared with one (MhaSpec::mask), but none is given"));
  if (spec.mask)
    detail::check_binding("mask", b.mask, 0, mask_type_size(spec.mask->type), uint64_t(spec.mask->required_elements()));
  if ((b.weights.buffer != nullptr) != spec.weights)
    throw Error(std::string("weights: ") + (b.weights.buffer ? "given, but the pass was prepared without them (MhaSpec::weights)"
                                                             : "the pass was prepared with them (MhaSpec::weights), but none are given"));
  if (spec.weights) detail::check_binding("weights", b.weights.buffer, b.weights.offset, 4, weights_bytes / 4);
  if (workspace && workspace_bytes > 0) {
    if (!workspace->buffer || !workspace->buffer->valid())
      throw Error("workspace: this pass needs a workspace of " + std::to_string(workspace_bytes) +
                  " bytes (PreparedMha::workspace_bytes)");
    if (workspace->offset > workspace->buffer->size() || workspace->buffer->size() - workspace->offset < workspace_bytes)
      throw Error("workspace: needs " + std::to_string(workspace_bytes) + " bytes, the slice holds " +
                  std::to_string(workspace->buffer->size() - std::min(workspace->offset, workspace->buffer->size())));
  }

  std::array<detail::BufferExtent, 7> extents;
  std::size_t n = 0;
  const auto whole = [](const char* name, const Buffer* buffer, uint64_t offset, uint64_t bytes, bool output) {
    const uint64_t begin = buffer->offset() + offset;
    return detail::BufferExtent{name, buffer, begin, begin + bytes, output};
  };
  extents[n++] = whole("query", b.query, 0, query_bytes, false);
  if (!spec.self_attention) {
    extents[n++] = whole("key", b.key, 0, key_bytes, false);
    extents[n++] = whole("value", b.value, 0, value_bytes, false);
  }
  extents[n++] = whole("out", b.out, 0, out_bytes, true);
  if (spec.mask)
    extents[n++] = whole("mask", b.mask, 0, uint64_t(spec.mask->required_elements()) * mask_type_size(spec.mask->type), false);
  if (spec.weights) extents[n++] = whole("weights", b.weights.buffer, b.weights.offset, weights_bytes, true);
  if (workspace && workspace_bytes > 0) extents[n++] = whole("workspace", workspace->buffer, workspace->offset, workspace_bytes, true);
  detail::check_extents(*context, std::span(extents.data(), n));
}

void PreparedMha::Impl::replay(VkCommandBuffer cmd, const MhaBuffers& b, detail::SlotBase workspace) const {
  if (empty) return;
  std::array<detail::SlotBase, kLayerSlotCount> slots{};
  const auto at = [](const Buffer& buffer) { return detail::slot_of(buffer); };
  slots[kQuery] = at(*b.query);
  slots[kKey] = spec.self_attention ? slots[kQuery] : at(*b.key);
  slots[kValue] = spec.self_attention ? slots[kQuery] : at(*b.value);
  slots[kOut] = at(*b.out);
  if (b.mask) slots[kMask] = at(*b.mask);
  if (b.weights.buffer) slots[kWeights] = {b.weights.buffer->handle(), b.weights.buffer->offset() + b.weights.offset};
  const uint64_t base = align_up(workspace.base, alignment);
  const auto region = [&](uint64_t at) { return detail::SlotBase{workspace.buffer, base + at, workspace.texel}; };
  slots[kQ] = region(q_at);
  slots[kK] = region(k_at);
  slots[kV] = region(v_at);
  slots[kAttn] = region(attn_at);
  slots[kWorkspace] = region(attention_at);
  slots[kWq] = at(*layer->wq), slots[kWk] = at(*layer->wk), slots[kWv] = at(*layer->wv), slots[kWo] = at(*layer->wo);
  if (layer->in_bias) slots[kInBias] = at(*layer->in_bias);
  if (layer->out_bias) slots[kOutBias] = at(*layer->out_bias);
  for (PerHeadTensor t : kPerHeadTensors)
    if (layer->per_head[t]) slots[kPerHead + uint32_t(t)] = at(*layer->per_head[t]);
  list.replay(*context, cmd, slots);
}

PreparedMha MultiHeadAttention::prepare(const MhaSpec& spec) const {
  const Impl& layer = impl();
  const MhaDims& d = layer.dims;
  detail::check_mha_spec(d, spec);
  Context& context = *layer.context;
  detail::ContextImpl& c = detail::impl_of(context);
  c.check_usable();
  const DeviceInfo& device = c.info;
  const DType dt = layer.dtype;
  const uint64_t es = dtype_size(dt);
  const int64_t B = spec.batch, Sq = spec.seq_q, Sk = spec.seq_k, E = d.embed_dim, H = d.num_heads;
  const int64_t G = d.kv_heads, D = d.head_dim(), KVD = d.kv_dim();

  auto p = std::make_unique<PreparedMha::Impl>();
  p->context = detail::shared_impl_of(context);
  p->layer = impl_;
  p->spec = spec;
  p->query_bytes = uint64_t(B * Sq * E) * es;
  p->key_bytes = spec.self_attention ? 0 : uint64_t(B * Sk * d.kdim) * es;
  p->value_bytes = spec.self_attention ? 0 : uint64_t(B * Sk * d.vdim) * es;
  p->out_bytes = uint64_t(B * Sq * E) * es;
  p->weights_bytes = spec.weights ? uint64_t(B * H * Sq * Sk) * 4 : 0;
  if (B * Sq == 0) {
    p->empty = true;
    return PreparedMha(std::move(p));
  }
  if (p->weights_bytes > device.device_memory_bytes / 2)
    throw detail::unsupported("need_weights: the weights (" + str(B) + ", " + str(H) + ", " + str(Sq) + ", " + str(Sk) + ") f32 need " +
                std::to_string(p->weights_bytes) + " bytes, more than half of the device memory of " + device.name +
                "; without need_weights the layer runs the fused path, which never stores the scores");
  const detail::GemmChoice gemm = detail::choose_gemm(device);
  for (const auto& [what, m, n, k] : {std::tuple{"q projection", Sq, E, E}, std::tuple{"k projection", Sk, KVD, d.kdim},
                                      std::tuple{"v projection", Sk, KVD, d.vdim}, std::tuple{"out projection", Sq, E, E}})
    detail::check_gemm_shape(device, gemm, what, m, n, k);

  AttentionLayouts layouts;
  layouts.q = TensorLayout::bhsd(dt, B, H, Sq, D);
  layouts.k = TensorLayout::bhsd(dt, B, G, Sk, D);
  layouts.v = TensorLayout::bhsd(dt, B, G, Sk, D);
  layouts.out = TensorLayout::bhsd(dt, B, H, Sq, D);
  layouts.mask = spec.mask;
  layouts.options = spec.options;
  // The layer's per-head tensors: (num_heads), shared by every batch.
  for (PerHeadTensor t : kPerHeadTensors)
    if (layer.per_head[t]) layouts[t] = HeadValuesLayout{1, H, 0};
  detail::refuse_forward_dropout(layouts.options);
  p->planned = detail::plan_path(device, c.kernel, layouts, spec.weights, spec.path);
  p->report = detail::report_of(*p->planned);
  p->alignment = p->planned->alignment();

  // The workspace: Q, K, V and attention's output (at least one element each: the GEMMs bind one),
  // then attention's own workspace, each start aligned; one alignment more for aligning its base up.
  const uint64_t a = p->alignment;
  const uint64_t q_bytes = std::max<uint64_t>(uint64_t(B * Sq * E) * es, 4), kv_bytes = std::max<uint64_t>(uint64_t(B * Sk * KVD) * es, 4);
  p->q_at = 0;
  p->k_at = align_up(p->q_at + q_bytes, a);
  p->v_at = align_up(p->k_at + kv_bytes, a);
  p->attn_at = align_up(p->v_at + kv_bytes, a);
  p->attention_at = align_up(p->attn_at + q_bytes, a);
  p->workspace_bytes = p->attention_at + p->planned->workspace_bytes() + a;

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

  detail::AttentionSlots slots;
  slots.q = kQ, slots.k = kK, slots.v = kV, slots.out = kAttn;
  slots.lse = slots.kv_lengths = detail::kPlaceholderSlot;  // the layer has neither
  slots.mask = kMask, slots.weights = kWeights, slots.workspace = kWorkspace;
  for (PerHeadTensor t : kPerHeadTensors) slots.per_head[t] = kPerHead + uint32_t(t);
  p->list = detail::CommandList(a);
  detail::CommandList& list = p->list;
  for (const uint32_t own : {kQ, kK, kV, kAttn}) list.own_slot(own);  // (and kWorkspace: emit_attention)
  // The workspace may still be read by the previous pass recorded in this command buffer.
  list.barrier_between_dispatches();
  detail::emit_gemm(c, list, projection(kQuery, Sq, E, kWq, E, H, kQ, 0), gemm);
  detail::emit_gemm(c, list, projection(kKey, Sk, d.kdim, kWk, KVD, G, kK, uint64_t(E)), gemm);
  detail::emit_gemm(c, list, projection(kValue, Sk, d.vdim, kWv, KVD, G, kV, uint64_t(E + KVD)), gemm);
  list.barrier_between_dispatches();
  detail::emit_attention(c, list, *p->planned, layouts, slots);
  list.barrier_between_dispatches();
  detail::emit_gemm(c, list, project_out, gemm);
  return PreparedMha(std::move(p));
}

PreparedMha::PreparedMha(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreparedMha::PreparedMha(PreparedMha&&) noexcept = default;
PreparedMha& PreparedMha::operator=(PreparedMha&&) noexcept = default;
PreparedMha::~PreparedMha() = default;

const PreparedMha::Impl& PreparedMha::impl() const {
  if (!impl_) throw Error("PreparedMha: used after being moved from (a moved-from PreparedMha holds no pass)");
  return *impl_;
}

const MhaSpec& PreparedMha::spec() const { return impl().spec; }
const AttentionPlan& PreparedMha::attention_plan() const { return impl().report; }
uint64_t PreparedMha::workspace_bytes() const { return impl().workspace_bytes; }

void PreparedMha::record(VkCommandBuffer command_buffer, const MhaBuffers& buffers, BufferSlice workspace) const {
  const Impl& p = impl();
  if (command_buffer == VK_NULL_HANDLE) throw Error("record: command_buffer is VK_NULL_HANDLE");
  p.check(buffers, &workspace);
  if (p.empty) return;
  p.replay(command_buffer, buffers, detail::slot_of(*workspace.buffer, workspace.offset));
}

void PreparedMha::run(const MhaBuffers& buffers) const {
  const Impl& p = impl();
  p.check(buffers, nullptr);
  if (p.empty) return;
  p.context->submit_with_scratch(p.workspace_bytes, [&](VkCommandBuffer cmd, VkBuffer scratch) {
    detail::barrier_before_attention(cmd);
    p.replay(cmd, buffers, detail::SlotBase{scratch, 0, p.context->scratch_texel_view()});
    detail::barrier_after_attention(cmd);
  });
}

}  // namespace vkattn
