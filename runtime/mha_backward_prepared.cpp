// The layer's backward pass prepared for one input shape (vkattn/mha_backward.hpp): the forward,
// keeping Q, K, V (head-major, mha_backward_gemms.hpp), attention's output A and its LSE in the
// workspace; then from dY
//   dWo = dYᵀ·A, dbo = dYᵀ·1, dA = dY·Wo                           (GEMMs)
//   dQ, dK, dV, dsinks = attention's backward (Q, K, V, A, LSE, dA)  (PreparedAttentionBackward)
//   dW = dXᵀ·input, db = dXᵀ·1, dinput = dX·W  per projection      (GEMMs)
// Bias gradients are column sums, a GEMM against a broadcast 1; in self-attention one GEMM over the
// stacked weights (mha_layer.hpp) sums the three projections' contributions to the input's gradient.
// Every sum runs in a fixed order (no atomics): the same inputs give the same bits.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "attention_record.hpp"
#include "call_buffers.hpp"
#include "context_impl.hpp"
#include "gemm.hpp"
#include "int_math.hpp"
#include "mha_backward_gemms.hpp"
#include "mha_layer.hpp"
#include "planned_call.hpp"
#include "vkattn/attention_backward.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha_backward.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn {
namespace {

using namespace detail::mha_backward;
using detail::align_up;

// The slots of the pass's command lists.
enum Slot : uint32_t {
  kQuery = 1, kKey, kValue, kMask, kOut, kGradOut,  // the caller's
  kWin, kWo, kInBias, kOutBias, kPerHead,           // the layer's (kPerHead + PerHeadTensor)
  kOne = kPerHead + kPerHeadTensors.size(),         // a single 1 in the layer's dtype
  kProj, kGradProj, kAttn, kGradAttn, kLse, kAttnWork,  // the workspace's
  kGradQW, kGradKW, kGradVW, kGradInB, kGradOutW, kGradOutB, kGradSinks, kGradQuery, kGradKey, kGradValue,  // f32 results
  kSlotCount
};

struct Region {
  uint64_t at = 0, bytes = 0;  // from the workspace's aligned base
};

}  // namespace

struct PreparedMhaBackward::Impl {
  std::shared_ptr<detail::ContextImpl> context;
  std::shared_ptr<const MultiHeadAttention::Impl> layer;
  MhaSpec spec;
  int64_t tq = 0, tk = 0;  // query and key tokens (batch·seq)
  bool attends = false;    // queries and keys both: else the attention steps are skipped (see prepare)
  detail::CommandList forward, grads;
  std::optional<PreparedAttentionBackward> attention;
  std::optional<Buffer> one;
  uint64_t alignment = 16;
  Region proj, grad_proj, attn, grad_attn, lse, attn_work, backward_work;
  uint64_t workspace_bytes = 0;

  void check(const MhaBackwardBuffers& b, const BufferSlice* workspace) const;
  void replay(VkCommandBuffer cmd, const MhaBackwardBuffers& b, VkBuffer workspace, uint64_t workspace_offset) const;
};

namespace {

// How many f32 values each gradient holds, and whether the pass takes it.
struct GradNeed {
  const char* name;
  BufferSlice MhaGradBuffers::*member;
  uint32_t slot;
  uint64_t elements;
  bool given;
};

std::array<GradNeed, 10> grad_needs(const MhaDims& d, const MhaSpec& s) {
  const uint64_t E = uint64_t(d.embed_dim), kvd = uint64_t(d.kv_dim()), tq = uint64_t(s.batch * s.seq_q),
                 tk = uint64_t(s.batch * s.seq_k);
  return {{{"grads.q_proj_weight", &MhaGradBuffers::q_proj_weight, kGradQW, E * E, true},
           {"grads.k_proj_weight", &MhaGradBuffers::k_proj_weight, kGradKW, kvd * uint64_t(d.kdim), true},
           {"grads.v_proj_weight", &MhaGradBuffers::v_proj_weight, kGradVW, kvd * uint64_t(d.vdim), true},
           {"grads.in_proj_bias", &MhaGradBuffers::in_proj_bias, kGradInB, E + 2 * kvd, d.bias},
           {"grads.out_proj_weight", &MhaGradBuffers::out_proj_weight, kGradOutW, E * E, true},
           {"grads.out_proj_bias", &MhaGradBuffers::out_proj_bias, kGradOutB, E, d.bias},
           {"grads.sinks", &MhaGradBuffers::sinks, kGradSinks, uint64_t(d.num_heads), d.has_sinks},
           {"grads.query", &MhaGradBuffers::query, kGradQuery, tq * E, true},
           {"grads.key", &MhaGradBuffers::key, kGradKey, tk * uint64_t(d.kdim), !s.self_attention},
           {"grads.value", &MhaGradBuffers::value, kGradValue, tk * uint64_t(d.vdim), !s.self_attention}}};
}

}  // namespace

