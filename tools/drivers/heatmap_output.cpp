#include "heatmap_output.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "heatmap.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {

int64_t heatmap_heads(int64_t heads) { return std::min<int64_t>(heads, heatmap::kMaxHeads); }

void check_heatmap(const std::string& path, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k) {
  if (batch < 1) throw Error(path + ": --heatmap draws batch element 0, but the batch is empty");
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (seq_q > kIntMax || seq_k > kIntMax)
    throw Error(path + ": --heatmap: seq_q " + std::to_string(seq_q) + " or seq_k " + std::to_string(seq_k) +
                " is too long to draw");
  try {
    heatmap::layout(static_cast<int>(heatmap_heads(heads)), static_cast<int>(seq_q), static_cast<int>(seq_k));
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

void stage_heatmap(OutputFiles& files, const std::string& path, std::span<const float> batch0, int64_t heads,
                   int64_t seq_q, int64_t seq_k) {
  const int64_t drawn = heatmap_heads(heads);
  std::vector<std::string> titles;
  for (int64_t h = 0; h < drawn; ++h) titles.push_back("batch 0, head " + std::to_string(h));
  const std::span<const float> panels = batch0.first(static_cast<std::size_t>(drawn * seq_q * seq_k));
  files.stage_with(path, [&](const std::string& temp) {
    heatmap::write_png(temp, panels, static_cast<int>(drawn), static_cast<int>(seq_q), static_cast<int>(seq_k), titles);
  });
}

}  // namespace vkattn::cli
