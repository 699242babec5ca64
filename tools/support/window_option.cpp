#include "window_option.hpp"

#include <charconv>

#include "cli_numbers.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

// One side: a decimal integer >= -1 (-1 = unbounded).
int64_t parse_side(std::string_view text, const char* side, const std::string& option) {
  if (text.empty()) throw Error(option + ": the " + side + " side is empty (give an integer >= 0, or -1 for unbounded)");
  const std::string syntax = integer_syntax_error(text, true);
  if (!syntax.empty()) throw Error(option + ": the " + side + " side " + syntax);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw Error(option + ": the " + side + " side '" + std::string(text) + "' is out of range");
  if (value < -1)
    throw Error(option + ": the " + side + " side " + std::to_string(value) + " must be >= 0, or -1 for unbounded");
  return value;
}

}  // namespace

Window parse_window(std::string_view text, const std::string& option) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos)
    throw Error(option + ": '" + std::string(text) +
                "' is not L:R (the window's left and right sides, each >= 0 or -1 for unbounded, e.g. 4096:0)");
  Window w;
  w.left = parse_side(text.substr(0, colon), "left", option);
  w.right = parse_side(text.substr(colon + 1), "right", option);
  return w;
}

}  // namespace vkattn::cli
