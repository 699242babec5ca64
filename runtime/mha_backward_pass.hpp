// A forward and backward pass of the multi-head layer for one input shape, on the device: the forward
// keeps its intermediates (the projected Q, K, V, attention's output and its log-sum-exp), then from
// the output's gradient dY:
//   dWo = dYᵀ·A, dbo = colsum(dY), dA = dY·Wo                      (GEMMs)
//   dQ, dK, dV, dsinks = attention backward(Q, K, V, A, LSE, dA)    (PreparedAttentionBackward)
//   dW = dXᵀ·input, db = colsum(dX), dinput = dX·W  per projection  (GEMMs; colsum against a ones vector)
// Every sum runs in a fixed order (no atomics): the same inputs give the same bits.
//
// The projections live head-major, (heads, tokens, head_dim) with tokens = batch·seq: attention reads
// them per head at any stride, a projection's (tokens, features) matrix is its column blocks of
// head_dim, and its transpose per head is a plain strided matrix, so every GEMM above reads them in
// place. In self-attention Q, K and V are one (H + 2·kv_heads, tokens, head_dim) array: one GEMM
// projects all three and one multiplies their gradients by the stacked weights, which sums the three
// contributions to the input's gradient inside the GEMM.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <optional>
#include <span>

#include "command_list.hpp"
#include "vkattn/attention_backward.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/mha.hpp"

namespace vkattn::detail {

// The caller's buffers of one run, in the layer's dtype, dense and batch-first: as MhaBuffers, and
// grad_out (batch, seq_q, E), the gradient of `out`.
struct MhaStepBuffers {
  const Buffer* query = nullptr;
  const Buffer* key = nullptr;    // not given for self-attention
  const Buffer* value = nullptr;  // not given for self-attention
  const Buffer* mask = nullptr;   // with the spec's mask
  const Buffer* out = nullptr;    // written
  const Buffer* grad_out = nullptr;
};

// Where each gradient sits in grad_params(), f32 elements: the state_dict's arrays back to back,
// q/k/v_proj_weight first (so that in self-attention they are in_proj_weight's stacked rows).
struct MhaGradLayout {
  int64_t q_w = 0, k_w = 0, v_w = 0, in_b = 0, out_w = 0, out_b = 0, sinks = 0, total = 0;
};

class MhaBackwardPass {
 public:
  // `spec` checked for `layer` (check_mha_inputs); plans every step and allocates the intermediates.
  MhaBackwardPass(const MultiHeadAttention& layer, const MhaSpec& spec);
  ~MhaBackwardPass();

  // Runs the forward and the backward on `buffers` and waits.
  void run(const MhaStepBuffers& buffers) const;
  // Fills every intermediate and result with 0xff bytes (NaN in every dtype): tests prove each is
  // written before it is read.
  void poison();

  // MultiHeadAttention::backward: uploads the host arrays, runs a pass (poisoned first when `poison`)
  // and downloads every gradient.
  static MhaBackwardResult run_host(const MultiHeadAttention& layer, const MhaInputs& inputs,
                                    std::span<const float> grad_out, AttentionPath path, bool poison);

  const MhaGradLayout& grad_layout() const { return layout_; }
  // f32 results of the last run: the parameters' gradients (grad_layout()), and the inputs' (query:
  // (batch, seq_q, E), key (batch, seq_k, kdim), value (batch, seq_k, vdim); key and value empty in
  // self-attention, where query's holds all three).
  const Buffer& grad_params() const { return *grad_params_; }
  const Buffer& grad_query() const { return *grad_query_; }
  const Buffer* grad_key() const { return grad_key_ ? &*grad_key_ : nullptr; }
  const Buffer* grad_value() const { return grad_value_ ? &*grad_value_ : nullptr; }

 private:
  std::shared_ptr<const MultiHeadAttention::Impl> layer_;
  MhaSpec spec_;
  MhaGradLayout layout_;
  CommandList forward_;  // projections, attention with LSE, out projection, dWo, dbo, dA
  std::optional<PreparedAttentionBackward> attention_;
  CommandList grads_;    // the projections' gradients
  // Intermediates (layer dtype unless said) and results.
  std::optional<Buffer> one_, proj_, grad_proj_, attn_, grad_attn_, lse_, attn_work_, backward_work_;
  std::optional<Buffer> grad_params_, grad_query_, grad_key_, grad_value_;  // f32
};

}  // namespace vkattn::detail
