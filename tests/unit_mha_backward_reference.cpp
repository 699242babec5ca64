// The layer's fp64 backward reference (reference::multi_head_attention_backward) against central
// finite differences of the layer's fp64 forward reference: L = Σ dOut∘out, each parameter and input
// nudged by ±h. Every value is a multiple of 1/64 and h = 2^-14, so each nudged value is an exact f32.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "support.hpp"
#include "vkattn/mha_reference.hpp"

using namespace vkattn;
using vkattn::test::error_message;

namespace {

constexpr float kStep = 0x1p-14f;

// n multiples of 1/64 in [-range, range].
std::vector<float> grid_values(std::mt19937& rng, std::size_t n, float range) {
  const int steps = static_cast<int>(range * 64.0f);
  std::uniform_int_distribution<int> dist(-steps, steps);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(rng)) / 64.0f;
  return v;
}

// A tiny layer and its inputs, all owned (the spans point into these vectors).
struct Layer {
  MhaWeights w;
  int64_t batch = 2, seq_q = 3, seq_k = 4;
  bool self_attention = false;
  std::vector<float> query, key, value, grad;
  std::vector<uint8_t> key_padding_mask;
  std::vector<float> attn_mask;
  AttentionOptions options;

  // E = 4, 2 heads of dim 2 sharing one KV head, kdim 3, vdim 5 (cross-attention) unless self.
  Layer(uint32_t seed, bool self, bool bias = true) : self_attention(self) {
    std::mt19937 rng(seed);
    w.embed_dim = 4;
    w.num_heads = 2;
    w.kv_heads = self ? 2 : 1;
    w.kdim = self ? 4 : 3;
    w.vdim = self ? 4 : 5;
    w.bias = bias;
    const int64_t kvd = w.kv_heads * 2;
    w.q_proj_weight = grid_values(rng, 16, 0.75f);
    w.k_proj_weight = grid_values(rng, static_cast<std::size_t>(kvd * w.kdim), 0.75f);
    w.v_proj_weight = grid_values(rng, static_cast<std::size_t>(kvd * w.vdim), 0.75f);
    w.out_proj_weight = grid_values(rng, 16, 0.75f);
    if (bias) {
      w.in_proj_bias = grid_values(rng, static_cast<std::size_t>(4 + 2 * kvd), 0.5f);
      w.out_proj_bias = grid_values(rng, 4, 0.5f);
    }
    if (self) seq_k = seq_q;
    query = grid_values(rng, static_cast<std::size_t>(batch * seq_q * 4), 1.0f);
    if (!self) {
      key = grid_values(rng, static_cast<std::size_t>(batch * seq_k * w.kdim), 1.0f);
      value = grid_values(rng, static_cast<std::size_t>(batch * seq_k * w.vdim), 1.0f);
    }
    grad = grid_values(rng, static_cast<std::size_t>(batch * seq_q * 4), 1.0f);
  }

  MhaInputs inputs() const {
    MhaInputs in;
    in.batch = batch, in.seq_q = seq_q, in.seq_k = seq_k;
    in.query = query;
    in.key = key;
    in.value = value;
    in.key_padding_mask = key_padding_mask;
    in.attn_mask = attn_mask;
    in.options = options;
    return in;
  }

  double loss() const {
    const reference::MhaOutputs o = reference::multi_head_attention(w, inputs());
    double l = 0.0;
    for (std::size_t n = 0; n < o.out.size(); ++n) l += static_cast<double>(grad[n]) * o.out[n];
    return l;
  }
};

// Each analytic gradient against the central difference of its value; the largest |gradient|.
double check_against_differences(const char* name, std::vector<float>& x, const std::vector<double>& analytic,
                                 const std::function<double()>& loss) {
  REQUIRE(analytic.size() == x.size());
  double largest = 0.0;
  for (std::size_t n = 0; n < x.size(); ++n) {
    const float x0 = x[n];
    x[n] = x0 + kStep;
    const double up = loss();
    x[n] = x0 - kStep;
    const double down = loss();
    x[n] = x0;
    const double numeric = (up - down) / (2.0 * static_cast<double>(kStep));
    INFO(name << "[" << n << "]: analytic " << analytic[n] << ", central difference " << numeric);
    CHECK(std::fabs(analytic[n] - numeric) <= 2e-6 + 1e-5 * std::fabs(numeric));
    largest = std::max(largest, std::fabs(analytic[n]));
  }
  return largest;
}

