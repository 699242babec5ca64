// The inputs of `vkattn mha`: the layer's state_dict (.npz) and its batch-first .npy inputs, read,
// converted and checked against each other before any device is touched, so a bad file or a shape
// that does not agree fails fast, with one message, and writes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "modifier_options.hpp"
#include "vkattn/mha_types.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// What the user passed (paths and flag values as typed; empty = absent).
struct MhaOptions {
  std::string weights, query, key, value, key_padding_mask, attn_mask;
  std::string out, attn_weights, heatmap;
  std::string grad_out, grads_out;  // the backward: dY (.npy) in, every gradient (.npz) out
  int64_t heads = 0, kv_heads = 0;  // kv_heads 0: from the weights
  std::string causal = "none";
  AttentionOptions modifiers;  // the modifier options as parsed (modifier_options.hpp)
  std::string dtype;  // empty = the query's dtype
  std::string path = "auto";
  std::string device;
  bool average_weights = false;
};

struct MhaLoaded {
  MhaWeights weights;
  int64_t batch = 0, seq_q = 0, seq_k = 0;
  std::vector<float> query, key, value;  // key and value empty: self-attention (seq_k = seq_q)
  std::vector<uint8_t> key_padding_mask;  // (batch, seq_k), nonzero = ignore; empty when absent
  std::vector<float> attn_mask;           // (seq_q, seq_k) additive; empty when absent
  AttentionOptions options;  // --causal and the modifier options
  DType dtype = DType::f32;
  bool out_f16 = false;  // write O as '<f2' (the query was '<f2' and the dtype is f16)

  // The layer's inputs, viewing this object's vectors (which must outlive the result).
  MhaInputs inputs() const;
};

// Reads and checks everything; throws vkattn::Error naming the file or the argument.
MhaLoaded load_mha_inputs(const MhaOptions& options);

}  // namespace vkattn::cli
