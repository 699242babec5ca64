// The table of score options (vkattn/score_options.hpp): one row per option of AttentionOptions that
// modifies scores. Adding one is its row here; everything that lists, checks, prints or applies the
// options on the host reads the rows.
#include "vkattn/score_options.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "options_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace {

using detail::float_text;  // the shortest text that reads back to the value

void check_window(const AttentionOptions& o) {
  const Window& w = *o.window;
  if (w.left < -1 || w.right < -1)
    throw Error("window: (" + std::to_string(w.left) + ", " + std::to_string(w.right) +
                ") sides must be >= 0, or -1 for unbounded");
}

void check_align(const AttentionOptions& o) {
  const Align a = *o.align;
  if (a != Align::top_left && a != Align::bottom_right)
    throw Error("align: invalid value " + std::to_string(static_cast<int>(a)));
  if (o.causal == Causal::none) return;
  const Align causal_align = o.causal == Causal::top_left ? Align::top_left : Align::bottom_right;
  if (a != causal_align)
    throw Error(std::string("align (") + to_string(a) + ") must agree with causal (" + to_string(o.causal) +
                ") or be absent: one alignment serves causal, the window and ALiBi");
}

void check_softcap(const AttentionOptions& o) {
  const float c = *o.softcap;
  if (!std::isfinite(c) || !(c > 0.0f)) throw Error("softcap: must be finite and > 0, got " + float_text(c));
  // A cap flushed to 0 on a device would turn s / c into NaN for s = 0.
  if (c < std::numeric_limits<float>::min())
    throw Error("softcap: " + float_text(c) +
                " is subnormal (below 1.17549e-38, the smallest normal f32), which devices may flush to 0");
}

// c·tanh(s/c) on finite scores; NaN and Inf (from NaN/Inf inputs) propagate as they are.
double softcap_score(double s, double c) { return std::isfinite(s) ? c * std::tanh(s / c) : s; }

// Its derivative, 1 - tanh²(s/c); 1 where the step leaves the score as it is (NaN, Inf).
double softcap_derivative(double s, double c) {
  if (!std::isfinite(s)) return 1.0;
  const double t = std::tanh(s / c);
  return 1.0 - t * t;
}

const std::array kScoreOptions{
    ScoreOption{.name = "window",
                .help = "Sliding window L:R: key j is visible to query i iff i+off-L <= j <= i+off+R (each side >= 0, "
                        "or -1 for unbounded; e.g. 4096:0 with causal)",
                .member = &AttentionOptions::window,
                .check = check_window},
    ScoreOption{.name = "align",
                .help = "Diagonal of the window and ALiBi without causal (default bottom-right: off = seq_k - seq_q; "
                        "top-left: off = 0); with causal it must agree or be absent",
                .member = &AttentionOptions::align,
                .check = check_align},
    ScoreOption{.name = "softcap",
                .help = "Logit softcap C > 0: s = C*tanh(s/C) (Gemma 2)",
                .member = &AttentionOptions::softcap,
                .check = check_softcap,
                .score = softcap_score,
                .score_derivative = softcap_derivative},
};

std::string value_text(float v) { return float_text(v); }
std::string value_text(const Window& w) { return std::to_string(w.left) + ":" + std::to_string(w.right); }
std::string value_text(Align a) { return to_string(a); }

}  // namespace

bool ScoreOption::is_set(const AttentionOptions& options) const {
  return std::visit([&](auto m) { return (options.*m).has_value(); }, member);
}

void ScoreOption::copy(const AttentionOptions& from, AttentionOptions& to) const {
  std::visit([&](auto m) { to.*m = from.*m; }, member);
}

std::string ScoreOption::text(const AttentionOptions& options) const {
  return std::visit([&](auto m) { return (options.*m) ? value_text(*(options.*m)) : std::string(); }, member);
}

std::string ScoreOption::feature(const AttentionOptions& options) const {
  if (!is_set(options) || std::holds_alternative<std::optional<Align> AttentionOptions::*>(member)) return "";
  if (const auto* window = std::get_if<std::optional<Window> AttentionOptions::*>(&member)) {
    const Window& w = *(options.**window);
    return std::string(name) + (w.left >= 0 && w.right >= 0 ? ", two-sided" : ", one-sided");
  }
  return std::string(name);
}

std::span<const ScoreOption> score_options() { return kScoreOptions; }

std::string score_options_text(const AttentionOptions& options, std::string_view separator) {
  std::string text;
  for (const ScoreOption& o : score_options())
    if (o.is_set(options)) text.append(" ").append(o.name).append(separator).append(o.text(options));
  return text;
}

void copy_score_options(const AttentionOptions& from, AttentionOptions& to) {
  for (const ScoreOption& o : score_options()) o.copy(from, to);
}

}  // namespace vkattn
