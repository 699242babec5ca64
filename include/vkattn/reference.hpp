// The fp64 CPU reference: the same semantics as the Vulkan kernels (the contract: docs/semantics.md), computed in double
// precision from the f32 values it is given. Feed it the inputs already rounded to the storage dtype
// (vkattn::round_to) to compare with a GPU result computed in f16 or bf16.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vkattn/per_head.hpp"
#include "vkattn/types.hpp"

namespace vkattn::reference {

// The per-head tensors (base PerHeadValues, vkattn/per_head.hpp: `alibi_layout` and `alibi`, ...) are
// score modifiers (docs/semantics.md, "Score modifiers").
struct Inputs : PerHeadValues {
  // Element i of each span is the element at index i of the layout (strides and offsets apply);
  // dtype in the layouts is only checked for agreement, the values are already f32.
  TensorLayout q_layout, k_layout, v_layout;
  std::span<const float> q, k, v;
  std::optional<MaskLayout> mask_layout;
  std::span<const float> mask;  // boolean masks: nonzero = attend
  std::span<const int32_t> kv_lengths;  // empty = no key padding; else one per batch
  AttentionOptions options;
  // Also return the attention weights P (what the textbook API returns beside O).
  bool weights = false;
};

struct Outputs {
  int64_t batch = 0, heads = 0, seq_q = 0, dim_v = 0;
  std::vector<double> out;  // (batch, heads, seq_q, dim_v), dense
  std::vector<double> lse;  // (batch, heads, seq_q), dense; -inf for fully masked rows (the sink's logit where the head has one)
  // With Inputs::weights: (batch, heads, seq_q, seq_k), dense; softmax weights, exactly 0 for masked
  // keys and for every key of a fully masked row. Dropout does not touch them: with
  // AttentionOptions::dropout, O is (P∘Z)·V (Z = keep/(1 - p), vkattn/dropout.hpp) and these are P.
  int64_t seq_k = 0;
  std::vector<double> weights;
  double at(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return out[static_cast<std::size_t>(((b * heads + h) * seq_q + i) * dim_v + d)];
  }
};

// Checks the arguments like the GPU path does (throws vkattn::Error), then computes O and LSE.
// `rows`, when given, restricts the work to those query rows (all batches and heads); other rows of
// the outputs are left NaN. It lets tools check a sample of a large problem.
Outputs attention(const Inputs& inputs, std::span<const int64_t> rows = {});

}  // namespace vkattn::reference
