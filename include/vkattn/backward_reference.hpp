// The fp64 CPU reference of attention's backward pass (the contract: docs/semantics.md, "Backward"):
// given a forward call's inputs (reference::Inputs, with its options: masks, modifiers, dropout) and
// the gradient of its output dO, the gradients of Q, K, V and the sink logits. It recomputes the
// forward in fp64 (its own O and LSE, through the same score chain as reference::attention) and then
//   D_i = Σ_d dO_id O_id;  dV_j = Σ_i P_ij Z_ij dO_i;  dP_ij = Z_ij dO_i·V_j;  dS_ij = P_ij (dP_ij - D_i);
//   through softcap dS ← dS (1 - tanh²(s_ij / c)) with s the scaled score;  dQ_i = scale Σ_j dS_ij K_j;
//   dK_j = scale Σ_i dS_ij Q_i (summed over a GQA group's query heads, as dV);
//   dσ_h = -Σ_{b,i} e^{σ_h - LSE_bhi} D_bhi.
// Masks, ALiBi slopes and the scale get no gradient; a fully masked row contributes nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkattn/reference.hpp"
#include "vkattn/serving_reference.hpp"
#include "vkattn/types.hpp"

namespace vkattn::reference {

struct Gradients {
  int64_t batch = 0, heads = 0, kv_heads = 0, seq_q = 0, seq_k = 0, dim_qk = 0, dim_v = 0;
  std::vector<double> dq;      // (batch, heads, seq_q, dim_qk), dense
  std::vector<double> dk;      // (batch, kv_heads, seq_k, dim_qk), dense
  std::vector<double> dv;      // (batch, kv_heads, seq_k, dim_v), dense
  // With sinks: one value per element of the sinks tensor ((heads), or (batch, heads)), dense,
  // summed over what that tensor broadcasts; else empty.
  std::vector<double> dsinks;
};

// Checks like reference::attention (throws vkattn::Error) and that grad_out_layout is O's shape
// (batch, heads, seq_q, dim_v) with grad_out holding it; then computes the gradients. Element i of
// grad_out is the element at index i of grad_out_layout (strides and offset apply).
Gradients attention_backward(const Inputs& inputs, const TensorLayout& grad_out_layout,
                             std::span<const float> grad_out);

struct VarlenGradients {
  int64_t total_q = 0, total_k = 0, heads = 0, kv_heads = 0, dim_qk = 0, dim_v = 0;
  std::vector<double> dq;      // (total_q, heads, dim_qk), dense
  std::vector<double> dk;      // (total_k, kv_heads, dim_qk), dense
  std::vector<double> dv;      // (total_k, kv_heads, dim_v), dense
  std::vector<double> dsinks;  // as Gradients::dsinks (summed over the sequences)
};

// The same for a packed batch (q8_0 K/V refused: an inference layout), each sequence as a dense call
// (dropout's b is the sequence, i and j counted within it); grad_out is (total_q, heads, dim_v)
// packed, at grad_out_layout (packed_layout).
VarlenGradients varlen_attention_backward(const VarlenInputs& inputs, const TensorLayout& grad_out_layout,
                                          std::span<const float> grad_out);

}  // namespace vkattn::reference
