#include "mha_backward_pass.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "attention_record.hpp"
#include "context_impl.hpp"
#include "gemm.hpp"
#include "mha_layer.hpp"
#include "planned_call.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn::detail {
namespace {

// The slots of the pass's two command lists.
enum Slot : uint32_t {
  kQuery = 1, kKey, kValue, kMask, kOut, kGradOut,  // the caller's
  kWin, kWo, kInBias, kOutBias, kPerHead,           // the layer's (kPerHead + PerHeadTensor)
  kOne = kPerHead + kPerHeadTensors.size(),         // a single 1 in the layer's dtype (column sums)
  kProj, kGradProj, kAttn, kGradAttn, kLse, kAttnWork,  // intermediates
  kGradParams, kGradQuery, kGradKey, kGradValue,    // results, f32
  kSlotCount
};

// A row-major (rows, cols) matrix from element `at` of `slot`, the whole batch as one (batch·seq) rows.
GemmOperand dense(uint32_t slot, DType dtype, int64_t rows, int64_t cols, int64_t at = 0) {
  GemmOperand o;
  o.slot = slot, o.dtype = dtype;
  o.offset = at, o.end = at + std::max<int64_t>(rows * cols, 1);
  o.stride_row = cols;
  return o;
}

// The same matrix transposed: (cols, rows).
GemmOperand transposed(uint32_t slot, DType dtype, int64_t rows, int64_t cols, int64_t at = 0) {
  GemmOperand o = dense(slot, dtype, rows, cols, at);
  o.stride_row = 1, o.stride_col = cols;
  return o;
}

// A head-major (heads, tokens, D) array from element `at`, seen as the (tokens, heads·D) matrix:
// column c is head c / D's element c % D.
GemmOperand head_major(uint32_t slot, DType dtype, int64_t at, int64_t tokens, int64_t heads, int64_t D) {
  GemmOperand o;
  o.slot = slot, o.dtype = dtype;
  o.offset = at, o.end = at + std::max<int64_t>(heads * tokens * D, 1);
  o.stride_row = D;
  o.col_block = D, o.stride_block = tokens * D;
  return o;
}

// The same array per head (GEMM heads), transposed: (D, tokens) matrices.
GemmOperand per_head_transposed(uint32_t slot, DType dtype, int64_t at, int64_t tokens, int64_t heads, int64_t D) {
  GemmOperand o = head_major(slot, dtype, at, tokens, heads, D);
  o.col_block = 0, o.stride_block = 0;
  o.stride_head = tokens * D, o.stride_row = 1, o.stride_col = D;
  return o;
}

// The ones "vector" (n = 1, k): one element read at every k (stride 0).
GemmOperand ones(DType dtype) {
  GemmOperand o;
  o.slot = kOne, o.dtype = dtype, o.end = 1;
  o.stride_row = 0, o.stride_col = 0;
  return o;
}

// The head-major layout of `heads` heads from element `at`, as attention takes it: (b, h, s, d) at
// h·tokens·D + (b·seq + s)·D + d.
TensorLayout head_major_layout(DType dtype, int64_t at, int64_t batch, int64_t heads, int64_t seq, int64_t D) {
  TensorLayout t;
  t.dtype = dtype;
  t.batch = batch, t.heads = heads, t.seq = seq, t.dim = D;
  t.stride_batch = seq * D, t.stride_head = batch * seq * D, t.stride_seq = D;
  t.offset = at;
  return t;
}

Buffer allocate(Context& context, uint64_t bytes) { return Buffer::allocate(context, std::max<uint64_t>(bytes, 16)); }

}  // namespace

