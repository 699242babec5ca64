// The contract's score chain for one query row (docs/semantics.md), the one implementation every
// fp64 reference runs: SDPA (reference.cpp, and through it the paged and packed references, which
// attend each sequence as a dense call) and the multi-head layer (mha_reference.cpp). A new score
// modifier that is a per-head tensor is added here, once; one that is an option is a row of
// vkattn/score_options.hpp, whose score step the chain runs. For query i and key j, in this order:
//   s = scale·q·k -> softcap c·tanh(s/c) -> + ALiBi -slope·|i + off - j| -> + float mask
//   -> the boolean masks (causal, window, key lengths, bool mask) -> softmax with the sink logit σ:
//   O = Σ e^s V / (e^σ + Σ e^s), LSE = log(e^σ + Σ e^s); a fully masked row: O = 0, LSE = σ (-inf
//   without a sink). With dropout each key's weight in O is also multiplied by Z = keep/(1 - p)
//   (vkattn/dropout.hpp); P and the LSE are not.
// Where the masks come from differs by API (a mask tensor, key padding, key lengths), so the caller
// says which keys are visible and with what float-mask bias; the chain does everything else.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "vkattn/per_head.hpp"
#include "vkattn/types.hpp"

namespace vkattn::reference::detail {

// One score option's step (vkattn/score_options.hpp, ScoreOption::score) and its derivative
// (ScoreOption::score_derivative) with the call's value.
struct ScoreStep {
  double (*apply)(double score, double value);
  double (*derivative)(double score, double value);
  double value;
};

// The call's score modifiers: the same for every row.
struct ScoreModifiers {
  double scale = 1.0;
  std::vector<ScoreStep> steps;  // the set score options' steps (softcap), in the table's order
  bool alibi = false;            // ALiBi's bias joins the scores
  bool sink = false;             // a sink logit joins each row's max and denominator
  // Dropout (vkattn/dropout.hpp) on the weights in O, when the call has it with p > 0.
  std::optional<Dropout> dropout;
};

// The call's modifiers from its options (checked: check_score_options), its scale as the call uses
// it, and whether it has ALiBi slopes and sink logits: the one place both references read the options.
ScoreModifiers score_modifiers(const AttentionOptions& options, double scale, bool alibi, bool sink);

// One (batch, head) pair's per-head modifier values.
struct HeadModifiers {
  double alibi_slope = 0.0;
  double sink = -std::numeric_limits<double>::infinity();  // σ_h; -inf when the call has none
};

// The same from a call's per-head tensors (vkattn/per_head.hpp), which say which it has.
ScoreModifiers score_modifiers(const AttentionOptions& options, double scale, const PerHeadValues& per_head);
// The values of (b, h) in them.
HeadModifiers head_modifiers(const PerHeadValues& per_head, int64_t b, int64_t h);

// scale·dot -> the score options' steps (softcap) -> + ALiBi (`distance` = i + off - j) -> + the float
// mask's `mask_bias`.
double modified_score(const ScoreModifiers& m, double alibi_slope, double dot, int64_t distance, double mask_bias);

// d modified_score / d(scale·dot): the product of the steps' derivatives, each at the score entering
// its step (ALiBi's and the mask's biases are constants: their factor is 1). The saturation of scores
// beyond the f32 range is not differentiated: a saturated score is the contract's edge, not a gradient.
double score_derivative(const ScoreModifiers& m, double dot);

// How O divides by the softmax's denominator. The SDPA reference sums e^s·V and divides once (as
// the kernels do); the layer reference forms P first and then P·V (as torch's layer does). Each is
// kept so that both references' results stay bit for bit what they were.
enum class ValueSum { weights_then_divide, probabilities };

// One query row through the chain. Reused from row to row: its vectors keep their capacity.
class ScoreRow {
 public:
  explicit ScoreRow(const ScoreModifiers& modifiers) : m_(modifiers) {}

  // Starts the row whose diagonal is i + off (ALiBi measures distance from it) in head `head`.
  void start(const HeadModifiers& head, int64_t diagonal);

  // Scores keys [begin, end), the range causal, the window and key lengths leave. mask_bias(j)
  // returns std::nullopt for a key a mask hides (a boolean mask, a -inf float mask) and otherwise the
  // float mask's bias (0 without one); only then is dot(j) = q·k_j taken. Masked keys are skipped,
  // not weighted by 0: K is never read for them, so NaN/Inf in them cannot leak into the row.
  template <class MaskBias, class Dot>
  void score_keys(int64_t begin, int64_t end, MaskBias&& mask_bias, Dot&& dot) {
    for (int64_t j = begin; j < end; ++j) {
      const std::optional<double> bias = mask_bias(j);
      if (!bias) continue;
      const double d = dot(j);
      keys_.push_back(j);
      dots_.push_back(d);
      scores_.push_back(modified_score(m_, head_.alibi_slope, d, diagonal_ - j, *bias));
    }
  }

  // The softmax with the sink: the max, each visible key's e^(s - max) and the denominator. Nothing
  // to do for a row with no visible key.
  void softmax();

