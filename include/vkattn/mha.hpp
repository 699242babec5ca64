// The multi-head attention layer on the GPU, with torch.nn.MultiheadAttention(batch_first=True)
// semantics (docs/semantics.md; the deliberate differences are listed in mha_reference.hpp):
//   Q = query·Wqᵀ + bq, K = key·Wkᵀ + bk, V = value·Wvᵀ + bv   (projections, heads split to BHSD)
//   A = attention(Q, K, V) per head (GQA when kv_heads < num_heads)
//   out = merge_heads(A)·Woᵀ + bo
// The projections are a tiled GEMM whose store writes the heads already split (BHSD) and whose load
// for the output projection reads them merged: no transpose passes.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/mha_types.hpp"
#include "vkattn/types.hpp"

namespace vkattn {

struct MhaResult {
  std::vector<float> out;  // (batch, seq_q, E)
  // Empty unless MhaInputs::need_weights: (batch, seq_q, seq_k) averaged over heads when
  // average_weights, else (batch, H, seq_q, seq_k). Masked keys weigh exactly 0.
  std::vector<float> weights;
};

// The gradients of one backward pass of the layer (MultiHeadAttention::backward), f32, each named and
// shaped as the MhaWeights member or MhaInputs array it is the gradient of (the contract:
// docs/semantics.md, "Backward"; reference::MhaGradients is the fp64 yardstick). The ALiBi slopes,
// the masks and the scale get none.
struct MhaBackwardResult {
  int64_t embed_dim = 0, kdim = 0, vdim = 0;  // the layer's
  std::vector<float> out;              // the forward's output (batch, seq_q, E), computed on the way
  std::vector<float> q_proj_weight;    // (E, E)
  std::vector<float> k_proj_weight;    // (kv_dim, kdim)
  std::vector<float> v_proj_weight;    // (kv_dim, vdim)
  std::vector<float> in_proj_bias;     // (E + 2*kv_dim); empty without bias
  std::vector<float> out_proj_weight;  // (E, E): the state_dict's out_proj.weight
  std::vector<float> out_proj_bias;    // (E); empty without bias
  std::vector<float> sinks;            // (num_heads); empty without sinks
  std::vector<float> query;            // (batch, seq_q, E); self-attention: the whole input's gradient
  std::vector<float> key;              // (batch, seq_k, kdim); empty in self-attention
  std::vector<float> value;            // (batch, seq_k, vdim); empty in self-attention
  // The packed state_dict's in_proj_weight gradient (q's, k's and v's rows stacked) when kdim ==
  // vdim == E; else empty.
  std::vector<float> in_proj_weight() const;
};

// A forward pass of the layer on device buffers, described without them: the layer prepares one
// per input shape (MultiHeadAttention::prepare).
struct MhaSpec {
  int64_t batch = 1, seq_q = 1, seq_k = 1;
  // Key and value are the query buffer (seq_k == seq_q; the layer's kdim and vdim equal E).
  bool self_attention = false;
  // The call's options, as MhaInputs has them (the layer's per-head tensors are its weights).
  AttentionOptions options;
  // An explicit mask as attention() takes it, over (batch, num_heads, seq_q, seq_k) with size-1
  // batch or head broadcast: boolean (nonzero = attend) or additive f32/f16.
  std::optional<MaskLayout> mask;
  bool weights = false;  // return the weights P per head, f32 (batch, num_heads, seq_q, seq_k)
  AttentionPath path = AttentionPath::automatic;
};

// The buffers of one forward pass, in the layer's dtype, dense and batch-first.
struct MhaBuffers {
  const Buffer* query = nullptr;  // (batch, seq_q, E)
  const Buffer* key = nullptr;    // (batch, seq_k, kdim); not given for self-attention
  const Buffer* value = nullptr;  // (batch, seq_k, vdim); not given for self-attention
  const Buffer* out = nullptr;    // (batch, seq_q, E)
  const Buffer* mask = nullptr;   // with MhaSpec::mask, at its layout
  BufferSlice weights;            // with MhaSpec::weights
};

class MultiHeadAttention;
class PreparedMhaBackward;  // vkattn/mha_backward.hpp

// The layer planned for one input shape: every check made, the pipelines built, the projections,
// attention and the output projection precomputed as one list of dispatches. record() and run()
// check the buffers against the plan and record it, as PreparedAttention does. Keeps the layer's
// weights and the Context's device alive while it lives.
class PreparedMha {
 public:
  PreparedMha(PreparedMha&&) noexcept;
  PreparedMha& operator=(PreparedMha&&) noexcept;
  PreparedMha(const PreparedMha&) = delete;
  PreparedMha& operator=(const PreparedMha&) = delete;
  ~PreparedMha();

