// The fp64 reference on problems small enough to compute by hand: it is the yardstick for the GPU,
// so it is checked against arithmetic, not against itself.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A dense BHSD problem with its data; batch and heads default to 1.
struct Tiny {
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q, seq_k, dim_qk, dim_v;
  std::vector<float> q, k, v, mask;
  std::optional<MaskLayout> mask_layout;
  std::vector<int32_t> kv_lengths;
  AttentionOptions options;

  Tiny(int64_t sq, int64_t sk, int64_t dqk, int64_t dv) : seq_q(sq), seq_k(sk), dim_qk(dqk), dim_v(dv) {}

  reference::Inputs inputs() const {
    reference::Inputs in;
    in.q_layout = TensorLayout::bhsd(DType::f32, batch, heads, seq_q, dim_qk);
    in.k_layout = TensorLayout::bhsd(DType::f32, batch, kv_heads, seq_k, dim_qk);
    in.v_layout = TensorLayout::bhsd(DType::f32, batch, kv_heads, seq_k, dim_v);
    in.q = q;
    in.k = k;
    in.v = v;
    in.mask_layout = mask_layout;
    in.mask = mask;
    in.kv_lengths = kv_lengths;
    in.options = options;
    return in;
  }
  reference::Outputs run(std::span<const int64_t> rows = {}) const { return reference::attention(inputs(), rows); }
  reference::Outputs run_with_weights() const {
    reference::Inputs in = inputs();
    in.weights = true;
    return reference::attention(in);
  }
};

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("reference: one key gives that key's value") {
    Tiny t(1, 1, 2, 3);
    t.q = {0.3f, -1.0f};
    t.k = {2.0f, 5.0f};
    t.v = {1.0f, -2.0f, 7.5f};
    const reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == 1.0);
    CHECK(o.at(0, 0, 0, 1) == -2.0);
    CHECK(o.at(0, 0, 0, 2) == 7.5);
    const double score = (0.3 * 2.0 - 1.0 * 5.0) / std::sqrt(2.0);
    CHECK(o.lse[0] == doctest::Approx(score).epsilon(1e-6));  // log(exp(s)) = s (the scale is f32)
  }

  TEST_CASE("reference: equal scores give the mean of V") {
    Tiny t(1, 4, 1, 1);
    t.q = {0.0f};
    t.k = {1.0f, 2.0f, 3.0f, 4.0f};
    t.v = {1.0f, 2.0f, 3.0f, 10.0f};
    const reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(4.0));
    CHECK(o.lse[0] == doctest::Approx(std::log(4.0)));
  }

  TEST_CASE("reference: scores beyond the f32 range saturate to +-FLT_MAX") {
    // scale 1e38: scores 2e38 (finite), 4e38 and 5e38 (both -> FLT_MAX, tied): O is the mean of
    // the two saturated keys' V, LSE is FLT_MAX + log 2; before the rule the weights were 0 and 1.
    const double flt_max = std::numeric_limits<float>::max();
    Tiny t(1, 3, 1, 1);
    t.options.scale = 1e38f;
    t.q = {1.0f};
    t.k = {2.0f, 4.0f, 5.0f};
    t.v = {100.0f, 1.0f, 3.0f};
    reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(2.0));
    CHECK(o.lse[0] == doctest::Approx(flt_max));
    // Negative: every score saturates to -FLT_MAX: equal weights, not a fully masked row.
    t.options.scale = -1e38f;
    t.k = {4.0f, 5.0f, 6.0f};
    o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(104.0 / 3.0));
    CHECK(o.lse[0] == doctest::Approx(-flt_max));
    // A dot beyond f32 (1e40) with a tiny scale gives the representable score 1e40 * 1e-38 = 100.
    t.options.scale = 1e-38f;
    t.q = {1e20f};
    t.k = {1e20f, 0.0f, 0.0f};
    o = t.run();
    CHECK(o.lse[0] == doctest::Approx(100.0).epsilon(1e-5));
    // A finite bias on a saturated score saturates again; an Inf in an input still propagates.
    t.options.scale = 1e38f;
    t.q = {1.0f};
    t.k = {5.0f, 4.0f, kInf};
    o = t.run();
    CHECK(std::isnan(o.at(0, 0, 0, 0)));
  }

  TEST_CASE("reference: softmax weights of known scores") {
    // Scores 0 and ln 3 (scale 1): weights 1/4 and 3/4.
    Tiny t(1, 2, 1, 1);
    t.options.scale = 1.0f;
    t.q = {1.0f};
    t.k = {0.0f, static_cast<float>(std::log(3.0))};
    t.v = {4.0f, 8.0f};
    reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(7.0).epsilon(1e-6));
    CHECK(o.lse[0] == doctest::Approx(std::log(4.0)).epsilon(1e-6));

    // A negative scale flips the preference: weights 3/4 and 1/4.
    t.options.scale = -1.0f;
    o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(5.0).epsilon(1e-6));

    // The same weights from an additive float mask on equal scores.
    t.options.scale = 1.0f;
    t.k = {0.0f, 0.0f};
    t.mask_layout = MaskLayout::dense(MaskType::f32, 1, 1, 1, 2);
    t.mask = {0.0f, static_cast<float>(std::log(3.0))};
    o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(7.0).epsilon(1e-6));
    t.mask = {-kInf, 0.0f};  // -inf masks the first key
    o = t.run();
    CHECK(o.at(0, 0, 0, 0) == 8.0);
    CHECK(o.lse[0] == 0.0);
  }

  TEST_CASE("reference: attention weights P") {
    // Scores 0 and ln 3 (scale 1): weights 1/4 and 3/4; a third key beyond kv_length weighs exactly 0.
    Tiny t(1, 3, 1, 1);
    t.options.scale = 1.0f;
    t.q = {1.0f};
    t.k = {0.0f, static_cast<float>(std::log(3.0)), kNaN};
    t.v = {4.0f, 8.0f, kNaN};
    t.kv_lengths = {2};
    const reference::Outputs o = t.run_with_weights();
    REQUIRE(o.weights.size() == 3);
    CHECK(o.seq_k == 3);
    CHECK(o.weights[0] == doctest::Approx(0.25).epsilon(1e-6));
    CHECK(o.weights[1] == doctest::Approx(0.75).epsilon(1e-6));
    CHECK(o.weights[2] == 0.0);
    CHECK(t.run().weights.empty());  // only on request

    // Causal top-left, seq_q 2 over seq_k 2: row 0 sees key 0 only; a fully masked row is all 0.
    Tiny c(2, 2, 1, 1);
    c.q = {1.0f, 1.0f};
    c.k = {1.0f, 1.0f};
    c.v = {1.0f, 2.0f};
    c.options.causal = Causal::top_left;
    reference::Outputs w = c.run_with_weights();
    CHECK(w.weights == std::vector<double>{1.0, 0.0, 0.5, 0.5});
    c.kv_lengths = {0};
    w = c.run_with_weights();
    CHECK(w.weights == std::vector<double>{0.0, 0.0, 0.0, 0.0});
    CHECK(w.lse[0] == -std::numeric_limits<double>::infinity());
  }

  TEST_CASE("reference: fully masked rows are 0 with LSE -inf") {
    Tiny t(2, 3, 1, 2);
    t.q = {1.0f, 1.0f};
    t.k = {1.0f, 2.0f, 3.0f};
    t.v = {1, 2, 3, 4, 5, 6};
    t.kv_lengths = {0};
    reference::Outputs o = t.run();
    for (int64_t i = 0; i < 2; ++i) {
      CHECK(o.at(0, 0, i, 0) == 0.0);
      CHECK(o.at(0, 0, i, 1) == 0.0);
      CHECK(o.lse[static_cast<std::size_t>(i)] == -std::numeric_limits<double>::infinity());
    }
    // A boolean mask row of all false: only that row is empty.
    t.kv_lengths.clear();
    t.mask_layout = MaskLayout::dense(MaskType::boolean, 1, 1, 2, 3);
    t.mask = {0, 0, 0, 0, 1, 0};
    o = t.run();
    CHECK(o.at(0, 0, 0, 0) == 0.0);
    CHECK(std::isinf(o.lse[0]));
    CHECK(o.at(0, 0, 1, 0) == 3.0);
    CHECK(o.at(0, 0, 1, 1) == 4.0);
  }

  TEST_CASE("reference: causal alignments with seq_q != seq_k") {
    // Equal scores (Q = 0), so each row is the mean of its visible V values.
    Tiny wide(2, 3, 1, 1);  // seq_q < seq_k
    wide.q = {0, 0};
    wide.k = {1, 2, 3};
    wide.v = {1, 2, 3};
    wide.options.causal = Causal::top_left;  // row i sees j <= i
    reference::Outputs o = wide.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(1.0));
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx(1.5));
    wide.options.causal = Causal::bottom_right;  // row i sees j <= i + 1
    o = wide.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(1.5));
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx(2.0));

    Tiny tall(3, 2, 1, 1);  // seq_q > seq_k
    tall.q = {0, 0, 0};
    tall.k = {1, 2};
    tall.v = {1, 2};
    tall.options.causal = Causal::top_left;  // rows 1 and 2 both see both keys
    o = tall.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(1.0));
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx(1.5));
    CHECK(o.at(0, 0, 2, 0) == doctest::Approx(1.5));
    tall.options.causal = Causal::bottom_right;  // row i sees j <= i - 1: row 0 sees nothing
    o = tall.run();
    CHECK(o.at(0, 0, 0, 0) == 0.0);
    CHECK(o.lse[0] == -std::numeric_limits<double>::infinity());
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx(1.0));
    CHECK(o.at(0, 0, 2, 0) == doctest::Approx(1.5));
  }

  TEST_CASE("reference: GQA maps head h to KV head h / (heads / kv_heads)") {
    Tiny t(1, 1, 1, 1);
    t.heads = 4;
    t.kv_heads = 2;
    t.q = {1, 1, 1, 1};
    t.k = {0, 0};
    t.v = {10, 20};
    const reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == 10.0);
    CHECK(o.at(0, 1, 0, 0) == 10.0);
    CHECK(o.at(0, 2, 0, 0) == 20.0);
    CHECK(o.at(0, 3, 0, 0) == 20.0);
  }

  TEST_CASE("reference: masked keys are never read; NaN in a visible input propagates") {
    Tiny t(2, 3, 1, 1);
    t.q = {1, 1};
    t.k = {1, kNaN, kInf};
    t.v = {5, kNaN, -kInf};
    t.kv_lengths = {1};
    reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == 5.0);
    CHECK(o.at(0, 0, 1, 0) == 5.0);
    t.kv_lengths = {2};
    t.k[1] = 1.0f;  // key 1 visible, its V is NaN
    o = t.run();
    CHECK(std::isnan(o.at(0, 0, 0, 0)));
    // NaN in one Q row reaches that row only.
    t.kv_lengths = {1};
    t.q = {kNaN, 1};
    o = t.run();
    CHECK(std::isnan(o.at(0, 0, 0, 0)));
    CHECK(o.at(0, 0, 1, 0) == 5.0);
  }

  TEST_CASE("reference: rows restricts the work") {
    Tiny t(3, 1, 1, 1);
    t.q = {1, 2, 3};
    t.k = {1};
    t.v = {4};
    const std::vector<int64_t> rows = {1};
    const reference::Outputs o = t.run(rows);
    CHECK(std::isnan(o.at(0, 0, 0, 0)));
    CHECK(o.at(0, 0, 1, 0) == 4.0);
    CHECK(std::isnan(o.at(0, 0, 2, 0)));
    CHECK(std::isnan(o.lse[2]));
    const std::vector<int64_t> bad = {3};
    CHECK(contains(error_message([&] { t.run(bad); }), "rows"));
  }

  TEST_CASE("reference: rejects what the GPU path rejects, and short spans") {
    Tiny t(2, 3, 4, 4);
    t.q.assign(8, 0.0f);
    t.k.assign(12, 0.0f);
    t.v.assign(11, 0.0f);  // one short
    CHECK(error_message([&] { t.run(); }) == "v: 11 values given, layout needs 12");
    t.v.assign(12, 0.0f);
    CHECK_NOTHROW(t.run());
    t.kv_lengths = {4};
    CHECK(contains(error_message([&] { t.run(); }), "kv_lengths[0] (4)"));
    t.kv_lengths = {1, 2};
    CHECK(contains(error_message([&] { t.run(); }), "kv_lengths"));
    t.kv_lengths.clear();
    t.options.scale = kNaN;
    CHECK(error_message([&] { t.run(); }) == "scale: must be finite, got nan");
    t.options.scale.reset();
    t.mask_layout = MaskLayout::dense(MaskType::boolean, 1, 1, 2, 3);
    t.mask.assign(5, 1.0f);
    CHECK(error_message([&] { t.run(); }) == "mask: 5 values given, layout needs 6");
    Tiny big(1, 1, 577, 1);
    big.q.assign(577, 0.0f);
    big.k.assign(577, 0.0f);
    big.v.assign(1, 0.0f);
    CHECK(error_message([&] { big.run(); }) == "q.dim (577) exceeds the maximum head dim 576");
  }

  // Score modifiers: each checked against the arithmetic it stands for.
  TEST_CASE("reference: a sliding window hides the keys outside it, in the call's alignment") {
    Tiny t(2, 5, 1, 1);  // bottom-right: row i sits at key i + 3
    t.q = {0.0f, 0.0f};  // equal scores: O is the mean of the visible V
    t.k = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    t.v = {1.0f, 2.0f, 4.0f, 8.0f, 16.0f};
    t.options.window = Window{1, 0};  // keys i+2, i+3
    reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx((4.0 + 8.0) / 2));
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx((8.0 + 16.0) / 2));
    t.options.align = Align::top_left;  // row i sits at key i: keys i-1, i
    o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(1.0));
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx(1.5));
    t.options.window = Window{-1, 1};  // right side only: keys 0 .. i+1
    o = t.run();
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx((1.0 + 2.0 + 4.0) / 3));
  }

  TEST_CASE("reference: ALiBi adds -slope * |i + off - j|, per head and per batch") {
    Tiny t(1, 3, 1, 1);
    t.q = {0.0f};
    t.k = {0.0f, 0.0f, 0.0f};
    t.v = {1.0f, 2.0f, 3.0f};
    std::vector<float> slopes = {0.5f};
    reference::Inputs in = t.inputs();
    in.alibi_layout = HeadValuesLayout{1, 1, 0};
    in.alibi = slopes;
    // bottom-right: off = 2, distances 2, 1, 0 -> scores -1, -0.5, 0
    const double w[3] = {std::exp(-1.0), std::exp(-0.5), 1.0};
    const double sum = w[0] + w[1] + w[2];
    reference::Outputs o = reference::attention(in);
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx((w[0] * 1 + w[1] * 2 + w[2] * 3) / sum));
    CHECK(o.lse[0] == doctest::Approx(std::log(sum)));
    // (B, H) slopes: batch 1 gets its own slope (0: uniform)
    Tiny t2 = t;
    t2.batch = 2;
    t2.q = {0.0f, 0.0f};
    t2.k.assign(6, 0.0f);
    t2.v = {1.0f, 2.0f, 3.0f, 1.0f, 2.0f, 3.0f};
    std::vector<float> per_batch = {0.5f, 0.0f};
    in = t2.inputs();
    in.alibi_layout = HeadValuesLayout{2, 1, 0};
    in.alibi = per_batch;
    o = reference::attention(in);
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx((w[0] * 1 + w[1] * 2 + w[2] * 3) / sum));
    CHECK(o.at(1, 0, 0, 0) == doctest::Approx(2.0));
  }

  TEST_CASE("reference: softcap is c * tanh(s / c) before ALiBi and the float mask; NaN/Inf stay") {
    Tiny t(1, 2, 1, 1);
    t.q = {2.0f};
    t.k = {3.0f, 0.0f};  // scores 6 and 0 (scale 1)
    t.v = {1.0f, 0.0f};
    t.options.scale = 1.0f;
    t.options.softcap = 2.0f;  // 6 -> 2 tanh(3)
    t.mask_layout = MaskLayout::dense(MaskType::f32, 1, 1, 1, 2);
    t.mask = {-1.0f, 0.0f};  // added after the cap: 2 tanh(3) - 1
    const double s0 = 2.0 * std::tanh(3.0) - 1.0;
    reference::Outputs o = t.run();
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(std::exp(s0) / (std::exp(s0) + 1.0)));
    t.k = {kInf, 0.0f};  // an infinite score is an Inf input: it propagates (NaN row), not capped to c
    o = t.run();
    CHECK(std::isnan(o.at(0, 0, 0, 0)));
  }

  TEST_CASE("reference: sinks join the denominator without a value; a fully masked row gives O = 0, LSE = sink") {
    Tiny t(2, 2, 1, 1);
    t.q = {0.0f, 0.0f};
    t.k = {0.0f, 0.0f};  // scores 0
    t.v = {3.0f, 5.0f};
    t.options.causal = Causal::top_left;  // row 0 sees key 0; row 1 keys 0, 1
    std::vector<float> sinks = {std::log(2.0f)};  // e^sink = 2
    reference::Inputs in = t.inputs();
    in.sinks_layout = HeadValuesLayout{1, 1, 0};
    in.sinks = sinks;
    in.weights = true;
    reference::Outputs o = reference::attention(in);
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx(3.0 / 3.0));  // 3 * e^0 / (2 + 1)
    CHECK(o.at(0, 0, 1, 0) == doctest::Approx((3.0 + 5.0) / 4.0));
    CHECK(o.lse[0] == doctest::Approx(std::log(3.0)));
    CHECK(o.lse[1] == doctest::Approx(std::log(4.0)));
    CHECK(o.weights[0] == doctest::Approx(1.0 / 3.0));  // P excludes the sink: rows sum to < 1
    CHECK(o.weights[1] == 0.0);
    // Every key masked: O = 0, LSE = the sink
    const std::vector<int32_t> none = {0};
    in.kv_lengths = none;
    o = reference::attention(in);
    CHECK(o.at(0, 0, 1, 0) == 0.0);
    CHECK(o.lse[1] == doctest::Approx(std::log(2.0)));
    CHECK((o.weights[2] == 0.0 && o.weights[3] == 0.0));
  }
}