  // Dropout, after softmax(): the call's keep rule (dropout_keep) for this row, query i of head h in
  // batch element b of a call with `heads` query heads, gives each visible key its factor in O,
  // Z = 1/(1 - p) when kept and 0 when dropped. Without dropout (or p = 0) nothing changes: every
  // factor stays 1 and is never multiplied in. P (probability()) and the LSE are not affected.
  void apply_dropout(int64_t heads, int64_t b, int64_t h, int64_t i);

  bool empty() const { return keys_.empty(); }
  std::span<const int64_t> keys() const { return keys_; }
  // P of the n-th visible key, e^(s - max) / (e^(σ - max) + Σ e^(s - max)); the sink takes no share.
  double probability(std::size_t n) const { return weights_[n] / sum_; }
  // q·k of the n-th visible key, and d s / d(scale·q·k) of its score s (score_derivative).
  double dot(std::size_t n) const { return dots_[n]; }
  double score_derivative(std::size_t n) const { return detail::score_derivative(m_, dots_[n]); }
  // Dropout's factor Z of the n-th visible key's weight in O (apply_dropout); 1 without dropout.
  double value_factor(std::size_t n) const { return factors_.empty() ? 1.0 : factors_[n]; }
  // log(e^σ + Σ e^s); with no visible key, the sink's logit alone (its term is the whole sum), or -inf.
  double lse() const;

  // The row's O, dim values written to out (0 for a fully masked row); value(j, d) reads V. Each key's
  // weighted row is added in key order, as both references always have; with dropout each weight is
  // first multiplied by its factor Z (value_factor).
  template <class Value>
  void output(int64_t dim, ValueSum how, Value&& value, double* out) const {
    std::fill(out, out + dim, 0.0);
    for (std::size_t n = 0; n < keys_.size(); ++n) {
      double w = how == ValueSum::probabilities ? probability(n) : weights_[n];
      if (!factors_.empty()) w *= factors_[n];
      for (int64_t d = 0; d < dim; ++d) out[d] += w * value(keys_[n], d);
    }
    if (how == ValueSum::weights_then_divide && !keys_.empty())
      for (int64_t d = 0; d < dim; ++d) out[d] /= sum_;
  }

  // The row's backward pass (docs/semantics.md, "Backward"), after start, score_keys, softmax and
  // apply_dropout: o is the row's O (dim_v values, from output()) and dout its gradient dO. Adds the
  // row's share of each gradient: add_dv(j, d, x) to dV_j, add_dq(d, x) to dQ_i and add_dk(j, d, x) to
  // dK_j, with D_i = dO·O, dP_ij = Z_ij dO·V_j and dS_ij = P_ij (dP_ij - D_i) times the score steps'
  // derivative, the scale's factor included (dQ_i = scale Σ_j dS_ij K_j). q(d), k(j, d) and v(j, d)
  // read the row's query and its keys and values. Returns D_i, of which the sink's gradient is made.
  template <class Q, class K, class V, class AddQ, class AddK, class AddV>
  double backward(int64_t dim_qk, int64_t dim_v, const double* o, const double* dout, Q&& q, K&& k, V&& v,
                  AddQ&& add_dq, AddK&& add_dk, AddV&& add_dv) const {
    double d_row = 0.0;  // D_i = Σ_d dO_id O_id
    for (int64_t d = 0; d < dim_v; ++d) d_row += dout[d] * o[d];
    for (std::size_t n = 0; n < keys_.size(); ++n) {
      const int64_t j = keys_[n];
      const double prob = probability(n), z = value_factor(n);
      double dp = 0.0;  // dP_ij = Z_ij dO_i·V_j
      for (int64_t d = 0; d < dim_v; ++d) {
        add_dv(j, d, prob * z * dout[d]);
        dp += dout[d] * v(j, d);
      }
      dp *= z;
      // dS_ij = P_ij (dP_ij - D_i), through every score step (softcap) back to scale·q·k.
      const double ds = prob * (dp - d_row) * score_derivative(n);
      for (int64_t d = 0; d < dim_qk; ++d) {
        add_dq(d, m_.scale * ds * k(j, d));
        add_dk(j, d, m_.scale * ds * q(d));
      }
    }
    return d_row;
  }

  // The sink logit's gradient from this row, -e^(σ - LSE) D_i (its share of the row times -D_i); 0
  // without a sink or with no visible key (O = 0 whatever the sink).
  double sink_gradient(double d_row) const { return m_.sink && !keys_.empty() ? -std::exp(head_.sink - lse_) * d_row : 0.0; }

 private:
  ScoreModifiers m_;
  HeadModifiers head_;
  int64_t diagonal_ = 0;
  std::vector<int64_t> keys_;     // the visible keys, in order
  std::vector<double> dots_;      // their q·k
  std::vector<double> scores_;    // their modified scores
  std::vector<double> weights_;   // their e^(s - max), after softmax()
  std::vector<double> factors_;   // dropout's Z of each, after apply_dropout(); empty without dropout
  double sum_ = 0.0, lse_ = 0.0;  // after softmax(): the denominator e^(σ - max) + Σ e^(s - max), the LSE
};

}  // namespace vkattn::reference::detail
