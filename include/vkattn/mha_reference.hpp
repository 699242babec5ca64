// The fp64 CPU reference of the multi-head attention layer, with the semantics of
// torch.nn.MultiheadAttention(batch_first=True) (the contract: docs/semantics.md): input projections, split heads,
// scaled dot-product attention, merge heads, output projection. It is the yardstick for the GPU layer,
// so it is a plain loop nest computed in double precision from the f32 values it is given.
//
// Differences from PyTorch, by design (the contract: docs/semantics.md):
//   - A query row whose keys are all masked (causal and/or key_padding_mask) gets an attention output
//     of exactly 0 and all-zero weights, so its layer output is out_proj_bias (0 without bias).
//     PyTorch gives NaN there.
//   - Grouped-query attention: kv_heads may be smaller than num_heads (heads % kv_heads == 0); query
//     head h reads KV head h / (num_heads / kv_heads). PyTorch's layer has no such option; with
//     kv_heads == num_heads (the default) the two agree.
//   - Causal masking may be top-left (PyTorch is_causal: key j visible to query i when j <= i) or
//     bottom-right (j <= i + seq_k - seq_q).
//   - The score modifiers (docs/semantics.md, "Score modifiers"): those that are options from MhaInputs::options,
//     the per-head ones from MhaWeights, applied as attention() applies them (reference.hpp). PyTorch's
//     layer has none of them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkattn/mha_types.hpp"
#include "vkattn/types.hpp"

namespace vkattn::reference {

using vkattn::MhaInputs;
using vkattn::MhaWeights;

struct MhaOutputs {
  std::vector<double> out;  // (batch, seq_q, E)
  // Empty unless need_weights. (batch, seq_q, seq_k) when average_weights (mean over heads), else
  // (batch, H, seq_q, seq_k). Masked keys have weight exactly 0; a fully masked row is all 0.
  std::vector<double> weights;
};

// Checks the arguments (E % H == 0, H % kv_heads == 0, every weight, bias, input and mask size) and
// throws vkattn::Error naming the array with the expected and given sizes; then computes the layer.
MhaOutputs multi_head_attention(const MhaWeights& weights, const MhaInputs& inputs);

// The gradients of a layer's output with respect to its parameters and inputs (the contract:
// docs/semantics.md, "Backward"), dense fp64, each named and shaped as the MhaWeights member or
// MhaInputs array it is the gradient of. The ALiBi slopes, the masks and the scale get none.
struct MhaGradients {
  int64_t embed_dim = 0, kdim = 0, vdim = 0, kv_dim = 0;
  std::vector<double> q_proj_weight;    // (E, E)
  std::vector<double> k_proj_weight;    // (kv_dim, kdim)
  std::vector<double> v_proj_weight;    // (kv_dim, vdim)
  std::vector<double> in_proj_bias;     // (E + 2*kv_dim); empty without bias
  std::vector<double> out_proj_weight;  // (E, E): the state_dict's out_proj.weight
  std::vector<double> out_proj_bias;    // (E): out_proj.bias; empty without bias
  std::vector<double> sinks;            // (num_heads); empty without sinks
  std::vector<double> query;            // (batch, seq_q, E); in self-attention the query's whole
                                        // gradient, as the key and the value too
  std::vector<double> key;              // (batch, seq_k, kdim); empty in self-attention
  std::vector<double> value;            // (batch, seq_k, vdim); empty in self-attention
  // The state_dict's packed in_proj_weight's gradient ((E + 2*kv_dim, E): q's, k's and v's rows
  // stacked) when kdim == vdim == E; else empty (the layer has separate q/k/v_proj_weight).
  std::vector<double> in_proj_weight() const;
};

// Checks like multi_head_attention (need_weights and average_weights play no part) and that grad_out
// holds (batch, seq_q, E) values, the gradient of the layer's output; then recomputes the forward in
// fp64 and gives every gradient. The attention core's backward is the same score-chain code as
// reference::attention_backward's (vkattn/backward_reference.hpp), on the fp64 projections; with
// options.dropout, the same mask as the forward (b the batch element, heads num_heads).
MhaGradients multi_head_attention_backward(const MhaWeights& weights, const MhaInputs& inputs,
                                           std::span<const float> grad_out);

}  // namespace vkattn::reference
