// The figures `vkattn bench` reports, by conventions that compare with published tables (the FLOPs of
// the visible (query, key) pairs, FlashAttention's count without a mask; bytes moved at least once).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// The (query, key) pairs a causal mask leaves visible in one (batch, head) of a seq_q x seq_k problem
// whose keys end at `keys` (seq_k, or a key length below it): query i sees keys
// [0, min(keys, i + 1 + off)), off = 0 top-left or seq_k - seq_q bottom-right. Counted exactly, so a
// rectangular causal problem (seq_q != seq_k, either alignment) is credited with the work it has,
// not with half a square.
inline double visible_pairs(int64_t seq_q, int64_t seq_k, Causal causal, int64_t keys) {
  keys = std::clamp<int64_t>(keys, 0, seq_k);
  if (causal == Causal::none) return static_cast<double>(seq_q) * static_cast<double>(keys);
  const int64_t off = causal == Causal::bottom_right ? seq_k - seq_q : 0;
  // Row i sees min(keys, max(0, i + 1 + off)) keys: 0 up to row -off-1, then a ramp of slope 1 from
  // row -off up to where it reaches `keys`, then `keys`. Summed in closed form (seq_q can be 10^6).
  const int64_t first = std::clamp<int64_t>(-off, 0, seq_q);            // first row that sees a key
  const int64_t full = std::clamp<int64_t>(keys - 1 - off, first, seq_q);  // first row that sees all
  const double ramp_rows = static_cast<double>(full - first);
  const double first_count = static_cast<double>(first + 1 + off);        // keys seen by row `first`
  const double ramp = ramp_rows * first_count + ramp_rows * (ramp_rows - 1) / 2;
  return ramp + static_cast<double>(seq_q - full) * static_cast<double>(keys);
}

// The visible pairs of one (batch, head) under causal and a sliding window, keys ending at `keys`: row
// by row where a window cuts the rows' starts (or ends without causal), else visible_pairs above.
inline double visible_pairs(const AttentionProblem& p, int64_t keys) {
  if (p.window_left < 0 && (p.causal != Causal::none || p.window_right < 0))
    return visible_pairs(p.seq_q, p.seq_k, p.causal, keys);
  double pairs = 0;
  for (int64_t i = 0; i < p.seq_q; ++i)
    pairs += static_cast<double>(std::max<int64_t>(0, std::min(keys, p.visible_key_end(i)) - p.visible_key_begin(i)));
  return pairs;
}

// 2·(Dqk+Dv) FLOPs per visible (query, key) pair: QKᵀ and P·V, one multiply-add each per dim. Without
// a mask that is FlashAttention's 4·B·H·Sq·Sk·D; with causal it counts the visible pairs exactly in
// either alignment — for Sq == Sk that is Sq·(Sq+1)/2 per head, within 1/Sq of FlashAttention's
// "halved" square; a sliding window counts its band. `kv_lengths` (per batch, empty = every key)
// counts key padding the same way.
inline double attention_flops(const AttentionProblem& p, const std::vector<int64_t>& kv_lengths = {}) {
  double pairs = 0;
  if (kv_lengths.empty())
    pairs = static_cast<double>(p.batch) * visible_pairs(p, p.seq_k);
  else
    for (const int64_t keys : kv_lengths) pairs += visible_pairs(p, keys);
  return 2.0 * static_cast<double>(p.heads) * pairs * static_cast<double>(p.dim_qk + p.dim_v);
}

// Q, K and V read once, O written once: the least traffic any implementation needs.
inline double attention_bytes(const AttentionProblem& p) {
  const double q = static_cast<double>(p.batch * p.heads * p.seq_q * p.dim_qk);
  const double k = static_cast<double>(p.batch * p.kv_heads * p.seq_k * p.dim_qk);
  const double v = static_cast<double>(p.batch * p.kv_heads * p.seq_k * p.dim_v);
  const double o = static_cast<double>(p.batch * p.heads * p.seq_q * p.dim_v);
  return (q + k + v + o) * static_cast<double>(dtype_size(p.dtype));
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Input sets to rotate through so that small problems do not run from a warm last-level cache:
// enough to cover 256 MiB, at most 4.
inline int rotation_count(double bytes_per_set) {
  constexpr double kCover = 256.0 * 1024 * 1024;
  if (bytes_per_set <= 0) return 1;
  const double n = kCover / bytes_per_set;
  return n >= 4.0 ? 4 : std::max(1, static_cast<int>(std::ceil(n)));
}

}  // namespace vkattn::cli
