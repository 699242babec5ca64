// The parameters and inputs of the multi-head attention layer, shared by the GPU layer
// (vkattn/mha.hpp) and its fp64 CPU reference (vkattn/mha_reference.hpp). Semantics follow
// torch.nn.MultiheadAttention(batch_first=True) (the contract: docs/semantics.md); see mha_reference.hpp for the
// (deliberate) differences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkattn/per_head.hpp"
#include "vkattn/types.hpp"

namespace vkattn {

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
  // Score modifiers that are weights of the layer (docs/semantics.md, "Score modifiers"), f32, each empty (none)
  // or (num_heads), finite: attention-sink logits (gpt-oss; each row's softmax denominator gains
  // e^sink[h], with no value) and ALiBi slopes (BLOOM, MPT; bias -slope[h]·|i + off - j|).
  std::vector<float> sinks;
  std::vector<float> alibi_slopes;

  int64_t effective_kv_heads() const { return kv_heads > 0 ? kv_heads : num_heads; }
  int64_t effective_kdim() const { return kdim > 0 ? kdim : embed_dim; }
  int64_t effective_vdim() const { return vdim > 0 ? vdim : embed_dim; }
  // The per-head weight of tensor t (the member above) and its name, in messages and state_dicts.
  std::vector<float>& per_head_weight(PerHeadTensor t) { return t == PerHeadTensor::alibi ? alibi_slopes : sinks; }
  const std::vector<float>& per_head_weight(PerHeadTensor t) const {
    return t == PerHeadTensor::alibi ? alibi_slopes : sinks;
  }
  // The per-head weights as the call's per-head tensors (vkattn/per_head.hpp): each given one (num_heads),
  // pointing into this struct.
  PerHeadValues per_head() const;

  // From the packed state_dict of nn.MultiheadAttention with kdim == vdim == embed_dim:
  // in_proj_weight (3E, E) holds Wq, Wk, Wv stacked; in_proj_bias (3E) and out_proj_bias (E) are both
  // empty (bias=False) or both present. Throws vkattn::Error when a size does not match.
  static MhaWeights from_packed(int64_t embed_dim, int64_t num_heads, std::span<const float> in_proj_weight,
                                std::span<const float> in_proj_bias, std::span<const float> out_proj_weight,
                                std::span<const float> out_proj_bias);
};

struct MhaInputs {
  int64_t batch = 0, seq_q = 0, seq_k = 0;
  // Self-attention: leave key and value empty; they are then the query (seq_k = seq_q, and the
  // layer's kdim and vdim must equal E).
  std::span<const float> query;  // (batch, seq_q, E)
  std::span<const float> key;    // (batch, seq_k, kdim)
  std::span<const float> value;  // (batch, seq_k, vdim)
  // The call's options, as attention() takes them (vkattn/types.hpp), checked with the same rules
  // and messages: causal, the score modifiers that are options (a sliding window, the alignment,
  // a logit cap), the scale (default 1/sqrt(head dim), torch's) and num_splits. The layer's other
  // score modifiers (sinks, ALiBi slopes) are its weights (MhaWeights).
  AttentionOptions options;
  // Empty = no padding; else (batch, seq_k) with nonzero = IGNORE that key (nn.MultiheadAttention's
  // convention — the opposite of SDPA's boolean attn_mask, where true = attend).
  std::vector<uint8_t> key_padding_mask;
  // Empty = none; else (seq_q, seq_k) f32 added to the scaled scores of every batch and head
  // (torch's float attn_mask; -inf masks a key).
  std::vector<float> attn_mask;
  bool need_weights = false;
  bool average_weights = true;  // torch's average_attn_weights
};

// A per-head weight's name: "alibi_slopes", "sinks" (MhaWeights' members; the state_dict's arrays).
constexpr const char* per_head_weight_name(PerHeadTensor t) { return t == PerHeadTensor::alibi ? "alibi_slopes" : "sinks"; }

// The sizes of a layer, from checked weights.
struct MhaDims {
  int64_t embed_dim = 0, num_heads = 0, kv_heads = 0, kdim = 0, vdim = 0;
  bool bias = true;
  bool has_sinks = false, has_alibi = false;  // MhaWeights::sinks, alibi_slopes given
  int64_t head_dim() const { return embed_dim / num_heads; }
  int64_t kv_dim() const { return kv_heads * head_dim(); }  // width of the projected key and value
};

// The sizes of one call, from checked inputs.
struct MhaCall {
  int64_t batch = 0, seq_q = 0, seq_k = 0;
  bool self_attention = false;  // key and value are the query
  // The call's one alignment (causal's when causal is set, else MhaInputs::align or bottom-right) and
  // its diagonal offset: query i sits at key i + diagonal_offset (0 or seq_k - seq_q).
  Align align = Align::bottom_right;
  int64_t diagonal_offset() const { return align == Align::top_left ? 0 : seq_k - seq_q; }
};

// Checks the weights (E % H == 0, H % kv_heads == 0, every array's size, finite sinks and ALiBi
// slopes, no product of sizes past 2^60 values); throws Error naming the array with the expected and
// given sizes.
MhaDims check_mha_weights(const MhaWeights& weights);

// Checks the inputs against the layer's sizes (query, key, value, key_padding_mask, attn_mask, the
// options (as attention() checks them); every product of sizes the
// layer computes, the weights P's when need_weights, at most 2^60 values) and works out
// self-attention and the alignment; throws Error naming the array or option.
MhaCall check_mha_inputs(const MhaDims& dims, const MhaInputs& inputs);

}  // namespace vkattn