  const MhaSpec& spec() const;
  const AttentionPlan& attention_plan() const;  // how its attention runs
  // Device scratch one record needs: the projected queries, keys and values and attention's output
  // (in the layer's dtype), and attention's own workspace.
  uint64_t workspace_bytes() const;

  // Records the pass into the caller's command buffer, with no submit: the caller orders the writes
  // of the inputs before it and the reads of `out` (and the weights) after it with its own barriers
  // (shader-write / shader-read, compute stage). `workspace` must hold workspace_bytes() and must not
  // be used by other work until the command buffer has completed. Throws Error (records nothing)
  // when a buffer does not fit the plan.
  void record(VkCommandBuffer command_buffer, const MhaBuffers& buffers, BufferSlice workspace) const;
  // Runs the pass and waits, with the Context's own scratch as the workspace.
  void run(const MhaBuffers& buffers) const;

 private:
  friend class MultiHeadAttention;
  struct Impl;
  explicit PreparedMha(std::unique_ptr<Impl> impl);
  const Impl& impl() const;  // throws on a moved-from PreparedMha
  std::unique_ptr<Impl> impl_;
};

class MultiHeadAttention {
 public:
  // Checks the weights (E % H, H % kv_heads, every size; throws Error naming the array) and uploads
  // them to the device in `dtype` (rounded from f32; the per-head weights stay f32). The layer keeps a reference to `context`, which
  // must outlive it. Any use of a moved-from layer throws Error("... moved-from MultiHeadAttention").
  MultiHeadAttention(Context& context, const MhaWeights& weights, DType dtype = DType::f32);
  MultiHeadAttention(MultiHeadAttention&&) noexcept;
  MultiHeadAttention& operator=(MultiHeadAttention&&) noexcept;
  MultiHeadAttention(const MultiHeadAttention&) = delete;
  MultiHeadAttention& operator=(const MultiHeadAttention&) = delete;
  ~MultiHeadAttention();

  int64_t embed_dim() const;
  int64_t num_heads() const;
  int64_t kv_heads() const;
  int64_t kdim() const;
  int64_t vdim() const;
  DType dtype() const;

  // Runs the layer on host arrays (f32 values, rounded to the layer's dtype on upload) and waits.
  // Checks every input size first (throws Error; nothing is dispatched). `path` picks the attention
  // kernels (automatic: the three-stage path only when weights are requested). Uploads the inputs and
  // the merged mask, then runs prepare(...) on them.
  MhaResult forward(const MhaInputs& inputs, AttentionPath path = AttentionPath::automatic);

  // The backward pass on host arrays: runs the forward on `inputs` on the device, keeping its
  // intermediates (the projected Q, K, V, attention's output and its log-sum-exp), then from
  // `grad_out` (batch, seq_q, E), the gradient of the layer's output, every gradient (MhaBackwardResult)
  // with the device's GEMMs and attention backward, and waits: prepare_backward(...) on uploaded
  // copies (vkattn/mha_backward.hpp).
  // Deterministic: no atomics, every sum in a fixed order; the same inputs give the same bits.
  // need_weights and average_weights play no part. Checks as forward() does, and grad_out's size;
  // dropout is refused (the forward kernels do not apply it). Throws Error; nothing is dispatched then.
  MhaBackwardResult backward(const MhaInputs& inputs, std::span<const float> grad_out,
                             AttentionPath path = AttentionPath::automatic);

  // Plans the backward pass on device buffers for one input shape (vkattn/mha_backward.hpp; throws
  // Error as backward() would for that shape, and for MhaSpec::weights, which it does not give).
  PreparedMhaBackward prepare_backward(const MhaSpec& spec) const;

  // Replaces the layer's weights with `weights` of the same sizes and arrays (a training step's
  // update): checked as the constructor checks them; throws Error when a size differs. Passes
  // prepared from the layer read the new values from their next run. Uploads synchronously: not while
  // a command buffer recorded from the layer's passes may still execute.
  void set_weights(const MhaWeights& weights);

  // Plans a forward pass on device buffers for one input shape (throws Error as forward() would for
  // that shape; nothing is dispatched). Keep it and record it every step.
  PreparedMha prepare(const MhaSpec& spec) const;

 private:
  friend class PreparedMha;  // keeps the weights alive
  friend class PreparedMhaBackward;  // likewise
  struct Impl;
  Impl& impl() const;  // throws on a moved-from layer
  static void write_weights(Impl& layer, const MhaWeights& weights);
  std::shared_ptr<Impl> impl_;  // shared with the PreparedMha made from it (the weights)
};

}  // namespace vkattn
