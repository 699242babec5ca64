// The fp64 CPU reference (the contract: docs/semantics.md). Deliberately the plainest possible loop nest: it is what the
// kernels are judged against, so it must be obviously right rather than fast.
#include "vkattn/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dense_reference.hpp"
#include "score_chain.hpp"
#include "sequence_reference.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::reference {

namespace detail {

AttentionProblem check_inputs(const Inputs& in, std::span<const int64_t> rows) {
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
  layouts.per_head() = in.layouts();
  const AttentionProblem p = check_attention(layouts);

  check_span("q", in.q.size(), in.q_layout.required_elements());
  check_span("k", in.k.size(), in.k_layout.required_elements());
  check_span("v", in.v.size(), in.v_layout.required_elements());
  if (in.mask_layout) check_span("mask", in.mask.size(), in.mask_layout->required_elements());
  check_head_value_spans(in);
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
  return p;
}

std::pair<int64_t, int64_t> visible_keys(const Inputs& in, const AttentionProblem& p, int64_t b, int64_t i) {
  const int64_t kv_len = in.kv_lengths.empty() ? p.seq_k : in.kv_lengths[static_cast<std::size_t>(b)];
  return {p.visible_key_begin(i), std::min({p.seq_k, kv_len, p.visible_key_end(i)})};
}

std::optional<double> mask_bias(const Inputs& in, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (!in.mask_layout) return 0.0;
  const MaskLayout& mask = *in.mask_layout;
  const float m = in.mask[static_cast<std::size_t>(mask.index(b, h, i, j))];
  if (mask.type == MaskType::boolean) {
    if (m == 0.0f) return std::nullopt;
    return 0.0;
  }
  // The GPU reads f16 masks in f16: see the same value even if the caller did not round.
  const float mv = mask.type == MaskType::f16 ? round_to(DType::f16, m) : m;
  if (mv == -std::numeric_limits<float>::infinity()) return std::nullopt;
  return static_cast<double>(mv);
}

void score_row(const Inputs& in, const AttentionProblem& p, int64_t b, int64_t h, int64_t i, ScoreRow& row) {
  const int64_t g = h / p.group_size();
  row.start(head_modifiers(in, b, h), i + p.diagonal_offset());
  const auto [begin, end] = visible_keys(in, p, b, i);
  row.score_keys(
      begin, end, [&](int64_t j) { return mask_bias(in, b, h, i, j); },
      [&](int64_t j) {
        double dot = 0.0;
        for (int64_t d = 0; d < p.dim_qk; ++d) {
          dot += static_cast<double>(in.q[static_cast<std::size_t>(in.q_layout.index(b, h, i, d))]) *
                 static_cast<double>(in.k[static_cast<std::size_t>(in.k_layout.index(b, g, j, d))]);
        }
        return dot;
      });
}

}  // namespace detail

namespace {

// The outputs' shapes, every value NaN until its row is computed (rows not asked for stay NaN).
Outputs nan_outputs(const AttentionProblem& p, bool weights) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Outputs o;
  o.batch = p.batch;
  o.heads = p.heads;
  o.seq_q = p.seq_q;
  o.dim_v = p.dim_v;
  o.out.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq_q * p.dim_v), nan);
  o.lse.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq_q), nan);
  o.seq_k = p.seq_k;
  if (weights) o.weights.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq_q * p.seq_k), nan);
  return o;
}

// Row i of head h in batch element b, through the score chain into o (its O, LSE and, when asked, P).
void attend_row(const Inputs& in, const AttentionProblem& p, int64_t b, int64_t h, int64_t i, int64_t dropout_batch,
                detail::ScoreRow& row, Outputs& o) {
  const int64_t g = h / p.group_size();
  detail::score_row(in, p, b, h, i, row);
  row.softmax();
  row.apply_dropout(p.heads, dropout_batch + b, h, i);

  const std::size_t r = static_cast<std::size_t>((b * p.heads + h) * p.seq_q + i);
  row.output(
      p.dim_v, detail::ValueSum::weights_then_divide,
      [&](int64_t j, int64_t d) { return static_cast<double>(in.v[static_cast<std::size_t>(in.v_layout.index(b, g, j, d))]); },
      o.out.data() + r * static_cast<std::size_t>(p.dim_v));
  o.lse[r] = row.lse();
  if (in.weights) {  // P itself: dropout's factors are O's, not the weights'
    double* weight_row = o.weights.data() + r * static_cast<std::size_t>(p.seq_k);
    std::fill(weight_row, weight_row + p.seq_k, 0.0);
    const std::span<const int64_t> keys = row.keys();
    for (std::size_t n = 0; n < keys.size(); ++n) weight_row[keys[n]] = row.probability(n);
  }
}

}  // namespace

namespace detail {

Outputs attention(const Inputs& in, std::span<const int64_t> rows, int64_t dropout_batch) {
  const AttentionProblem p = check_inputs(in, rows);
  Outputs o = nan_outputs(p, in.weights);

  std::vector<int64_t> all_rows;
  if (rows.empty()) {
    all_rows.resize(static_cast<std::size_t>(p.seq_q));
    for (int64_t i = 0; i < p.seq_q; ++i) all_rows[static_cast<std::size_t>(i)] = i;
    rows = all_rows;
  }

  ScoreRow row(score_modifiers(in.options, static_cast<double>(p.scale), in.per_head_values()));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (const int64_t i : rows) attend_row(in, p, b, h, i, dropout_batch, row, o);
  return o;
}

}  // namespace detail

Outputs attention(const Inputs& in, std::span<const int64_t> rows) { return detail::attention(in, rows, 0); }

}  // namespace vkattn::reference
