// The layer's backward pass on the device (MultiHeadAttention::backward) against the fp64 reference
// (reference::multi_head_attention_backward): self and cross attention, kdim/vdim != E, GQA, no bias,
// key padding and attn masks, causal, sinks, ALiBi, a window, a logit cap, f32/f16/bf16. Every
// intermediate and gradient is poisoned (NaN bytes) before the first run, and a second run on fresh
// buffers must give the same bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mha_backward_pass.hpp"
#include "support.hpp"
#include "vkattn/mha.hpp"
#include "vkattn/mha_reference.hpp"
#include "vkattn/numeric.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct LayerCase {
  const char* name;
  int64_t batch = 2, seq_q = 5, seq_k = 7, embed = 16, heads = 2, kv_heads = 0, kdim = 0, vdim = 0;
  bool self = false, bias = true, sinks = false, alibi = false, padding = false;
  int attn_mask = 0;  // 0 none, 1 boolean (0 / -inf), 2 float (with some -inf)
  Causal causal = Causal::none;
  std::optional<Window> window;
  std::optional<float> softcap;
};

// As tests/backward.cpp: the error normalised by the largest reference value.
double tolerance(DType dtype) { return dtype == DType::f32 ? 2e-4 : dtype == DType::f16 ? 1e-2 : 6e-2; }

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& want, DType dtype) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double scale = 0.0, err = 0.0;
  std::size_t worst = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double e = std::isnan(got[i]) ? INFINITY : std::abs(double(got[i]) - want[i]);
    if (e > err) err = e, worst = i;
  }
  INFO("max error " << err << " at " << worst << " (got " << (got.empty() ? 0.0f : got[worst]) << ", want "
                    << (want.empty() ? 0.0 : want[worst]) << "), scale " << scale);
  CHECK(err / std::max(scale, 1e-3) <= tolerance(dtype));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

std::vector<float> normal(std::mt19937_64& rng, DType dtype, int64_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = round_to(dtype, dist(rng));
  return v;
}

// The case's layer and inputs (values rounded to the dtype: what the device sees).
struct Problem {
  MhaWeights w;
  std::vector<float> query, key, value, grad, attn_mask;
  std::vector<uint8_t> padding;
  MhaInputs in;
};

Problem make_problem(const LayerCase& c, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  MhaWeights& w = p.w;
  w.embed_dim = c.embed, w.num_heads = c.heads, w.kv_heads = c.kv_heads, w.kdim = c.kdim, w.vdim = c.vdim;
  w.bias = c.bias;
  const int64_t E = c.embed, kvd = w.effective_kv_heads() * (E / c.heads);
  const int64_t kdim = w.effective_kdim(), vdim = w.effective_vdim(), Sk = c.self ? c.seq_q : c.seq_k;
  const auto init = [&](int64_t n, int64_t fan_in) { return normal(rng, dtype, n, 1.0f / std::sqrt(float(fan_in))); };
  w.q_proj_weight = init(E * E, E);
  w.k_proj_weight = init(kvd * kdim, kdim);
  w.v_proj_weight = init(kvd * vdim, vdim);
  w.out_proj_weight = init(E * E, E);
  if (c.bias) w.in_proj_bias = normal(rng, dtype, E + 2 * kvd, 0.3f), w.out_proj_bias = normal(rng, dtype, E, 0.3f);
  for (int64_t h = 0; h < c.heads; ++h) {
    if (c.sinks) w.sinks.push_back(0.5f * float(h) - 0.3f);
    if (c.alibi) w.alibi_slopes.push_back(0.25f / float(h + 1));
  }
  p.query = normal(rng, dtype, c.batch * c.seq_q * E, 1.0f);
  if (!c.self) p.key = normal(rng, dtype, c.batch * Sk * kdim, 1.0f), p.value = normal(rng, dtype, c.batch * Sk * vdim, 1.0f);
  p.grad = normal(rng, dtype, c.batch * c.seq_q * E, 1.0f);
  if (c.padding) {
    // The last key of every batch element hidden, and of batch element 1 all: fully masked rows.
    p.padding.assign(static_cast<std::size_t>(c.batch * Sk), 0);
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t j = 0; j < Sk; ++j) p.padding[std::size_t(b * Sk + j)] = (j == Sk - 1 || b == 1 || rng() % 5 == 0);
  }
  if (c.attn_mask) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    p.attn_mask.resize(static_cast<std::size_t>(c.seq_q * Sk));
    for (float& m : p.attn_mask)
      m = rng() % 4 == 0 ? -INFINITY : c.attn_mask == 1 ? 0.0f : u(rng);
  }
  MhaInputs& in = p.in;
  in.batch = c.batch, in.seq_q = c.seq_q, in.seq_k = Sk;
  in.query = p.query, in.key = p.key, in.value = p.value;
  in.key_padding_mask = p.padding;
  in.attn_mask = p.attn_mask;
  in.options.causal = c.causal;
  in.options.window = c.window;
  in.options.softcap = c.softcap;
  return p;
}

