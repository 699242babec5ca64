// The sliding window on the command line, "L:R" (docs/semantics.md, "Score modifiers"): the left and right sides
// of the visible band around the diagonal, each an integer >= 0 or -1 for unbounded ("4096:0" is
// Mistral's, "-1:0" causal). Shared by the commands that take --window.
#pragma once

#include <string>
#include <string_view>

#include "vkattn/types.hpp"

namespace vkattn::cli {

// Parses `text` as L:R; throws vkattn::Error naming `option` and what is wrong with the value.
Window parse_window(std::string_view text, const std::string& option = "--window");

}  // namespace vkattn::cli