MhaBackwardPass::MhaBackwardPass(const MultiHeadAttention& layer_ref, const MhaSpec& spec)
    : layer_(layer_ref.impl_), spec_(spec) {
  const MultiHeadAttention::Impl& layer = layer_ref.impl();
  const MhaDims& d = layer.dims;
  Context& context = *layer.context;
  ContextImpl& c = impl_of(context);
  c.check_usable();
  const DeviceInfo& device = c.info;
  const DType dt = layer.dtype;
  const uint64_t es = dtype_size(dt);
  const int64_t B = spec.batch, Sq = spec.seq_q, Sk = spec.seq_k, E = d.embed_dim, H = d.num_heads;
  const int64_t G = d.kv_heads, D = d.head_dim(), KVD = d.kv_dim();
  const int64_t Tq = B * Sq, Tk = B * Sk;  // query and key tokens
  const bool self = spec.self_attention;

  // The parameters' gradients, f32, back to back (MhaGradLayout).
  MhaGradLayout& g = layout_;
  g.q_w = 0;
  g.k_w = g.q_w + E * E;
  g.v_w = g.k_w + KVD * d.kdim;
  g.in_b = g.v_w + KVD * d.vdim;
  g.out_w = g.in_b + (d.bias ? E + 2 * KVD : 0);
  g.out_b = g.out_w + E * E;
  g.sinks = g.out_b + (d.bias ? E : 0);
  g.total = g.sinks + (layer.per_head[PerHeadTensor::sinks] ? H : 0);

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
  refuse_forward_dropout(layouts.options);
  const PathPlan planned = plan_path(device, c.kernel, layouts, false, spec.path);
  attention_.emplace(context, AttentionSpec::dense(layouts));

  const GemmChoice gemm = choose_gemm(device);
  const auto add = [&](CommandList& list, const char* what, const GemmCall& call) {
    check_gemm_shape(device, gemm, what, call.m, call.n, call.k);
    emit_gemm(c, list, call, gemm);
  };
  const auto product = [](GemmOperand a, GemmOperand b, GemmOperand out, int64_t m, int64_t n, int64_t k) {
    GemmCall call;
    call.a = a, call.b = b, call.c = out;
    call.m = m, call.n = n, call.k = k;
    return call;
  };
  // The rows of one projection in the stacked weights and biases, and its input.
  struct Projection {
    uint32_t input, grad_input;
    int64_t tokens, features, outputs, heads, w_at, proj_at, bias_at, grad_w_at;
  };
  std::vector<Projection> projections;
  if (self) {  // one projection of H + 2·kv_heads heads
    projections.push_back({kQuery, kGradQuery, Tq, E, E + 2 * KVD, H + 2 * G, 0, 0, 0, g.q_w});
  } else {
    projections.push_back({kQuery, kGradQuery, Tq, E, E, H, 0, 0, 0, g.q_w});
    projections.push_back({kKey, kGradKey, Tk, d.kdim, KVD, G, layer.wk_at(), k_at, E, g.k_w});
    projections.push_back({kValue, kGradValue, Tk, d.vdim, KVD, G, layer.wv_at(), v_at, E + KVD, g.v_w});
  }

  // Forward: the projections, attention (with LSE), the out projection; then the out projection's
  // gradients and dA, which attention's backward reads.
  forward_ = CommandList(planned.alignment());
  for (uint32_t own : {kProj, kAttn, kGradAttn, kLse, kAttnWork, kGradParams}) forward_.own_slot(own);
  forward_.barrier_between_dispatches();  // a previous run may still read what this one writes
  for (const Projection& p : projections) {
    GemmCall call = product(dense(p.input, dt, p.tokens, p.features), dense(kWin, dt, p.outputs, p.features, p.w_at),
                            head_major(kProj, dt, p.proj_at, p.tokens, p.heads, D), p.tokens, p.outputs, p.features);
    if (layer.in_bias) call.has_bias = true, call.bias_slot = kInBias, call.bias_base = uint64_t(p.bias_at) * es;
    add(forward_, "projection", call);
  }
  forward_.barrier_between_dispatches();
  AttentionSlots slots;
  slots.q = slots.k = slots.v = kProj, slots.out = kAttn, slots.lse = kLse, slots.mask = kMask;
  slots.kv_lengths = slots.weights = kPlaceholderSlot;
  slots.workspace = kAttnWork;
  for (PerHeadTensor t : kPerHeadTensors) slots.per_head[t] = kPerHead + uint32_t(t);
  emit_attention(c, forward_, planned, layouts, slots);
  forward_.barrier_between_dispatches();
  {
    GemmCall out = product(dense(kAttn, dt, Tq, E), dense(kWo, dt, E, E), dense(kOut, dt, Tq, E), Tq, E, E);
    if (layer.out_bias) out.has_bias = true, out.bias_slot = kOutBias;
    add(forward_, "out projection", out);
    // dWo = dYᵀ·A, f32.
    add(forward_, "out projection weight gradient",
        product(transposed(kGradOut, dt, Tq, E), transposed(kAttn, dt, Tq, E), dense(kGradParams, DType::f32, E, E, g.out_w),
                E, E, Tq));
    // dbo = dYᵀ·1.
    if (d.bias)
      add(forward_, "out projection bias gradient",
          product(transposed(kGradOut, dt, Tq, E), ones(dt), dense(kGradParams, DType::f32, E, 1, g.out_b), E, 1, Tq));
    // dA = dY·Wo (Wo read as (in, out): its transpose).
    add(forward_, "attention output gradient",
        product(dense(kGradOut, dt, Tq, E), transposed(kWo, dt, E, E), dense(kGradAttn, dt, Tq, E), Tq, E, E));
  }

  // The projections' gradients, from dQ, dK, dV (head-major like Q, K, V): per head h, dW's rows
  // h·D .. h·D + D - 1 = dX_hᵀ·input and db's = dX_hᵀ·1; the input's gradient dX·W, with W read
  // transposed (every head's columns: the whole (outputs, features) block).
  grads_ = CommandList(planned.alignment());
  for (uint32_t own : {kGradProj, kGradParams}) grads_.own_slot(own);
  grads_.barrier_between_dispatches();  // (run() records one before it too; the list stands on its own)
  for (const Projection& p : projections) {
    GemmCall dw = product(per_head_transposed(kGradProj, dt, p.proj_at, p.tokens, p.heads, D),
                          transposed(p.input, dt, p.tokens, p.features),
                          dense(kGradParams, DType::f32, p.outputs, p.features, p.grad_w_at), D, p.features, p.tokens);
    dw.heads = p.heads;
    dw.c.stride_head = D * p.features;
    add(grads_, "projection weight gradient", dw);
    if (d.bias) {
      GemmCall db = product(per_head_transposed(kGradProj, dt, p.proj_at, p.tokens, p.heads, D), ones(dt),
                            dense(kGradParams, DType::f32, p.outputs, 1, g.in_b + p.bias_at), D, 1, p.tokens);
      db.heads = p.heads;
      db.c.stride_head = D;
      add(grads_, "projection bias gradient", db);
    }
    add(grads_, "input gradient",
        product(head_major(kGradProj, dt, p.proj_at, p.tokens, p.heads, D), transposed(kWin, dt, p.outputs, p.features, p.w_at),
                dense(p.grad_input, DType::f32, p.tokens, p.features), p.tokens, p.features, p.outputs));
  }

  // The intermediates and results.
  const float one = 1.0f;
  std::array<std::byte, 4> one_bytes{};
  encode(dt, &one, one_bytes.data(), 1);
  one_.emplace(allocate(context, 16));
  one_->upload(one_bytes.data(), 4);
  proj_.emplace(allocate(context, uint64_t(proj_elements) * es));
  grad_proj_.emplace(allocate(context, uint64_t(proj_elements) * es));
  attn_.emplace(allocate(context, uint64_t(Tq * E) * es));
  grad_attn_.emplace(allocate(context, uint64_t(Tq * E) * es));
  lse_.emplace(allocate(context, uint64_t(Tq * H) * 4));
  attn_work_.emplace(allocate(context, planned.workspace_bytes() + planned.alignment()));
  backward_work_.emplace(allocate(context, attention_->workspace_bytes()));
  grad_params_.emplace(allocate(context, uint64_t(g.total) * 4));
  grad_query_.emplace(allocate(context, uint64_t(Tq * E) * 4));
  if (!self) {
    grad_key_.emplace(allocate(context, uint64_t(Tk * d.kdim) * 4));
    grad_value_.emplace(allocate(context, uint64_t(Tk * d.vdim) * 4));
  }
}

