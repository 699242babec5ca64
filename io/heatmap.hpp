// Attention-weight heatmaps as one RGB PNG: a grid of per-head panels (up to 16 heads, at most 4
// columns), each panel labelled "h<index>" above it, and a colour-scale bar on the right mapping 0 (bottom)
// to the largest finite weight (top, its value printed beside the bar).
//
// Panel size, per axis (rows = seq_q, columns = seq_k), for a dimension of n tokens:
//   n < 128        -> n * ceil(128 / n) pixels (nearest-neighbour upscaling, every token a block)
//   128 <= n <= 512 -> n pixels
//   n > 512        -> 512 pixels, each pixel the maximum of the tokens it covers (so peaks survive)
// Image size, with columns = min(heads, 4) and rows = ceil(heads / columns):
//   width  = 2 * kMargin + columns * panel_w + (columns - 1) * kGap + kBarGap + kBarWidth + kBarLabelWidth
//   height = 2 * kMargin + rows * (kLabelHeight + panel_h) + (rows - 1) * kGap
// Colours: a 16-anchor viridis table, linearly interpolated; weights <= 0 get the darkest colour and
// non-finite weights (NaN, inf) are drawn magenta, which viridis never produces.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vkattn::heatmap {

constexpr int kMaxHeads = 16;
constexpr int kMaxColumns = 4;
constexpr int kMargin = 8;
constexpr int kGap = 6;           // between panels
constexpr int kLabelHeight = 18;  // the "h<i>" strip above each panel (5x7 font at 2x, plus 4 px)
constexpr int kBarGap = 12;
constexpr int kBarWidth = 16;
constexpr int kBarLabelWidth = 66;  // room for 5 characters at 2x beside the bar

struct Layout {
  int panel_width = 0, panel_height = 0;
  int columns = 0, rows = 0;
  int width = 0, height = 0;
};

// The geometry described above; throws vkattn::Error for 0 or more than 16 heads or an empty axis.
Layout layout(int heads, int seq_q, int seq_k);

// An RGB image, 3 bytes per pixel, row-major.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

// Renders the heatmap. `weights` holds heads * seq_q * seq_k floats, (head, q, k) row-major.
// `titles`, when not empty, holds one string per head; they are stored as PNG tEXt chunks
// ("Head <i>") by write_png, while the drawn labels stay "h<i>".
Image render(std::span<const float> weights, int heads, int seq_q, int seq_k);

// Renders and writes the PNG. Errors (bad sizes, titles not one per head, a file that cannot be
// written) throw vkattn::Error naming the path; a partly written file is removed.
void write_png(const std::string& path, std::span<const float> weights, int heads, int seq_q, int seq_k,
               std::span<const std::string> titles = {});

// The colour of weight `t` in [0, 1] (clamped); used by the panels and the bar.
void colormap(float t, uint8_t rgb[3]);

}  // namespace vkattn::heatmap