void PreparedMhaBackward::Impl::check(const MhaBackwardBuffers& b, const BufferSlice* workspace) const {
  context->check_usable();
  const MhaDims& d = layer->dims;
  const uint64_t es = dtype_size(layer->dtype);
  const uint64_t q_elems = std::max<uint64_t>(uint64_t(tq * d.embed_dim), 1);
  std::array<detail::BufferExtent, 18> extents;
  std::size_t n = 0;
  const auto add = [&](const char* name, const Buffer* buffer, uint64_t offset, uint64_t size, uint64_t elements,
                       bool output) {
    detail::check_binding(name, buffer, offset, size, std::max<uint64_t>(elements, 1));
    const uint64_t begin = buffer->offset() + offset;
    extents[n++] = detail::BufferExtent{name, buffer, begin, begin + elements * size, output};
  };
  add("query", b.query, 0, es, q_elems, false);
  if (spec.self_attention) {
    if (b.key || b.value)
      throw Error("key, value: given, but the pass was prepared for self-attention (MhaSpec::self_attention): they are the query");
  } else {
    add("key", b.key, 0, es, uint64_t(tk * d.kdim), false);
    add("value", b.value, 0, es, uint64_t(tk * d.vdim), false);
  }
  if ((b.mask != nullptr) != spec.mask.has_value())
    throw Error(std::string("mask: ") + (b.mask ? "given, but the pass was prepared without one (MhaSpec::mask)"
                                                : "the pass was prepared with one (MhaSpec::mask), but none is given"));
  if (spec.mask) add("mask", b.mask, 0, mask_type_size(spec.mask->type), uint64_t(spec.mask->required_elements()), false);
  add("grad_out", b.grad_out, 0, es, q_elems, false);
  add("out", b.out, 0, es, q_elems, true);
  for (const GradNeed& g : grad_needs(d, spec)) {
    const BufferSlice& slice = b.grads.*g.member;
    if ((slice.buffer != nullptr) != g.given)
      throw Error(std::string(g.name) + (slice.buffer ? ": given, but the layer or pass has no such gradient"
                                                      : ": the layer and pass have this gradient, but no buffer is given"));
    if (g.given) add(g.name, slice.buffer, slice.offset, 4, g.elements, true);
  }
  if (workspace && workspace_bytes > 0) {
    if (!workspace->buffer || !workspace->buffer->valid())
      throw Error("workspace: this pass needs a workspace of " + std::to_string(workspace_bytes) +
                  " bytes (PreparedMhaBackward::workspace_bytes)");
    if (workspace->offset > workspace->buffer->size() || workspace->buffer->size() - workspace->offset < workspace_bytes)
      throw Error("workspace: needs " + std::to_string(workspace_bytes) + " bytes, the slice holds " +
                  std::to_string(workspace->buffer->size() - std::min(workspace->offset, workspace->buffer->size())));
    const uint64_t begin = workspace->buffer->offset() + workspace->offset;
    extents[n++] = detail::BufferExtent{"workspace", workspace->buffer, begin, begin + workspace_bytes, true};
  }
  detail::check_extents(*context, std::span(extents.data(), n));
}

