#include "heatmap.hpp"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "vkattn/error.hpp"

namespace vkattn::heatmap {
namespace {

// viridis sampled at 16 evenly spaced points (matplotlib's table).
constexpr uint8_t kViridis[16][3] = {
    {68, 1, 84},    {72, 26, 108},  {71, 47, 125},  {65, 68, 135},  {57, 86, 140},   {49, 104, 142},
    {42, 120, 142}, {35, 136, 142}, {31, 152, 139}, {34, 168, 132}, {53, 183, 121},  {84, 197, 104},
    {122, 209, 81}, {165, 219, 54}, {210, 226, 27}, {253, 231, 37},
};
constexpr uint8_t kNonFinite[3] = {255, 0, 255};
constexpr uint8_t kBackground[3] = {255, 255, 255};
constexpr uint8_t kInk[3] = {0, 0, 0};
constexpr int kFontScale = 2;

// A 5x7 bitmap font: each row is 5 bits, bit 4 the leftmost column.
struct Glyph {
  char c;
  uint8_t rows[7];
};
constexpr Glyph kFont[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}}, {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}},
    {'e', {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}}, {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
    {'+', {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}},
};

const Glyph* glyph(char c) {
  for (const Glyph& g : kFont)
    if (g.c == c) return &g;
  return nullptr;
}

int panel_size(int n) {
  if (n < 128) return n * ((128 + n - 1) / n);
  return std::min(n, 512);
}

class Canvas {
 public:
  explicit Canvas(Image& image) : image_(image) {}
  void set(int x, int y, const uint8_t rgb[3]) {
    if (x < 0 || y < 0 || x >= image_.width || y >= image_.height) return;  // text may be clipped
    std::memcpy(&image_.rgb[(static_cast<std::size_t>(y) * image_.width + x) * 3], rgb, 3);
  }
  // Draws `text` with its top-left corner at (x, y); characters without a glyph are left blank.
  void text(int x, int y, const std::string& text) {
    for (char c : text) {
      if (const Glyph* g = glyph(c)) {
        for (int row = 0; row < 7; ++row)
          for (int col = 0; col < 5; ++col)
            if (g->rows[row] & (0x10 >> col))
              for (int dy = 0; dy < kFontScale; ++dy)
                for (int dx = 0; dx < kFontScale; ++dx)
                  set(x + col * kFontScale + dx, y + row * kFontScale + dy, kInk);
      }
      x += 6 * kFontScale;
    }
  }

 private:
  Image& image_;
};

void check_sizes(std::span<const float> weights, int heads, int seq_q, int seq_k) {
  (void)layout(heads, seq_q, seq_k);
  const uint64_t count = static_cast<uint64_t>(heads) * static_cast<uint64_t>(seq_q) * static_cast<uint64_t>(seq_k);
  if (weights.size() != count)
    throw Error("heatmap: " + std::to_string(weights.size()) + " weights do not match heads " + std::to_string(heads) +
                " x seq_q " + std::to_string(seq_q) + " x seq_k " + std::to_string(seq_k));
}

// libpng reports errors through a callback that must not return: it records the message and
// longjmps back to write_rows, which holds only trivially destructible locals.
struct PngState {
  char message[256];
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message ? message : "libpng error");
  png_longjmp(png, 1);
}
void on_png_warning(png_structp, png_const_charp) {}

