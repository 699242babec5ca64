// `--heatmap heads.png` of `run` and `mha`: the attention weights of batch element 0, one panel per
// head for at most the first heatmap::kMaxHeads heads. Checked before the run (so an empty problem
// fails before any work), written through OutputFiles (so it appears only when everything succeeded).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "output_files.hpp"

namespace vkattn::cli {

// The number of heads drawn: min(heads, heatmap::kMaxHeads).
int64_t heatmap_heads(int64_t heads);

// Throws vkattn::Error naming `path` when there is nothing to draw (batch, heads, seq_q or seq_k 0)
// or a dimension beyond what the image can address.
void check_heatmap(const std::string& path, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k);

// `batch0` holds batch 0's weights (heads, seq_q, seq_k), at least heatmap_heads(heads) of them.
void stage_heatmap(OutputFiles& files, const std::string& path, std::span<const float> batch0, int64_t heads,
                   int64_t seq_q, int64_t seq_k);

}  // namespace vkattn::cli
