// The multi-head layer's backward pass on device buffers (the contract: docs/semantics.md,
// "Backward"): one recorded pass that runs the forward, keeping its intermediates in the workspace
// (the projected Q, K, V, attention's output and its log-sum-exp), and from the output's gradient dY
// every gradient — of the layer's weights and of its inputs — with GEMMs and attention's backward
// (vkattn/attention_backward.hpp). MultiHeadAttention::backward is the same on host arrays.
// Deterministic: no atomics, every sum in a fixed order; the same inputs give the same bits.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>

#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/mha.hpp"

namespace vkattn {

// Where each gradient goes: f32, dense, shaped as the MhaWeights member or input it is the gradient
// of, each written whole. A weight's slice is given exactly when the layer has that weight (the
// biases with bias, sinks with sinks); key and value's exactly when the pass is not self-attention
// (in self-attention query's is the whole input's gradient).
struct MhaGradBuffers {
  BufferSlice q_proj_weight;    // (E, E)
  BufferSlice k_proj_weight;    // (kv_dim, kdim)
  BufferSlice v_proj_weight;    // (kv_dim, vdim)
  BufferSlice in_proj_bias;     // (E + 2*kv_dim)
  BufferSlice out_proj_weight;  // (E, E)
  BufferSlice out_proj_bias;    // (E)
  BufferSlice sinks;            // (num_heads)
  BufferSlice query;            // (batch, seq_q, E)
  BufferSlice key;              // (batch, seq_k, kdim)
  BufferSlice value;            // (batch, seq_k, vdim)
};

// The buffers of one backward run: the forward's (as MhaBuffers has them, in the layer's dtype;
// `out` is written: the forward's output), the output's gradient and the gradients.
struct MhaBackwardBuffers {
  const Buffer* query = nullptr;
  const Buffer* key = nullptr;    // not given for self-attention
  const Buffer* value = nullptr;  // not given for self-attention
  const Buffer* mask = nullptr;   // with MhaSpec::mask
  const Buffer* out = nullptr;    // (batch, seq_q, E), written
  const Buffer* grad_out = nullptr;  // (batch, seq_q, E): dLoss/dout
  MhaGradBuffers grads;
};

// The backward planned for one input shape (MultiHeadAttention::prepare_backward): every check made,
// the pipelines built. record() and run() check the buffers and record the pass, as PreparedMha's do.
// Keeps the layer's weights (reading their current values: MultiHeadAttention::set_weights) and the
// Context's device alive while it lives.
class PreparedMhaBackward {
 public:
  PreparedMhaBackward(PreparedMhaBackward&&) noexcept;
  PreparedMhaBackward& operator=(PreparedMhaBackward&&) noexcept;
  PreparedMhaBackward(const PreparedMhaBackward&) = delete;
  PreparedMhaBackward& operator=(const PreparedMhaBackward&) = delete;
  ~PreparedMhaBackward();

  const MhaSpec& spec() const;
  // Device scratch one record needs: the forward's intermediates and their gradients (in the layer's
  // dtype), the LSE, and attention's forward and backward workspaces.
  uint64_t workspace_bytes() const;

  // Records the pass into the caller's command buffer, with no submit: the caller orders the writes
  // of the inputs before it and the reads of `out` and the gradients after it with its own barriers
  // (shader-write / shader-read, compute stage). `workspace` must hold workspace_bytes() and must not
  // be used by other work until the command buffer has completed. Throws Error (records nothing)
  // when a buffer does not fit the plan. (Unlike PreparedMha::record it allocates: a few Buffer views
  // of the workspace for attention's backward.)
  void record(VkCommandBuffer command_buffer, const MhaBackwardBuffers& buffers, BufferSlice workspace) const;
  // Runs the pass and waits, with the Context's own scratch as the workspace.
  void run(const MhaBackwardBuffers& buffers) const;

 private:
  friend class MultiHeadAttention;
  struct Impl;
  explicit PreparedMhaBackward(std::unique_ptr<Impl> impl);
  const Impl& impl() const;  // throws on a moved-from PreparedMhaBackward
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkattn
