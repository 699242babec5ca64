// The fp64 CPU reference of the multi-head attention layer, with the semantics of
// torch.nn.MultiheadAttention(batch_first=True) (DESIGN.md §1): input projections, split heads,
// scaled dot-product attention, merge heads, output projection. It is the yardstick for the GPU layer,
// so it is a plain loop nest computed in double precision from the f32 values it is given.
//
// Differences from PyTorch, by design (DESIGN.md §1):
//   - A query row whose keys are all masked (causal and/or key_padding_mask) gets an attention output
//     of exactly 0 and all-zero weights, so its layer output is out_proj_bias (0 without bias).
//     PyTorch gives NaN there.
//   - Grouped-query attention: kv_heads may be smaller than num_heads (heads % kv_heads == 0); query
//     head h reads KV head h / (num_heads / kv_heads). PyTorch's layer has no such option; with
//     kv_heads == num_heads (the default) the two agree.
//   - Causal masking may be top-left (PyTorch is_causal: key j visible to query i when j <= i) or
//     bottom-right (j <= i + seq_k - seq_q).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkattn/types.hpp"

namespace vkattn::reference {

// The layer's parameters, row-major, in torch's state_dict layout (weights are (out_features,
// in_features): y = x·Wᵀ + b). Head dim = embed_dim / num_heads; kv_dim = kv_heads * head dim.
struct MhaWeights {
  int64_t embed_dim = 0;  // E
  int64_t num_heads = 0;  // H
  int64_t kv_heads = 0;   // 0 = num_heads
  int64_t kdim = 0;       // features of `key`;   0 = embed_dim
  int64_t vdim = 0;       // features of `value`; 0 = embed_dim
  bool bias = true;
  std::vector<float> q_proj_weight;    // (E, E)
  std::vector<float> k_proj_weight;    // (kv_dim, kdim)
  std::vector<float> v_proj_weight;    // (kv_dim, vdim)
  std::vector<float> in_proj_bias;     // (E + 2*kv_dim): q, k, v biases; empty when !bias
  std::vector<float> out_proj_weight;  // (E, E)
  std::vector<float> out_proj_bias;    // (E); empty when !bias

  int64_t effective_kv_heads() const { return kv_heads > 0 ? kv_heads : num_heads; }
  int64_t effective_kdim() const { return kdim > 0 ? kdim : embed_dim; }
  int64_t effective_vdim() const { return vdim > 0 ? vdim : embed_dim; }

  // From the packed state_dict of nn.MultiheadAttention with kdim == vdim == embed_dim:
  // in_proj_weight (3E, E) holds Wq, Wk, Wv stacked; in_proj_bias (3E) and out_proj_bias (E) are both
  // empty (bias=False) or both present. Throws vkattn::Error when a size does not match.
  static MhaWeights from_packed(int64_t embed_dim, int64_t num_heads, std::span<const float> in_proj_weight,
                                std::span<const float> in_proj_bias, std::span<const float> out_proj_weight,
                                std::span<const float> out_proj_bias);
};

struct MhaInputs {
  int64_t batch = 0, seq_q = 0, seq_k = 0;
  std::span<const float> query;  // (batch, seq_q, E)
  std::span<const float> key;    // (batch, seq_k, kdim)
  std::span<const float> value;  // (batch, seq_k, vdim)
  Causal causal = Causal::none;
  // Empty = no padding; else (batch, seq_k) with nonzero = IGNORE that key (nn.MultiheadAttention's
  // convention — the opposite of SDPA's boolean attn_mask, where true = attend).
  std::vector<uint8_t> key_padding_mask;
  bool need_weights = false;
  bool average_weights = true;  // torch's average_attn_weights
};

struct MhaOutputs {
  std::vector<double> out;  // (batch, seq_q, E)
  // Empty unless need_weights. (batch, seq_q, seq_k) when average_weights (mean over heads), else
  // (batch, H, seq_q, seq_k). Masked keys have weight exactly 0; a fully masked row is all 0.
  std::vector<double> weights;
};

// Checks the arguments (E % H == 0, H % kv_heads == 0, every weight, bias, input and mask size) and
// throws vkattn::Error naming the array with the expected and given sizes; then computes the layer.
MhaOutputs multi_head_attention(const MhaWeights& weights, const MhaInputs& inputs);

}  // namespace vkattn::reference
