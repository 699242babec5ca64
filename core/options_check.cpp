// The rules of AttentionOptions (the contract: docs/semantics.md and "Score modifiers").
#include "options_check.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string float_str(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

void check_causal(const AttentionOptions& o) {
  if (o.causal != Causal::none && o.causal != Causal::top_left && o.causal != Causal::bottom_right)
    throw Error("causal: invalid value " + std::to_string(static_cast<int>(o.causal)));
}

CheckedOptions check_score_options(const AttentionOptions& o) {
  CheckedOptions checked;
  if (o.align && *o.align != Align::top_left && *o.align != Align::bottom_right)
    throw Error("align: invalid value " + std::to_string(static_cast<int>(*o.align)));
  checked.align = o.align.value_or(Align::bottom_right);
  if (o.causal != Causal::none) {
    const Align causal_align = o.causal == Causal::top_left ? Align::top_left : Align::bottom_right;
    if (o.align && *o.align != causal_align)
      throw Error(std::string("align (") + to_string(*o.align) + ") must agree with causal (" + to_string(o.causal) +
                  ") or be absent: one alignment serves causal, the window and ALiBi");
    checked.align = causal_align;
  }
  if (o.window) {
    const Window& w = *o.window;
    if (w.left < -1 || w.right < -1)
      throw Error("window: (" + std::to_string(w.left) + ", " + std::to_string(w.right) +
                  ") sides must be >= 0, or -1 for unbounded");
    checked.window = w;
  }
  if (o.softcap) {
    const float c = *o.softcap;
    if (!std::isfinite(c) || !(c > 0.0f)) throw Error("softcap: must be finite and > 0, got " + float_str(c));
    // A cap flushed to 0 on a device would turn s / c into NaN for s = 0.
    if (c < std::numeric_limits<float>::min())
      throw Error("softcap: " + float_str(c) +
                  " is subnormal (below 1.17549e-38, the smallest normal f32), which devices may flush to 0");
  }
  return checked;
}

float checked_scale(const AttentionOptions& o, int64_t dim_qk) {
  if (!o.scale) return static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim_qk)));
  if (!std::isfinite(*o.scale)) throw Error("scale: must be finite, got " + float_str(*o.scale));
  return *o.scale;
}

}  // namespace vkattn::detail
