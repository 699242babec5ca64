// The fp64 CPU reference (the contract: README.md, "Semantics"). Deliberately the plainest possible loop nest: it is what the
// kernels are judged against, so it must be obviously right rather than fast.
#include "vkattn/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "score_rule.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::reference {

namespace {

void check_span(const char* name, std::size_t given, int64_t needed) {
  if (static_cast<int64_t>(given) < needed) {
    throw Error(std::string(name) + ": " + std::to_string(given) + " values given, layout needs " +
                std::to_string(needed));
  }
}

}  // namespace

Outputs attention(const Inputs& in, std::span<const int64_t> rows) {
  // Validate exactly like the GPU path: the output is the dense BHSD tensor this function returns.
  AttentionLayouts layouts;
  layouts.q = in.q_layout;
  layouts.k = in.k_layout;
  layouts.v = in.v_layout;
  layouts.out = TensorLayout::bhsd(in.q_layout.dtype, in.q_layout.batch, in.q_layout.heads, in.q_layout.seq,
                                   in.v_layout.dim);
  layouts.mask = in.mask_layout;
  layouts.has_kv_lengths = !in.kv_lengths.empty();
  layouts.has_lse = true;
  layouts.options = in.options;
  layouts.alibi = in.alibi_layout;
  layouts.sinks = in.sinks_layout;
  const AttentionProblem p = check_attention(layouts);

  check_span("q", in.q.size(), in.q_layout.required_elements());
  check_span("k", in.k.size(), in.k_layout.required_elements());
  check_span("v", in.v.size(), in.v_layout.required_elements());
  if (in.mask_layout) check_span("mask", in.mask.size(), in.mask_layout->required_elements());
  if (in.alibi_layout) check_span("alibi", in.alibi.size(), in.alibi_layout->required_elements());
  if (in.sinks_layout) check_span("sinks", in.sinks.size(), in.sinks_layout->required_elements());
  if (!in.kv_lengths.empty()) {
    if (static_cast<int64_t>(in.kv_lengths.size()) != p.batch) {
      throw Error("kv_lengths: " + std::to_string(in.kv_lengths.size()) + " values given, batch is " +
                  std::to_string(p.batch));
    }
    for (std::size_t b = 0; b < in.kv_lengths.size(); ++b) {
      const int32_t len = in.kv_lengths[b];
      if (len < 0 || len > p.seq_k) {
        throw Error("kv_lengths[" + std::to_string(b) + "] (" + std::to_string(len) + ") must be in [0, " +
                    std::to_string(p.seq_k) + "]");
      }
    }
  }
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] < 0 || rows[r] >= p.seq_q) {
      throw Error("rows[" + std::to_string(r) + "] (" + std::to_string(rows[r]) + ") must be in [0, " +
                  std::to_string(p.seq_q) + ")");
    }
  }

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Outputs o;
  o.batch = p.batch;
  o.heads = p.heads;
  o.seq_q = p.seq_q;
  o.dim_v = p.dim_v;
  o.out.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq_q * p.dim_v), nan);
  o.lse.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq_q), nan);
  o.seq_k = p.seq_k;
  if (in.weights) o.weights.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq_q * p.seq_k), nan);

  std::vector<int64_t> all_rows;
  if (rows.empty()) {
    all_rows.resize(static_cast<std::size_t>(p.seq_q));
    for (int64_t i = 0; i < p.seq_q; ++i) all_rows[static_cast<std::size_t>(i)] = i;
    rows = all_rows;
  }

  const double scale = static_cast<double>(p.scale);
  const double softcap = static_cast<double>(p.softcap);
  const int64_t off = p.diagonal_offset();
  const MaskLayout* mask = in.mask_layout ? &*in.mask_layout : nullptr;
  std::vector<int64_t> keys;   // visible key indices of the current row
  std::vector<double> scores;  // their scaled, biased scores
  std::vector<double> acc(static_cast<std::size_t>(p.dim_v));

  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t kv_len = in.kv_lengths.empty() ? p.seq_k : in.kv_lengths[static_cast<std::size_t>(b)];
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t g = h / p.group_size();
      const double slope =
          in.alibi_layout ? static_cast<double>(in.alibi[static_cast<std::size_t>(in.alibi_layout->index(b, h))]) : 0.0;
      const double sink = in.sinks_layout ? static_cast<double>(in.sinks[static_cast<std::size_t>(in.sinks_layout->index(0, h))])
                                          : -inf;
      for (const int64_t i : rows) {
        // Causal, the window and the key lengths: the visible key range.
        const int64_t end = std::min({p.seq_k, kv_len, p.visible_key_end(i)});
        keys.clear();
        scores.clear();
        for (int64_t j = p.visible_key_begin(i); j < end; ++j) {
          double bias = 0.0;
          if (mask) {
            const float m = in.mask[static_cast<std::size_t>(mask->index(b, h, i, j))];
            if (mask->type == MaskType::boolean) {
              if (m == 0.0f) continue;
            } else {
              // The GPU reads f16 masks in f16: see the same value even if the caller did not round.
              const float mv = mask->type == MaskType::f16 ? round_to(DType::f16, m) : m;
              if (mv == -std::numeric_limits<float>::infinity()) continue;
              bias = static_cast<double>(mv);
            }
          }
          // Only now that the key is known visible is K read: masked keys never reach the sums.
          double dot = 0.0;
          for (int64_t d = 0; d < p.dim_qk; ++d) {
            dot += static_cast<double>(in.q[static_cast<std::size_t>(in.q_layout.index(b, h, i, d))]) *
                   static_cast<double>(in.k[static_cast<std::size_t>(in.k_layout.index(b, g, j, d))]);
          }
          // scale * q.k -> softcap (finite scores only: NaN/Inf inputs propagate) -> + ALiBi -> + float mask
          double score = detail::score(scale, dot, 0.0);
          if (softcap > 0.0 && std::isfinite(score)) score = softcap * std::tanh(score / softcap);
          if (in.alibi_layout) score = detail::add_bias(score, detail::alibi_bias(slope, i + off - j));
          keys.push_back(j);
          scores.push_back(detail::add_bias(score, bias));
        }

        const std::size_t row = static_cast<std::size_t>((b * p.heads + h) * p.seq_q + i);
        double* out_row = o.out.data() + row * static_cast<std::size_t>(p.dim_v);
        double* weight_row = in.weights ? o.weights.data() + row * static_cast<std::size_t>(p.seq_k) : nullptr;
        if (weight_row) std::fill(weight_row, weight_row + p.seq_k, 0.0);
        if (keys.empty()) {
          // No visible key: O = 0 and LSE = -inf, or the sink's logit (its term alone in the sum).
          std::fill(out_row, out_row + p.dim_v, 0.0);
          o.lse[row] = sink;
          continue;
        }
        // Max over the visible scores (and the sink); NaN scores propagate through the sums below.
        double max = in.sinks_layout ? sink : scores[0];
        for (const double s : scores) max = std::max(max, s);
        if (std::isnan(sink)) max = sink;
        // The sink joins the denominator with no value.
        double sum = in.sinks_layout ? std::exp(sink - max) : 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::size_t n = 0; n < keys.size(); ++n) {
          const double w = std::exp(scores[n] - max);
          sum += w;
          for (int64_t d = 0; d < p.dim_v; ++d) {
            acc[static_cast<std::size_t>(d)] +=
                w * static_cast<double>(in.v[static_cast<std::size_t>(in.v_layout.index(b, g, keys[n], d))]);
          }
        }
        for (int64_t d = 0; d < p.dim_v; ++d) out_row[d] = acc[static_cast<std::size_t>(d)] / sum;
        if (weight_row)
          for (std::size_t n = 0; n < keys.size(); ++n) weight_row[keys[n]] = std::exp(scores[n] - max) / sum;
        o.lse[row] = max + std::log(sum);
      }
    }
  }
  return o;
}

}  // namespace vkattn::reference