void PreparedMhaBackward::Impl::replay(VkCommandBuffer cmd, const MhaBackwardBuffers& b, VkBuffer workspace,
                                       uint64_t workspace_offset) const {
  const MultiHeadAttention::Impl& l = *layer;
  std::array<detail::SlotBase, kSlotCount> slots{};
  const auto at = [](const Buffer& buffer) { return detail::slot_of(buffer); };
  slots[kQuery] = at(*b.query);
  slots[kKey] = spec.self_attention ? slots[kQuery] : at(*b.key);
  slots[kValue] = spec.self_attention ? slots[kQuery] : at(*b.value);
  if (b.mask) slots[kMask] = at(*b.mask);
  slots[kOut] = at(*b.out);
  slots[kGradOut] = at(*b.grad_out);
  slots[kWin] = at(*l.w_in), slots[kWo] = at(*l.wo);
  if (l.in_bias) slots[kInBias] = at(*l.in_bias);
  if (l.out_bias) slots[kOutBias] = at(*l.out_bias);
  for (PerHeadTensor t : kPerHeadTensors)
    if (l.per_head[t]) slots[kPerHead + uint32_t(t)] = at(*l.per_head[t]);
  slots[kOne] = at(*one);
  const uint64_t base = align_up(workspace_offset, alignment);
  const std::array<std::pair<uint32_t, const Region*>, 6> regions = {
      {{kProj, &proj}, {kGradProj, &grad_proj}, {kAttn, &attn}, {kGradAttn, &grad_attn}, {kLse, &lse}, {kAttnWork, &attn_work}}};
  for (const auto& [slot, region] : regions) slots[slot] = {workspace, base + region->at};
  for (const GradNeed& g : grad_needs(l.dims, spec)) {
    const BufferSlice& s = b.grads.*g.member;
    if (g.given) slots[g.slot] = {s.buffer->handle(), s.buffer->offset() + s.offset};
  }

  forward.replay(*context, cmd, slots);
  if (!attends) return;
  // Attention's backward takes Buffers: views of the workspace's regions.
  Context& ctx = *l.context;
  const auto view = [&](const Region& r) { return Buffer::wrap(ctx, workspace, base + r.at, std::max<uint64_t>(r.bytes, 16)); };
  const Buffer proj_view = view(proj), grad_proj_view = view(grad_proj), attn_view = view(attn),
               grad_attn_view = view(grad_attn), lse_view = view(lse), work_view = view(backward_work);
  BackwardBuffers bb;
  bb.forward.q = bb.forward.k = bb.forward.v = &proj_view;
  bb.forward.out = &attn_view;
  bb.forward.lse = {&lse_view, 0};
  bb.forward.mask = b.mask;
  for (PerHeadTensor t : kPerHeadTensors)
    if (l.per_head[t]) bb.forward[t] = &*l.per_head[t];
  bb.grad_out = &grad_attn_view;
  bb.grad_q = bb.grad_k = bb.grad_v = &grad_proj_view;
  bb.grad_sinks = b.grads.sinks;
  detail::barrier_before_attention(cmd);  // Q, K, V, A, LSE and dA before attention's backward reads them
  attention->record(cmd, bb, BufferSlice{&work_view, 0});
  detail::barrier_before_attention(cmd);  // dQ, dK, dV before the GEMMs read them
  grads.replay(*context, cmd, slots);
}

