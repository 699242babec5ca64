// The figures `vkattn bench` reports, by the conventions DESIGN.md §7 fixes so they compare with
// published tables (FlashAttention's FLOP count; bytes moved at least once).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// 4·B·H·Sq·Sk·D (2·B·H·Sq·Sk·(Dqk+Dv) when the dims differ, which is the same formula), halved for
// causal attention with Sq == Sk (FlashAttention counts it that way even though the diagonal tiles
// are not exactly half).
inline double attention_flops(const AttentionProblem& p) {
  double flops = 2.0 * static_cast<double>(p.batch * p.heads) * static_cast<double>(p.seq_q) *
                 static_cast<double>(p.seq_k) * static_cast<double>(p.dim_qk + p.dim_v);
  if (p.causal != Causal::none && p.seq_q == p.seq_k) flops /= 2.0;
  return flops;
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