MhaBackwardPass::~MhaBackwardPass() = default;

void MhaBackwardPass::poison() {
  for (std::optional<Buffer>* b : {&proj_, &grad_proj_, &attn_, &grad_attn_, &lse_, &attn_work_, &backward_work_,
                                   &grad_params_, &grad_query_, &grad_key_, &grad_value_})
    if (*b) (*b)->fill(0xff);
}

void MhaBackwardPass::run(const MhaStepBuffers& b) const {
  const MultiHeadAttention::Impl& layer = *layer_;
  ContextImpl& c = impl_of(*layer.context);
  std::array<SlotBase, kSlotCount> slots{};
  const auto at = [](const Buffer& buffer) { return SlotBase{buffer.handle(), buffer.offset()}; };
  slots[kQuery] = at(*b.query);
  slots[kKey] = spec_.self_attention ? slots[kQuery] : at(*b.key);
  slots[kValue] = spec_.self_attention ? slots[kQuery] : at(*b.value);
  if (b.mask) slots[kMask] = at(*b.mask);
  slots[kOut] = at(*b.out);
  slots[kGradOut] = at(*b.grad_out);
  slots[kWin] = at(*layer.w_in), slots[kWo] = at(*layer.wo);
  if (layer.in_bias) slots[kInBias] = at(*layer.in_bias);
  if (layer.out_bias) slots[kOutBias] = at(*layer.out_bias);
  for (PerHeadTensor t : kPerHeadTensors)
    if (layer.per_head[t]) slots[kPerHead + uint32_t(t)] = at(*layer.per_head[t]);
  slots[kOne] = at(*one_);
  slots[kProj] = at(*proj_), slots[kGradProj] = at(*grad_proj_), slots[kAttn] = at(*attn_);
  slots[kGradAttn] = at(*grad_attn_), slots[kLse] = at(*lse_), slots[kAttnWork] = at(*attn_work_);
  slots[kGradParams] = at(*grad_params_), slots[kGradQuery] = at(*grad_query_);
  if (grad_key_) slots[kGradKey] = at(*grad_key_), slots[kGradValue] = at(*grad_value_);

  BackwardBuffers bb;
  bb.forward.q = bb.forward.k = bb.forward.v = &*proj_;
  bb.forward.out = &*attn_;
  bb.forward.lse = {&*lse_, 0};
  bb.forward.mask = b.mask;
  for (PerHeadTensor t : kPerHeadTensors)
    if (layer.per_head[t]) bb.forward[t] = &*layer.per_head[t];
  bb.grad_out = &*grad_attn_;
  bb.grad_q = bb.grad_k = bb.grad_v = &*grad_proj_;
  if (layer.per_head[PerHeadTensor::sinks]) bb.grad_sinks = {&*grad_params_, uint64_t(layout_.sinks) * 4};

  c.submit_and_wait([&](VkCommandBuffer cmd) {
    barrier_before_attention(cmd);
    forward_.replay(c, cmd, slots);
    barrier_before_attention(cmd);  // Q, K, V, A, LSE and dA before attention's backward reads them
    attention_->record(cmd, bb, BufferSlice{&*backward_work_, 0});
    barrier_before_attention(cmd);  // dQ, dK, dV before the GEMMs read them
    grads_.replay(c, cmd, slots);
    barrier_after_attention(cmd);
  });
}

}  // namespace vkattn::detail