PreparedMhaBackward MultiHeadAttention::prepare_backward(const MhaSpec& spec) const {
  const Impl& layer = impl();
  const MhaDims& d = layer.dims;
  detail::check_mha_spec(d, spec);
  if (spec.weights)
    throw Error("MhaSpec::weights: the backward pass does not give the attention weights (prepare() does)");
  Context& context = *layer.context;
  detail::ContextImpl& c = detail::impl_of(context);
  c.check_usable();
  const DeviceInfo& device = c.info;
  const DType dt = layer.dtype;
  const uint64_t es = dtype_size(dt);
  const int64_t B = spec.batch, Sq = spec.seq_q, Sk = spec.seq_k, E = d.embed_dim, H = d.num_heads;
  const int64_t G = d.kv_heads, D = d.head_dim(), KVD = d.kv_dim();
  const int64_t Tq = B * Sq, Tk = B * Sk;
  const bool self = spec.self_attention;

  auto p = std::make_unique<PreparedMhaBackward::Impl>();
  p->context = detail::shared_impl_of(context);
  p->layer = impl_;
  p->spec = spec;
  p->tq = Tq, p->tk = Tk;
  p->attends = Tq > 0 && Tk > 0;

  // Attention on the head-major projections: Q's H heads, then K's and V's kv_heads.
  const int64_t k_at = Tq * E, v_at = k_at + Tk * KVD, proj_elements = v_at + Tk * KVD;
  AttentionLayouts layouts;
  layouts.q = head_major_layout(dt, 0, B, H, Sq, D);
  layouts.k = head_major_layout(dt, k_at, B, G, Sk, D);
  layouts.v = head_major_layout(dt, v_at, B, G, Sk, D);
  layouts.out = TensorLayout::bshd(dt, B, Sq, H, D);  // A merged, (tokens, E): the out projection's input
  layouts.mask = spec.mask;
  layouts.has_lse = true;
  layouts.options = spec.options;
  for (PerHeadTensor t : kPerHeadTensors)
    if (layer.per_head[t]) layouts[t] = HeadValuesLayout{1, H, 0};
  // The backward is exact only for the forward it differentiates: no dropout until the forward applies it.
  detail::refuse_forward_dropout(layouts.options);
  std::optional<detail::PathPlan> planned;
  if (p->attends) {
    planned = detail::plan_path(device, c.kernel, layouts, false, spec.path);
    p->attention.emplace(context, AttentionSpec::dense(layouts));
    p->alignment = std::max<uint64_t>(planned->alignment(), 16);
  } else {
    detail::check_path(spec.path);
    p->alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  }

  // The workspace: each region aligned, one alignment more for aligning its base up.
  const uint64_t a = p->alignment;
  uint64_t end = 0;
  const auto region = [&](uint64_t bytes) {
    const Region r{align_up(end, a), std::max<uint64_t>(bytes, 4)};
    end = r.at + r.bytes;
    return r;
  };
  p->proj = region(uint64_t(proj_elements) * es);
  p->grad_proj = region(uint64_t(proj_elements) * es);
  p->attn = region(uint64_t(Tq * E) * es);
  p->grad_attn = region(uint64_t(Tq * E) * es);
  p->lse = region(uint64_t(Tq * H) * 4);
  p->attn_work = region(planned ? planned->workspace_bytes() + a : 0);
  p->backward_work = region(p->attention ? p->attention->workspace_bytes() + a : 0);
  p->workspace_bytes = end + a;

  const detail::GemmChoice gemm = detail::choose_gemm(device);
  const auto add = [&](detail::CommandList& list, const char* what, const detail::GemmCall& call) {
    detail::check_gemm_shape(device, gemm, what, call.m, call.n, call.k);
    detail::emit_gemm(c, list, call, gemm);
  };
  // A projection: its input, rows of the stacked weights and biases, and head-major heads.
  struct Projection {
    uint32_t input, grad_input;
    int64_t tokens, features, outputs, heads, w_at, proj_at, bias_at;
  };
  std::vector<Projection> projections;
  if (self) {  // one projection of H + 2·kv_heads heads
    projections.push_back({kQuery, kGradQuery, Tq, E, E + 2 * KVD, H + 2 * G, 0, 0, 0});
  } else {
    projections.push_back({kQuery, kGradQuery, Tq, E, E, H, 0, 0, 0});
    projections.push_back({kKey, kGradKey, Tk, d.kdim, KVD, G, layer.wk_at(), k_at, E});
    projections.push_back({kValue, kGradValue, Tk, d.vdim, KVD, G, layer.wv_at(), v_at, E + KVD});
  }
  // The weights' gradients, each its own slot (in self-attention too: three parts of one projection).
  struct WeightGrad {
    uint32_t input, slot;
    int64_t tokens, features, heads, proj_at;
  };
  const std::array<WeightGrad, 3> weight_grads = {{{kQuery, kGradQW, Tq, E, H, 0},
                                                   {self ? kQuery : kKey, kGradKW, Tk, d.kdim, G, k_at},
                                                   {self ? kQuery : kValue, kGradVW, Tk, d.vdim, G, v_at}}};

  // Forward: the projections, attention (with LSE), the out projection; then the out projection's
  // gradients and dA, which attention's backward reads.
  p->forward = detail::CommandList(a);
  p->grads = detail::CommandList(a);
  detail::CommandList& fwd = p->forward;
  for (uint32_t own : {kProj, kGradProj, kAttn, kGradAttn, kLse, kAttnWork}) fwd.own_slot(own), p->grads.own_slot(own);
  fwd.barrier_between_dispatches();  // a previous pass may still read what this one writes
  if (p->attends) {
    for (const Projection& j : projections) {
      detail::GemmCall call = product(dense(j.input, dt, j.tokens, j.features), dense(kWin, dt, j.outputs, j.features, j.w_at),
                                      head_major(kProj, dt, j.proj_at, j.tokens, j.heads, D), j.tokens, j.outputs, j.features);
      if (layer.in_bias) call.has_bias = true, call.bias_slot = kInBias, call.bias_base = uint64_t(j.bias_at) * es;
      add(fwd, "projection", call);
    }
    fwd.barrier_between_dispatches();
    detail::AttentionSlots slots;
    slots.q = slots.k = slots.v = kProj, slots.out = kAttn, slots.lse = kLse, slots.mask = kMask;
    slots.kv_lengths = slots.weights = detail::kPlaceholderSlot;
    slots.workspace = kAttnWork;
    for (PerHeadTensor t : kPerHeadTensors) slots.per_head[t] = kPerHead + uint32_t(t);
    detail::emit_attention(c, fwd, *planned, layouts, slots);
  } else {
    // No key (or no query): attention's output is 0, and every gradient but the out projection's.
    if (Tq > 0) add(fwd, "zeros", zeros(dense(kAttn, dt, Tq, E), kOne, dt, Tq, E));
    for (const WeightGrad& w : weight_grads)
      add(fwd, "zeros", zeros(dense(w.slot, DType::f32, w.heads * D, w.features), kOne, dt, w.heads * D, w.features));
    if (d.bias) add(fwd, "zeros", zeros(dense(kGradInB, DType::f32, E + 2 * KVD, 1), kOne, dt, E + 2 * KVD, 1));
    if (d.has_sinks) add(fwd, "zeros", zeros(dense(kGradSinks, DType::f32, H, 1), kOne, dt, H, 1));
    for (const Projection& j : projections)
      if (j.tokens > 0) add(fwd, "zeros", zeros(dense(j.grad_input, DType::f32, j.tokens, j.features), kOne, dt, j.tokens, j.features));
  }
  fwd.barrier_between_dispatches();
  if (Tq > 0) {
    detail::GemmCall out = product(dense(kAttn, dt, Tq, E), dense(kWo, dt, E, E), dense(kOut, dt, Tq, E), Tq, E, E);
    if (layer.out_bias) out.has_bias = true, out.bias_slot = kOutBias;
    add(fwd, "out projection", out);
    add(fwd, "out projection weight gradient",  // dWo = dYᵀ·A
        product(transposed(kGradOut, dt, Tq, E), transposed(kAttn, dt, Tq, E), dense(kGradOutW, DType::f32, E, E), E, E, Tq));
    if (d.bias)  // dbo = dYᵀ·1
      add(fwd, "out projection bias gradient",
          product(transposed(kGradOut, dt, Tq, E), broadcast(kOne, dt), dense(kGradOutB, DType::f32, E, 1), E, 1, Tq));
    if (p->attends)  // dA = dY·Wo (Wo read as (in, out): its transpose)
      add(fwd, "attention output gradient",
          product(dense(kGradOut, dt, Tq, E), transposed(kWo, dt, E, E), dense(kGradAttn, dt, Tq, E), Tq, E, E));
  } else {
    add(fwd, "zeros", zeros(dense(kGradOutW, DType::f32, E, E), kOne, dt, E, E));
    if (d.bias) add(fwd, "zeros", zeros(dense(kGradOutB, DType::f32, E, 1), kOne, dt, E, 1));
  }

  // The projections' gradients from dQ, dK, dV (head-major like Q, K, V): per head h, dW's rows
  // h·D .. h·D + D - 1 = dX_hᵀ·input and db's = dX_hᵀ·1; the input's gradient dX·W, W read
  // transposed (in self-attention the stacked weights: the three contributions summed in the GEMM).
  if (p->attends) {
    detail::CommandList& g = p->grads;
    g.barrier_between_dispatches();  // (replay records one before it too; the list stands on its own)
    for (const WeightGrad& w : weight_grads) {
      detail::GemmCall dw = product(per_head_transposed(kGradProj, dt, w.proj_at, w.tokens, w.heads, D),
                                    transposed(w.input, dt, w.tokens, w.features),
                                    dense(w.slot, DType::f32, w.heads * D, w.features), D, w.features, w.tokens);
      dw.heads = w.heads;
      dw.c.stride_head = D * w.features;
      add(g, "projection weight gradient", dw);
    }
    for (const Projection& j : projections) {
      if (d.bias) {
        detail::GemmCall db = product(per_head_transposed(kGradProj, dt, j.proj_at, j.tokens, j.heads, D), broadcast(kOne, dt),
                                      dense(kGradInB, DType::f32, j.outputs, 1, j.bias_at), D, 1, j.tokens);
        db.heads = j.heads;
        db.c.stride_head = D;
        add(g, "projection bias gradient", db);
      }
      add(g, "input gradient",
          product(head_major(kGradProj, dt, j.proj_at, j.tokens, j.heads, D), transposed(kWin, dt, j.outputs, j.features, j.w_at),
                  dense(j.grad_input, DType::f32, j.tokens, j.features), j.tokens, j.features, j.outputs));
    }
  }

  const float one = 1.0f;
  std::array<std::byte, 4> one_bytes{};
  encode(dt, &one, one_bytes.data(), 1);
  p->one.emplace(Buffer::allocate(context, 16));
  p->one->upload(one_bytes.data(), 4);
  return PreparedMhaBackward(std::move(p));
}

