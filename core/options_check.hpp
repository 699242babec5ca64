// The checks of AttentionOptions, shared by every call that takes them: attention() and its sources
// (problem.cpp) and the multi-head layer (mha_types.cpp). One set of rules, one set of messages: a
// new option is checked here once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vkattn/types.hpp"

namespace vkattn::detail {

// The options' score modifiers, checked and resolved.
struct CheckedOptions {
  // The call's one alignment: causal's when causal is set, else options.align or bottom-right.
  Align align = Align::bottom_right;
  std::optional<Window> window;  // sides >= 0 or -1 (unbounded)
};

// The shortest text that reads back to `v` ("5", "1e+08", "3.4028235e+38", "nan", "inf"): how the
// options' messages print an f32 value.
std::string float_text(float v);

// Throws Error "causal: invalid value N" for a value outside the enum.
void check_causal(const AttentionOptions& options);

// Checks the score modifiers that are options (vkattn/score_options.hpp: each row's check: the
// window's sides, align a known value agreeing with causal, every value's range) and dropout's p
// (check_dropout, vkattn/dropout.hpp), and resolves the call's alignment; throws Error naming the
// option and its value. Every call that takes AttentionOptions runs it.
CheckedOptions check_score_options(const AttentionOptions& options);

// The call's scale: options.scale (finite, else Error "scale: ...") or 1/sqrt(dim_qk).
float checked_scale(const AttentionOptions& options, int64_t dim_qk);

}  // namespace vkattn::detail
