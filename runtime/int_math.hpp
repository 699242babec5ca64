// Integer helpers the planners and the command lists share (sizes and counts are unsigned 64-bit).
#pragma once

#include <cstdint>

namespace vkattn::detail {

// ceil(a / b) for b > 0.
constexpr uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// The least multiple of `alignment` (> 0) that is >= v.
constexpr uint64_t align_up(uint64_t v, uint64_t alignment) { return ceil_div(v, alignment) * alignment; }

}  // namespace vkattn::detail
