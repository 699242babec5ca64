// The layer's two masks as attention takes one: key_padding_mask (true = ignore) becomes a boolean
// (B, 1, Sq, Sk) mask broadcast over rows (stride 0); with an attn_mask both merge into one f32
// additive (B or 1, 1, Sq, Sk) mask. Shared by the forward (mha.cpp) and backward (mha_backward.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "vkattn/mha_types.hpp"
#include "vkattn/types.hpp"

namespace vkattn::detail {

struct MhaMask {
  std::optional<MaskLayout> layout;  // none: no mask
  std::vector<std::byte> bytes;      // the mask's contents at `layout`
};

// `inputs` checked (check_mha_inputs) for `call`.
MhaMask merge_mha_masks(const MhaInputs& inputs, const MhaCall& call);

}  // namespace vkattn::detail
