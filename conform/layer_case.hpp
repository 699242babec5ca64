// One multi-head attention layer problem (vkattn::MultiHeadAttention) as a conformance case: the
// projections, head split and merge and output projection on top of either attention path, against
// the fp64 reference layer (reference::multi_head_attention). Like AttentionCase, the `vkattn
// conform` command and the doctest suite (tests/conformance_mha.cpp) run the same cases
// (catalog.hpp's "layer" section).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/case_modifiers.hpp"
#include "conform/case_runner.hpp"

namespace vkattn::conform {

struct LayerCase {
  DType dtype = DType::f32;
  int64_t embed = 32, heads = 4;
  int64_t kv_heads = 0, kdim = 0, vdim = 0;  // 0: heads, embed, embed (MhaWeights' defaults)
  bool bias = true;
  int64_t batch = 2, seq_q = 7, seq_k = 7;
  bool self_attention = true;  // key = value = query (seq_k is then seq_q)
  Causal causal = Causal::none;
  // Batch 0 hides the keys after Sk/2; batch 1, when there is one, hides every key.
  bool padding = false;
  bool attn_mask = false;  // an additive (Sq, Sk) f32 mask with about a fifth of it -inf
  // The score modifiers (case_modifiers.hpp): options of the call, and the per-head ones weights of
  // the layer (draw_layer_weights).
  CaseModifiers modifiers;
  bool need_weights = false, average = true;
  // Run on the fused path only: the unfused path skips it (a slow case whose subject, the
  // projections, does not depend on the attention path).
  bool fused_only = false;
  uint64_t seed = 1;
};

// One line with every field that matters, the seed included.
std::string describe(const LayerCase& c);

// The features a case exercises, as (group, value) pairs for `vkattn conform`'s tables: "dtype", and
// under "layer": self / cross, kdim/vdim != embed, GQA, causal, key padding, attn_mask, no bias,
// weights per head / averaged, grid beyond 65535, and the score modifiers.
std::vector<std::pair<std::string, std::string>> features(const LayerCase& c);

// Runs `c` on `context` along `options.path` and compares the layer's output (and weights, when
// asked for) with the fp64 reference layer: output error relative to max|out| within
// tolerance_for(dtype).out; weights exactly 0 where the reference's are, else within the same
// tolerance. On the fused path, which cannot compute the weights, a case with need_weights passes
// when the layer refuses it with a clear Error. Never throws for a failing case.
CaseResult run_layer_case(Context& context, const LayerCase& c, const RunOptions& options);

}  // namespace vkattn::conform