bool write_rows(std::FILE* file, const Image* image, png_text* texts, int text_count, PngState* state) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, state, on_png_error, on_png_warning);
  if (!png) {
    std::snprintf(state->message, sizeof state->message, "png_create_write_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(state->message, sizeof state->message, "png_create_info_struct failed");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image->width), static_cast<png_uint_32>(image->height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (text_count > 0) png_set_text(png, info, texts, text_count);
  png_write_info(png, info);
  for (int y = 0; y < image->height; ++y)
    png_write_row(png, image->rgb.data() + static_cast<std::size_t>(y) * image->width * 3);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

void colormap(float t, uint8_t rgb[3]) {
  if (!(t > 0.0f)) t = 0.0f;  // also NaN
  if (t > 1.0f) t = 1.0f;
  const float x = t * 15.0f;
  const int i = std::min(static_cast<int>(x), 14);
  const float f = x - static_cast<float>(i);
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<uint8_t>(std::lround(kViridis[i][c] + f * (kViridis[i + 1][c] - kViridis[i][c])));
}

Layout layout(int heads, int seq_q, int seq_k) {
  if (heads <= 0) throw Error("heatmap: no heads to draw (heads " + std::to_string(heads) + ")");
  if (heads > kMaxHeads)
    throw Error("heatmap: " + std::to_string(heads) + " heads, at most " + std::to_string(kMaxHeads) + " can be drawn");
  if (seq_q <= 0 || seq_k <= 0)
    throw Error("heatmap: empty attention matrix (seq_q " + std::to_string(seq_q) + ", seq_k " + std::to_string(seq_k) + ")");
  Layout l;
  l.panel_width = panel_size(seq_k);
  l.panel_height = panel_size(seq_q);
  l.columns = std::min(heads, kMaxColumns);
  l.rows = (heads + l.columns - 1) / l.columns;
  l.width = 2 * kMargin + l.columns * l.panel_width + (l.columns - 1) * kGap + kBarGap + kBarWidth + kBarLabelWidth;
  l.height = 2 * kMargin + l.rows * (kLabelHeight + l.panel_height) + (l.rows - 1) * kGap;
  return l;
}

Image render(std::span<const float> weights, int heads, int seq_q, int seq_k) {
  check_sizes(weights, heads, seq_q, seq_k);
  const Layout l = layout(heads, seq_q, seq_k);

  float max_weight = 0.0f;
  for (float w : weights)
    if (std::isfinite(w)) max_weight = std::max(max_weight, w);
  const float scale = max_weight > 0.0f ? 1.0f / max_weight : 1.0f;

  Image image;
  image.width = l.width;
  image.height = l.height;
  image.rgb.resize(static_cast<std::size_t>(l.width) * l.height * 3);
  for (std::size_t i = 0; i < image.rgb.size(); i += 3) std::memcpy(&image.rgb[i], kBackground, 3);
  Canvas canvas(image);

  // Source index ranges per panel pixel: one token when upscaling, several (max-pooled) when not.
  auto ranges = [](int n, int pixels) {
    std::vector<std::pair<int, int>> r(static_cast<std::size_t>(pixels));
    for (int p = 0; p < pixels; ++p) {
      const int lo = static_cast<int>(static_cast<int64_t>(p) * n / pixels);
      const int hi = std::max(lo + 1, static_cast<int>(static_cast<int64_t>(p + 1) * n / pixels));
      r[static_cast<std::size_t>(p)] = {lo, hi};
    }
    return r;
  };
  const auto q_ranges = ranges(seq_q, l.panel_height);
  const auto k_ranges = ranges(seq_k, l.panel_width);

  for (int h = 0; h < heads; ++h) {
    const int x0 = kMargin + (h % l.columns) * (l.panel_width + kGap);
    const int y0 = kMargin + (h / l.columns) * (kLabelHeight + l.panel_height + kGap);
    std::string label = "h";  // not "h" + to_string(h): GCC 12 warns falsely (-Wrestrict) on that
    label += std::to_string(h);
    canvas.text(x0, y0 + 1, label);
    const int py0 = y0 + kLabelHeight;
    const float* head = weights.data() + static_cast<std::size_t>(h) * seq_q * seq_k;
    for (int y = 0; y < l.panel_height; ++y) {
      const auto [q0, q1] = q_ranges[static_cast<std::size_t>(y)];
      for (int x = 0; x < l.panel_width; ++x) {
        const auto [k0, k1] = k_ranges[static_cast<std::size_t>(x)];
        float value = -INFINITY;
        bool finite = true;
        for (int q = q0; q < q1 && finite; ++q)
          for (int k = k0; k < k1; ++k) {
            const float w = head[static_cast<std::size_t>(q) * seq_k + k];
            if (!std::isfinite(w)) {
              finite = false;
              break;
            }
            value = std::max(value, w);
          }
        uint8_t rgb[3];
        if (finite) colormap(value * scale, rgb);
        else std::memcpy(rgb, kNonFinite, 3);
        canvas.set(x0 + x, py0 + y, rgb);
      }
    }
  }

  // The colour bar beside the panels: max at the top, 0 at the bottom, labelled at both ends.
  const int bar_x = kMargin + l.columns * l.panel_width + (l.columns - 1) * kGap + kBarGap;
  const int bar_top = kMargin + kLabelHeight;
  const int bar_bottom = l.height - kMargin - 1;
  const int bar_height = bar_bottom - bar_top + 1;
  for (int y = bar_top; y <= bar_bottom; ++y) {
    uint8_t rgb[3];
    colormap(bar_height > 1 ? static_cast<float>(bar_bottom - y) / static_cast<float>(bar_height - 1) : 1.0f, rgb);
    for (int x = bar_x; x < bar_x + kBarWidth; ++x) canvas.set(x, y, rgb);
  }
  char top[32];
  std::snprintf(top, sizeof top, "%.3g", max_weight > 0.0f ? static_cast<double>(max_weight) : 1.0);
  const int label_x = bar_x + kBarWidth + 6;
  canvas.text(label_x, bar_top, top);
  canvas.text(label_x, bar_bottom - 7 * kFontScale + 1, "0");
  return image;
}

void write_png(const std::string& path, std::span<const float> weights, int heads, int seq_q, int seq_k,
               std::span<const std::string> titles) {
  if (!titles.empty() && titles.size() != static_cast<std::size_t>(std::max(heads, 0)))
    throw Error(path + ": " + std::to_string(titles.size()) + " titles for " + std::to_string(heads) + " heads");
  Image image;
  try {
    image = render(weights, heads, seq_q, seq_k);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }

  std::vector<std::string> keys;
  std::vector<png_text> texts;
  keys.reserve(titles.size());
  for (std::size_t i = 0; i < titles.size(); ++i) keys.push_back("Head " + std::to_string(i));
  for (std::size_t i = 0; i < titles.size(); ++i) {
    png_text t{};
    t.compression = PNG_TEXT_COMPRESSION_NONE;
    t.key = const_cast<char*>(keys[i].c_str());
    t.text = const_cast<char*>(titles[i].c_str());
    t.text_length = titles[i].size();
    texts.push_back(t);
  }

  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
  PngState state{};
  const bool ok = write_rows(file, &image, texts.data(), static_cast<int>(texts.size()), &state);
  const bool closed = std::fclose(file) == 0;
  if (!ok || !closed) {
    std::remove(path.c_str());
    throw Error(path + ": cannot write PNG: " + (ok ? std::string("write error") : std::string(state.message)));
  }
}

}  // namespace vkattn::heatmap
