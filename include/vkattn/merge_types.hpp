// The shapes of merging attention states (vkattn/merge_states.hpp runs it; vkattn/merge_reference.hpp
// is its fp64 reference) and their checks, which need no device.
#pragma once

#include <cstdint>

#include "vkattn/types.hpp"

namespace vkattn {

// `parts` partial outputs, each in `part`'s layout (batch, heads, rows, dim; any strides, each in its
// own buffer), merged into `out` (the same shape and dtype, its own strides). Every part's LSE, and
// the merged LSE when asked for, are dense f32 (batch, heads, rows), as an attention call's lse.
struct MergeStatesSpec {
  int64_t parts = 0;  // 1 to kMaxMergeParts
  TensorLayout part;
  TensorLayout out;
  bool lse = false;  // write the merged LSE too
};

// The most parts one merge takes (merge groups of them, then their results: the same merge, rounded
// twice).
inline constexpr int64_t kMaxMergeParts = 64;

// Throws Error naming the field: parts outside 1..kMaxMergeParts, a layout with a size below 1 or a
// negative stride, out's shape or dtype not part's.
void check_merge_states(const MergeStatesSpec& spec);

}  // namespace vkattn