PreparedMhaBackward::PreparedMhaBackward(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreparedMhaBackward::PreparedMhaBackward(PreparedMhaBackward&&) noexcept = default;
PreparedMhaBackward& PreparedMhaBackward::operator=(PreparedMhaBackward&&) noexcept = default;
PreparedMhaBackward::~PreparedMhaBackward() = default;

const PreparedMhaBackward::Impl& PreparedMhaBackward::impl() const {
  if (!impl_) throw Error("PreparedMhaBackward: used after being moved from (a moved-from PreparedMhaBackward holds no pass)");
  return *impl_;
}

const MhaSpec& PreparedMhaBackward::spec() const { return impl().spec; }
uint64_t PreparedMhaBackward::workspace_bytes() const { return impl().workspace_bytes; }

void PreparedMhaBackward::record(VkCommandBuffer command_buffer, const MhaBackwardBuffers& buffers, BufferSlice workspace) const {
  const Impl& p = impl();
  if (command_buffer == VK_NULL_HANDLE) throw Error("record: command_buffer is VK_NULL_HANDLE");
  p.check(buffers, &workspace);
  p.replay(command_buffer, buffers, workspace.buffer->handle(), workspace.buffer->offset() + workspace.offset);
}

void PreparedMhaBackward::run(const MhaBackwardBuffers& buffers) const {
  const Impl& p = impl();
  p.check(buffers, nullptr);
  p.context->submit_with_scratch(p.workspace_bytes, [&](VkCommandBuffer cmd, VkBuffer scratch) {
    detail::barrier_before_attention(cmd);
    p.replay(cmd, buffers, scratch, 0);
    detail::barrier_after_attention(cmd);
  });
}

}  // namespace vkattn