void run_case(const LayerCase& c, DType dtype, uint64_t seed) {
  const std::string name = std::string(c.name) + " " + to_string(dtype);
  CAPTURE(name);
  if (!device_supports(dtype)) return;
  const Problem p = make_problem(c, dtype, seed);
  MultiHeadAttention layer(context(), p.w, dtype);

  const MhaBackwardResult got = detail::MhaBackwardPass::run_host(layer, p.in, p.grad, attention_path(), true);
  const reference::MhaGradients want = reference::multi_head_attention_backward(p.w, p.in, p.grad);
  expect_close("out", got.out, reference::multi_head_attention(p.w, p.in).out, dtype);
  expect_close("q_proj_weight", got.q_proj_weight, want.q_proj_weight, dtype);
  expect_close("k_proj_weight", got.k_proj_weight, want.k_proj_weight, dtype);
  expect_close("v_proj_weight", got.v_proj_weight, want.v_proj_weight, dtype);
  expect_close("in_proj_bias", got.in_proj_bias, want.in_proj_bias, dtype);
  expect_close("out_proj_weight", got.out_proj_weight, want.out_proj_weight, dtype);
  expect_close("out_proj_bias", got.out_proj_bias, want.out_proj_bias, dtype);
  expect_close("sinks", got.sinks, want.sinks, dtype);
  expect_close("query", got.query, want.query, dtype);
  expect_close("key", got.key, want.key, dtype);
  expect_close("value", got.value, want.value, dtype);
  expect_close("in_proj_weight", got.in_proj_weight(), want.in_proj_weight(), dtype);

  // The same inputs, fresh (unpoisoned) buffers: the same bits.
  const MhaBackwardResult again = layer.backward(p.in, p.grad, attention_path());
  for (const auto& [what, a, b] :
       {std::tuple{"out", &got.out, &again.out}, std::tuple{"q_proj_weight", &got.q_proj_weight, &again.q_proj_weight},
        std::tuple{"k_proj_weight", &got.k_proj_weight, &again.k_proj_weight},
        std::tuple{"v_proj_weight", &got.v_proj_weight, &again.v_proj_weight},
        std::tuple{"in_proj_bias", &got.in_proj_bias, &again.in_proj_bias},
        std::tuple{"out_proj_weight", &got.out_proj_weight, &again.out_proj_weight},
        std::tuple{"out_proj_bias", &got.out_proj_bias, &again.out_proj_bias}, std::tuple{"sinks", &got.sinks, &again.sinks},
        std::tuple{"query", &got.query, &again.query}, std::tuple{"key", &got.key, &again.key},
        std::tuple{"value", &got.value, &again.value}}) {
    INFO(what);
    CHECK(same_bits(*a, *b));
  }
}

