// The sliding window's rule (docs/semantics.md, "Score modifiers") for the host's int64 arithmetic, shared by the
// call's problem and the layer's reference: key j is visible to the row whose diagonal is d = i + off
// iff d - left <= j <= d + right. Sides run up to 2^63 - 1, so each is compared with the room it has
// before anything is added (d + right + 1 would overflow for the largest).
#pragma once

#include <algorithm>
#include <cstdint>

namespace vkattn::detail {

// First key inside a left side (>= 0) of the row at diagonal d, clamped to [0, seq_k].
inline int64_t window_key_begin(int64_t d, int64_t left, int64_t seq_k) {
  if (left >= d) return 0;
  return std::min(d - left, seq_k);
}

// One past the last key inside a right side (>= 0) of the row at diagonal d, clamped to [0, seq_k].
inline int64_t window_key_end(int64_t d, int64_t right, int64_t seq_k) {
  if (right >= seq_k - d) return seq_k;
  return std::max<int64_t>(d + right + 1, 0);
}

}  // namespace vkattn::detail
