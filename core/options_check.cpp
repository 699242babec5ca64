// The rules of AttentionOptions (the contract: docs/semantics.md and "Score modifiers").
#include "options_check.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <sstream>
#include <string>

#include "vkattn/dropout.hpp"
#include "vkattn/error.hpp"
#include "vkattn/score_options.hpp"

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

std::string float_text(float v) {
  std::array<char, 32> buf{};
  const auto result = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), result.ptr);
}

void check_causal(const AttentionOptions& o) {
  if (o.causal != Causal::none && o.causal != Causal::top_left && o.causal != Causal::bottom_right)
    throw Error("causal: invalid value " + std::to_string(static_cast<int>(o.causal)));
}

CheckedOptions check_score_options(const AttentionOptions& o) {
  for (const ScoreOption& option : score_options())
    if (option.is_set(o)) option.check(o);
  if (o.dropout) check_dropout(*o.dropout);
  CheckedOptions checked;
  checked.align = o.align.value_or(Align::bottom_right);
  if (o.causal != Causal::none) checked.align = o.causal == Causal::top_left ? Align::top_left : Align::bottom_right;
  checked.window = o.window;
  return checked;
}

float checked_scale(const AttentionOptions& o, int64_t dim_qk) {
  if (!o.scale) return static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim_qk)));
  if (!std::isfinite(*o.scale)) throw Error("scale: must be finite, got " + float_str(*o.scale));
  return *o.scale;
}

}  // namespace vkattn::detail