reference::MhaGradients check_layer(Layer& l) {
  const reference::MhaGradients g = reference::multi_head_attention_backward(l.w, l.inputs(), l.grad);
  const auto loss = [&] { return l.loss(); };
  CHECK(check_against_differences("q_proj_weight", l.w.q_proj_weight, g.q_proj_weight, loss) > 1e-3);
  CHECK(check_against_differences("k_proj_weight", l.w.k_proj_weight, g.k_proj_weight, loss) > 1e-3);
  CHECK(check_against_differences("v_proj_weight", l.w.v_proj_weight, g.v_proj_weight, loss) > 1e-3);
  CHECK(check_against_differences("out_proj_weight", l.w.out_proj_weight, g.out_proj_weight, loss) > 1e-3);
  if (l.w.bias) {
    CHECK(check_against_differences("in_proj_bias", l.w.in_proj_bias, g.in_proj_bias, loss) > 1e-3);
    CHECK(check_against_differences("out_proj_bias", l.w.out_proj_bias, g.out_proj_bias, loss) > 1e-3);
  } else {
    CHECK(g.in_proj_bias.empty());
    CHECK(g.out_proj_bias.empty());
  }
  if (!l.w.sinks.empty()) {
    CHECK(check_against_differences("sinks", l.w.sinks, g.sinks, loss) > 1e-3);
  } else {
    CHECK(g.sinks.empty());
  }
  CHECK(check_against_differences("query", l.query, g.query, loss) > 1e-3);
  if (l.self_attention) {
    CHECK(g.key.empty());
    CHECK(g.value.empty());
  } else {
    CHECK(check_against_differences("key", l.key, g.key, loss) > 1e-3);
    CHECK(check_against_differences("value", l.value, g.value, loss) > 1e-3);
  }
  return g;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("mha backward reference: finite differences, cross-attention with GQA") {
    Layer l(1, false);
    check_layer(l);
    Layer no_bias(2, false, false);
    check_layer(no_bias);
  }

  TEST_CASE("mha backward reference: finite differences, self-attention (query is key and value)") {
    Layer l(3, true);
    l.options.causal = Causal::top_left;
    const reference::MhaGradients g = check_layer(l);
    // The packed in_proj_weight's gradient stacks q's, k's and v's.
    const std::vector<double> stacked = g.in_proj_weight();
    REQUIRE(stacked.size() == 48);
    CHECK(std::vector<double>(stacked.begin(), stacked.begin() + 16) == g.q_proj_weight);
    CHECK(std::vector<double>(stacked.begin() + 16, stacked.begin() + 32) == g.k_proj_weight);
    CHECK(std::vector<double>(stacked.begin() + 32, stacked.end()) == g.v_proj_weight);
    Layer cross(4, false);
    CHECK(reference::multi_head_attention_backward(cross.w, cross.inputs(), cross.grad).in_proj_weight().empty());
  }

  TEST_CASE("mha backward reference: finite differences with every modifier, masks and dropout") {
    Layer l(5, false);
    l.w.sinks = {0.5f, -0.25f};
    l.w.alibi_slopes = {0.25f, 0.5f};
    l.options.causal = Causal::bottom_right;
    l.options.softcap = 1.0f;
    l.options.scale = 0.875f;
    l.options.dropout = Dropout{0.3f, 11, 1};
    l.key_padding_mask = {0, 0, 1, 0, 0, 0, 0, 0};  // batch 0 ignores key 2
    l.attn_mask = {0.25f, -0.5f, 0.0f, 0.0f, 0.0f, 0.5f, -std::numeric_limits<float>::infinity(), 0.0f,
                   0.0f, 0.0f, 0.0f, -0.25f};
    check_layer(l);
    l.options.dropout.reset();
    l.options.window = Window{1, 0};
    check_layer(l);
  }

  TEST_CASE("mha backward reference: a fully masked row passes nothing back") {
    Layer l(6, false);
    // Batch 0 ignores every key: its attention output is 0, so its query, key and value get nothing.
    l.key_padding_mask = {1, 1, 1, 1, 0, 0, 0, 0};
    l.w.sinks = {0.5f, -0.25f};
    const reference::MhaGradients g = check_layer(l);
    for (std::size_t n = 0; n < 12; ++n) CHECK(g.query[n] == 0.0);
    for (std::size_t n = 0; n < 12; ++n) CHECK(g.key[n] == 0.0);
    for (std::size_t n = 0; n < 20; ++n) CHECK(g.value[n] == 0.0);
  }

  TEST_CASE("mha backward reference: grad_out is (batch, seq_q, E)") {
    Layer l(7, false);
    const std::vector<float> short_grad(l.grad.begin(), l.grad.end() - 1);
    CHECK(error_message([&] { reference::multi_head_attention_backward(l.w, l.inputs(), short_grad); }) ==
          "grad_out: expected 24 values (2, 3, 4), given 23 (the layer's output: batch, seq_q, embed_dim)");
  }
}
