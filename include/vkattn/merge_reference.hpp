// The fp64 reference of merging attention states (vkattn/merge_states.hpp; docs/semantics.md,
// "Merging attention states"): what the device's merge is checked against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace vkattn::reference {

struct MergedStates {
  std::vector<double> o;    // rows x dim
  std::vector<double> lse;  // rows
};

// Parts i = 0 .. N-1, each `rows` rows of `dim` values (o[i], row-major) and their LSE (lse[i]):
//   m = max_i LSE_i,  T = Σ_i e^(LSE_i - m),  LSE = m + log T,  O = Σ_i e^(LSE_i - m) / T · O_i,
// a part of LSE -inf adding nothing (its O not read); a row with every LSE -inf gives O = 0 and
// LSE = -inf. Throws Error when the parts' sizes disagree.
MergedStates merge_attention_states(std::span<const std::vector<double>> o, std::span<const std::vector<double>> lse,
                                    int64_t rows, int64_t dim);

}  // namespace vkattn::reference
