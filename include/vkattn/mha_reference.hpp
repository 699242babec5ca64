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

}  // namespace vkattn::reference
