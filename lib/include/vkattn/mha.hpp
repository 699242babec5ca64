// The multi-head attention layer on the GPU, with torch.nn.MultiheadAttention(batch_first=True)
// semantics (README.md, "Semantics"; the deliberate differences are listed in mha_reference.hpp):
//   Q = query·Wqᵀ + bq, K = key·Wkᵀ + bk, V = value·Wvᵀ + bv   (projections, heads split to BHSD)
//   A = attention(Q, K, V) per head (GQA when kv_heads < num_heads)
//   out = merge_heads(A)·Woᵀ + bo
// The projections are a tiled GEMM whose store writes the heads already split (BHSD) and whose load
// for the output projection reads them merged: no transpose passes.
#pragma once

#include <memory>
#include <vector>

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

class MultiHeadAttention {
 public:
  // Checks the weights (E % H, H % kv_heads, every size; throws Error naming the array) and uploads
  // them to the device in `dtype` (rounded from f32). The layer keeps a reference to `context`, which
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
  // kernels (automatic: the three-stage path only when weights are requested).
  MhaResult forward(const MhaInputs& inputs, AttentionPath path = AttentionPath::automatic);

 private:
  struct Impl;
  Impl& impl() const;  // throws on a moved-from layer
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkattn
