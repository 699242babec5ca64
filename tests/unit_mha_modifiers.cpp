// The multi-head layer's score modifiers (docs/semantics.md, "Score modifiers") in its fp64 reference, on
// problems small enough to compute by hand: sinks and ALiBi slopes as weights of the layer, the
// options (window, align, softcap, scale) as inputs, their order (softcap -> ALiBi -> attn_mask), and the checks
// that name a bad value.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha_reference.hpp"

using namespace vkattn;
using vkattn::reference::multi_head_attention;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

// E = 2, one head (head dim 2, scale 1/sqrt(2)), identity projections, no biases.
MhaWeights identity_layer() {
  MhaWeights w;
  w.embed_dim = 2;
  w.num_heads = 1;
  w.bias = false;
  w.q_proj_weight = w.k_proj_weight = w.v_proj_weight = w.out_proj_weight = {1, 0, 0, 1};
  return w;
}

MhaInputs make_inputs(int64_t sq, int64_t sk, const std::vector<float>& q, const std::vector<float>& k,
                      const std::vector<float>& v) {
  MhaInputs in;
  in.batch = 1, in.seq_q = sq, in.seq_k = sk;
  in.query = q, in.key = k, in.value = v;
  in.need_weights = true;
  return in;
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("mha reference: a sink joins the denominator with no value; the weights exclude it") {
  MhaWeights w = identity_layer();
  w.sinks = {0.0f};  // e^0 next to two scores of 0: a third each
  const std::vector<float> q = {0, 0}, k = {1, -2, 4, 3}, v = {1, 2, 3, 6};
  MhaInputs in = make_inputs(1, 2, q, k, v);
  auto o = multi_head_attention(w, in);
  CHECK(o.weights[0] == doctest::Approx(1.0 / 3).epsilon(1e-14));
  CHECK(o.weights[1] == doctest::Approx(1.0 / 3).epsilon(1e-14));
  CHECK(o.out[0] == doctest::Approx(4.0 / 3).epsilon(1e-14));
  CHECK(o.out[1] == doctest::Approx(8.0 / 3).epsilon(1e-14));
  // Every key hidden: the row is 0 (the sink has no value), the weights too.
  in.key_padding_mask = {1, 1};
  o = multi_head_attention(w, in);
  CHECK(o.out == std::vector<double>{0.0, 0.0});
  CHECK(o.weights == std::vector<double>{0.0, 0.0});
}

TEST_CASE("mha reference: ALiBi's bias -slope·|i + off - j| in both alignments") {
  MhaWeights w = identity_layer();
  w.alibi_slopes = {std::log(2.0f)};
  const std::vector<float> q = {0, 0}, k = {1, 1, 2, 2}, v = {3, 0, 0, 3};
  MhaInputs in = make_inputs(1, 2, q, k, v);
  const double slope = double(std::log(2.0f)), a = std::exp(-slope);
  // Bottom-right (the default): query 0 sits at key 1, so key 0 is 1 away: e^-slope : 1.
  auto o = multi_head_attention(w, in);
  CHECK(o.weights[0] == doctest::Approx(a / (1 + a)).epsilon(1e-14));
  CHECK(o.weights[1] == doctest::Approx(1 / (1 + a)).epsilon(1e-14));
  // Top-left: query 0 sits at key 0.
  in.options.align = Align::top_left;
  o = multi_head_attention(w, in);
  CHECK(o.weights[0] == doctest::Approx(1 / (1 + a)).epsilon(1e-14));
  CHECK(o.weights[1] == doctest::Approx(a / (1 + a)).epsilon(1e-14));
  CHECK(o.out[0] == doctest::Approx(3 / (1 + a)).epsilon(1e-14));
}

TEST_CASE("mha reference: the window around the diagonal of either alignment") {
  const MhaWeights w = identity_layer();
  const std::vector<float> q = {0, 0, 0, 0}, k = {1, 1, 2, 2, 3, 3}, v = {1, 0, 2, 0, 3, 0};
  MhaInputs in = make_inputs(2, 3, q, k, v);
  in.options.window = Window{0, 0};  // the diagonal key alone
  in.average_weights = false;
  in.options.align = Align::top_left;
  auto o = multi_head_attention(w, in);
  CHECK(o.weights == std::vector<double>{1, 0, 0, /**/ 0, 1, 0});
  CHECK(o.out == std::vector<double>{1, 0, 2, 0});
  in.options.align.reset();  // bottom-right: query i sits at key i + 1
  o = multi_head_attention(w, in);
  CHECK(o.weights == std::vector<double>{0, 1, 0, /**/ 0, 0, 1});
  // Left side 1 with causal top-left: row 0 sees key 0, row 1 keys 0 and 1.
  in.options.window = Window{1, -1};
  in.options.causal = Causal::top_left;
  o = multi_head_attention(w, in);
  CHECK(o.weights == std::vector<double>{1, 0, 0, /**/ 0.5, 0.5, 0});
}

TEST_CASE("mha reference: softcap, then ALiBi, then the attn_mask") {
  MhaWeights w = identity_layer();
  const std::vector<float> q = {4, 0}, k = {4, 0, 4, 0}, v = {1, 0, 0, 1};
  MhaInputs in = make_inputs(1, 2, q, k, v);
  in.options.softcap = 1.0f;
  const double raw = 16.0 / std::sqrt(2.0), capped = std::tanh(raw);
  // Softcap alone: both keys score tanh(raw) — equal weights.
  auto o = multi_head_attention(w, in);
  CHECK(o.weights[0] == doctest::Approx(0.5).epsilon(1e-14));
  // With ALiBi (slope 1, top-left: key 1 is 1 away) and a mask of +0.25 on key 1: the cap applies to
  // the raw score only, so key 1 scores tanh(raw) - 1 + 0.25.
  w.alibi_slopes = {1.0f};
  in.options.align = Align::top_left;
  in.attn_mask = {0.0f, 0.25f};
  o = multi_head_attention(w, in);
  const double s0 = capped, s1 = capped - 1.0 + 0.25;
  CHECK(o.weights[1] == doctest::Approx(std::exp(s1) / (std::exp(s0) + std::exp(s1))).epsilon(1e-14));
}

TEST_CASE("mha reference: options.scale replaces torch's 1/sqrt(head dim); a non-finite one is refused") {
  MhaWeights w = identity_layer();
  const std::vector<float> q = {1, 1}, k = {1, 1, 0, 0}, v = {1, 0, 0, 1};
  MhaInputs in = make_inputs(1, 2, q, k, v);
  // Key 0 scores scale·2, key 1 scores 0: the weight of key 0 is 1 / (1 + e^(-2·scale)).
  auto o = multi_head_attention(w, in);
  CHECK(o.weights[0] == doctest::Approx(1.0 / (1.0 + std::exp(-2.0 / std::sqrt(2.0)))).epsilon(1e-14));
  in.options.scale = 0.25f;
  o = multi_head_attention(w, in);
  CHECK(o.weights[0] == doctest::Approx(1.0 / (1.0 + std::exp(-0.5))).epsilon(1e-14));
  in.options.scale = std::numeric_limits<float>::quiet_NaN();
  CHECK(error_message([&] { multi_head_attention(w, in); }) == "scale: must be finite, got nan");
}

TEST_CASE("mha checks: the modifiers' bad values are Errors naming them") {
  const std::vector<float> q = {0, 0}, k = {1, 2}, v = {3, 4};
  const MhaInputs in = make_inputs(1, 1, q, k, v);
  MhaWeights w = identity_layer();
  w.sinks = {0.0f, 1.0f};
  CHECK(error_message([&] { multi_head_attention(w, in); }) ==
        "sinks: expected 1 values (1), given 2 (one per head, or none)");
  w.sinks = {std::numeric_limits<float>::quiet_NaN()};
  CHECK(contains(error_message([&] { check_mha_weights(w); }), "sinks[0] is nan: the values must be finite"));
  w.sinks.clear();
  w.alibi_slopes = {1.0f, 2.0f, 3.0f};
  CHECK(contains(error_message([&] { check_mha_weights(w); }), "alibi_slopes: expected 1 values (1), given 3"));
  w.alibi_slopes = {std::numeric_limits<float>::infinity()};
  CHECK(contains(error_message([&] { check_mha_weights(w); }), "alibi_slopes[0] is inf"));

  const MhaDims d = check_mha_weights(identity_layer());
  MhaInputs bad = in;
  bad.options.window = Window{-2, 0};
  CHECK(error_message([&] { check_mha_inputs(d, bad); }) == "window: (-2, 0) sides must be >= 0, or -1 for unbounded");
  bad = in;
  bad.options.softcap = 0.0f;
  CHECK(error_message([&] { check_mha_inputs(d, bad); }) == "softcap: must be finite and > 0, got 0");
  bad.options.softcap = std::numeric_limits<float>::infinity();
  CHECK(contains(error_message([&] { check_mha_inputs(d, bad); }), "softcap: must be finite and > 0, got inf"));
  bad = in;
  bad.options.causal = Causal::bottom_right;
  bad.options.align = Align::top_left;
  CHECK(contains(error_message([&] { check_mha_inputs(d, bad); }), "align (top-left) must agree with causal (bottom-right)"));
  bad.options.align = Align::bottom_right;
  CHECK(check_mha_inputs(d, bad).align == Align::bottom_right);
  bad.options.align = static_cast<Align>(5);
  CHECK(contains(error_message([&] { check_mha_inputs(d, bad); }), "align: invalid value 5"));
}

}  // TEST_SUITE
