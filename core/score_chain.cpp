// The score chain's arithmetic (score_chain.hpp). The order of the floating-point operations is the
// contract's and is kept as it is: the references' exact checks (tests/unit_*reference*.cpp) pin it.
#include "score_chain.hpp"

#include <algorithm>
#include <cmath>

#include "score_rule.hpp"
#include "vkattn/dropout.hpp"
#include "vkattn/score_options.hpp"

namespace vkattn::reference::detail {

double modified_score(const ScoreModifiers& m, double alibi_slope, double dot, int64_t distance, double mask_bias) {
  double score = vkattn::detail::score(m.scale, dot, 0.0);
  for (const ScoreStep& step : m.steps) score = step.apply(score, step.value);
  if (m.alibi) score = vkattn::detail::add_bias(score, vkattn::detail::alibi_bias(alibi_slope, distance));
  return vkattn::detail::add_bias(score, mask_bias);
}

double score_derivative(const ScoreModifiers& m, double dot) {
  double score = vkattn::detail::score(m.scale, dot, 0.0);
  double derivative = 1.0;
  for (const ScoreStep& step : m.steps) {
    derivative *= step.derivative(score, step.value);
    score = step.apply(score, step.value);
  }
  return derivative;
}

ScoreModifiers score_modifiers(const AttentionOptions& options, double scale, bool alibi, bool sink) {
  ScoreModifiers m;
  m.scale = scale;
  for (const ScoreOption& option : score_options())
    if (option.score && option.is_set(options)) {
      // A real-valued option (the only kind with a score step): its value as the call has it.
      const auto member = std::get<std::optional<float> AttentionOptions::*>(option.member);
      m.steps.push_back({option.score, option.score_derivative, static_cast<double>(*(options.*member))});
    }
  m.alibi = alibi;
  m.sink = sink;
  if (options.dropout && options.dropout->p > 0.0f) m.dropout = options.dropout;
  return m;
}

ScoreModifiers score_modifiers(const AttentionOptions& options, double scale, const PerHeadValues& per_head) {
  return score_modifiers(options, scale, per_head.alibi_layout.has_value(), per_head.sinks_layout.has_value());
}

HeadModifiers head_modifiers(const PerHeadValues& per_head, int64_t b, int64_t h) {
  const auto value = [&](PerHeadTensor t) {
    return static_cast<double>(per_head.values(t)[static_cast<std::size_t>(per_head.layout(t)->index(b, h))]);
  };
  HeadModifiers head;
  if (per_head.alibi_layout) head.alibi_slope = value(PerHeadTensor::alibi);
  if (per_head.sinks_layout) head.sink = value(PerHeadTensor::sinks);
  return head;
}

void ScoreRow::start(const HeadModifiers& head, int64_t diagonal) {
  head_ = head;
  diagonal_ = diagonal;
  keys_.clear();
  dots_.clear();
  scores_.clear();
  weights_.clear();
  factors_.clear();
}

void ScoreRow::softmax() {
  if (keys_.empty()) return;
  // Max over the visible scores (and the sink); NaN scores propagate through the sums below.
  double max = m_.sink ? head_.sink : scores_[0];
  for (const double s : scores_) max = std::max(max, s);
  if (std::isnan(head_.sink)) max = head_.sink;
  // The sink joins the denominator with no value: it only scales the row down. Its term is added
  // first, then each key's in order, into the running sum (not the sum into each term): the
  // references' order ever since, which keeps their results bit for bit, NaN's sign included.
  for (const double s : scores_) weights_.push_back(std::exp(s - max));
  double sum = m_.sink ? std::exp(head_.sink - max) : 0.0;
  for (const double w : weights_) sum += w;
  sum_ = sum;
  lse_ = max + std::log(sum);
}

void ScoreRow::apply_dropout(int64_t heads, int64_t b, int64_t h, int64_t i) {
  if (!m_.dropout) return;
  const double kept = 1.0 / (1.0 - static_cast<double>(m_.dropout->p));
  factors_.clear();
  for (const int64_t j : keys_) factors_.push_back(dropout_keep(*m_.dropout, heads, b, h, i, j) ? kept : 0.0);
}

double ScoreRow::lse() const { return keys_.empty() ? head_.sink : lse_; }

}  // namespace vkattn::reference::detail