const LayerCase kCases[] = {
    {.name = "cross attention"},
    {.name = "self attention", .seq_q = 6, .self = true},
    {.name = "kdim and vdim", .kdim = 5, .vdim = 11},
    {.name = "no bias", .kdim = 5, .bias = false},
    {.name = "GQA", .heads = 4, .kv_heads = 2, .kdim = 12},
    {.name = "self attention GQA", .seq_q = 6, .heads = 4, .kv_heads = 1, .self = true},
    {.name = "key padding", .padding = true},
    {.name = "boolean attn_mask", .attn_mask = 1},
    {.name = "float attn_mask and key padding", .padding = true, .attn_mask = 2},
    {.name = "causal top-left", .seq_q = 7, .self = true, .causal = Causal::top_left},
    {.name = "causal bottom-right", .seq_q = 4, .seq_k = 9, .causal = Causal::bottom_right},
    {.name = "sinks", .sinks = true, .padding = true},
    {.name = "alibi", .alibi = true, .causal = Causal::bottom_right},
    {.name = "window and softcap", .seq_q = 9, .self = true, .window = Window{2, 1}, .softcap = 5.0f},
    {.name = "one token, one head", .batch = 1, .seq_q = 1, .seq_k = 1, .embed = 8, .heads = 1},
    {.name = "wide heads", .batch = 1, .seq_q = 33, .seq_k = 40, .embed = 128, .heads = 2, .sinks = true},
};

}  // namespace

TEST_SUITE("mha-backward") {
  TEST_CASE("the layer's gradients on the device match the fp64 reference, and are deterministic") {
    uint64_t n = 0;
    for (const LayerCase& c : kCases)
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) run_case(c, dtype, case_seed(n++));
  }

  TEST_CASE("with no key (or no query) the layer's gradients are out_proj.bias's alone, as the reference's") {
    for (const LayerCase& c : {LayerCase{.name = "no key", .seq_k = 0}, LayerCase{.name = "no query", .seq_q = 0},
                               LayerCase{.name = "no key, self", .seq_q = 0, .self = true, .sinks = true}}) {
      INFO(c.name);
      const Problem p = make_problem(c, DType::f16, 4);
      MultiHeadAttention layer(context(), p.w, DType::f16);
      const MhaBackwardResult got = layer.backward(p.in, p.grad);
      const reference::MhaGradients want = reference::multi_head_attention_backward(p.w, p.in, p.grad);
      expect_close("out", got.out, reference::multi_head_attention(p.w, p.in).out, DType::f16);
      expect_close("out_proj_bias", got.out_proj_bias, want.out_proj_bias, DType::f32);
      expect_close("in_proj_weight", got.in_proj_weight(), want.in_proj_weight(), DType::f32);
      expect_close("q_proj_weight", got.q_proj_weight, want.q_proj_weight, DType::f32);
      expect_close("sinks", got.sinks, want.sinks, DType::f32);
      expect_close("query", got.query, want.query, DType::f32);
      expect_close("key", got.key, want.key, DType::f32);
    }
  }

  TEST_CASE("the layer's backward refuses dropout and a grad_out of another shape, dispatching nothing") {
    const Problem p = make_problem(LayerCase{.name = "refusals"}, DType::f32, 1);
    MultiHeadAttention layer(context(), p.w);
    std::vector<float> short_grad(p.grad.begin(), p.grad.end() - 1);
    CHECK(contains(error_message([&] { layer.backward(p.in, short_grad); }), "grad_out: expected (2, 5, 16)"));
    MhaInputs dropped = p.in;
    dropped.options.dropout = Dropout{0.1f, 1, 0};
    CHECK(contains(error_message([&] { layer.backward(dropped, p.grad); }), "dropout"));
  }

  TEST_CASE("set_weights replaces the weights the backward (and forward) read") {
    const Problem a = make_problem(LayerCase{.name = "a"}, DType::f32, 2);
    const Problem b = make_problem(LayerCase{.name = "b"}, DType::f32, 3);
    MultiHeadAttention layer(context(), a.w);
    layer.set_weights(b.w);
    const MhaBackwardResult got = layer.backward(a.in, a.grad);
    expect_close("query", got.query, reference::multi_head_attention_backward(b.w, a.in, a.grad).query, DType::f32);
    expect_close("out", layer.forward(a.in).out, reference::multi_head_attention(b.w, a.in).out, DType::f32);
    MhaWeights other = b.w;
    other.bias = false, other.in_proj_bias.clear(), other.out_proj_bias.clear();
    CHECK(contains(error_message([&] { layer.set_weights(other); }), "set_weights"));
  }
}
