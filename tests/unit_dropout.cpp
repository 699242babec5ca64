// Dropout's generator and keep rule (vkattn/dropout.hpp) and dropout in the fp64 forward references:
// Philox 4x32-10 against Random123's known-answer vectors, the threshold's edges, the keep rate, and
// O = (P∘Z)·V with P, the LSE and the weights returned untouched, dense, packed and in the layer.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "support.hpp"
#include "vkattn/dropout.hpp"
#include "vkattn/mha_reference.hpp"

using namespace vkattn;
using vkattn::test::error_message;

namespace {

std::vector<float> random_values(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Z of (b, h, i, j): 1/(1 - p) kept, 0 dropped.
double factor(const Dropout& d, int64_t heads, int64_t b, int64_t h, int64_t i, int64_t j) {
  return dropout_keep(d, heads, b, h, i, j) ? 1.0 / (1.0 - static_cast<double>(d.p)) : 0.0;
}

// E = 2, one head, identity projections, no bias: the layer's out is its attention, Σ P Z V.
MhaWeights identity_layer() {
  MhaWeights w;
  w.embed_dim = 2;
  w.num_heads = 1;
  w.bias = false;
  w.q_proj_weight = w.k_proj_weight = w.v_proj_weight = w.out_proj_weight = {1, 0, 0, 1};
  return w;
}

// A dense BHSD problem with random data.
struct Dense {
  int64_t batch, heads, kv_heads, seq_q, seq_k, dim_qk, dim_v;
  std::vector<float> q, k, v;
  AttentionOptions options;

  Dense(std::mt19937& rng, int64_t b, int64_t h, int64_t g, int64_t sq, int64_t sk, int64_t dqk, int64_t dv)
      : batch(b), heads(h), kv_heads(g), seq_q(sq), seq_k(sk), dim_qk(dqk), dim_v(dv) {
    q = random_values(rng, static_cast<std::size_t>(b * h * sq * dqk));
    k = random_values(rng, static_cast<std::size_t>(b * g * sk * dqk));
    v = random_values(rng, static_cast<std::size_t>(b * g * sk * dv));
  }
  reference::Inputs inputs() const {
    reference::Inputs in;
    in.q_layout = TensorLayout::bhsd(DType::f32, batch, heads, seq_q, dim_qk);
    in.k_layout = TensorLayout::bhsd(DType::f32, batch, kv_heads, seq_k, dim_qk);
    in.v_layout = TensorLayout::bhsd(DType::f32, batch, kv_heads, seq_k, dim_v);
    in.q = q;
    in.k = k;
    in.v = v;
    in.options = options;
    in.weights = true;
    return in;
  }
};

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("dropout: Philox 4x32-10 gives Random123's known-answer vectors") {
    using Words = std::array<uint32_t, 4>;
    CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
    CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
          Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
    CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
          Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  }

  TEST_CASE("dropout: the threshold is floor(p·2^32), exactly") {
    CHECK(dropout_threshold(0.0f) == 0u);
    CHECK(dropout_threshold(0.5f) == 0x80000000u);
    CHECK(dropout_threshold(0.25f) == 0x40000000u);
    // 0.1f = 13421773·2^-27: times 2^32 is 13421773·32, an integer.
    CHECK(dropout_threshold(0.1f) == 13421773u * 32u);
    // The largest f32 below 1, 1 - 2^-24: 2^32 - 2^8.
    const float below_one = std::nextafter(1.0f, 0.0f);
    CHECK(dropout_threshold(below_one) == 0xffffff00u);
    // The smallest positive f32 (2^-149): below one step of 2^-32, so nothing is dropped.
    CHECK(dropout_threshold(std::numeric_limits<float>::denorm_min()) == 0u);
    CHECK(dropout_threshold(0x1p-32f) == 1u);
  }

  TEST_CASE("dropout: the keep rule reads word j % 4 of the counter {j / 4, i, b·heads + h, offset}") {
    const Dropout d{0.5f, 0x0123456789abcdefull, 77};
    const uint32_t threshold = dropout_threshold(d.p);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t i = 0; i < 5; ++i)
          for (int64_t j = 0; j < 9; ++j) {
            const auto words = philox4x32_10(
                {static_cast<uint32_t>(j / 4), static_cast<uint32_t>(i), static_cast<uint32_t>(b * 3 + h), 77},
                {0x89abcdefu, 0x01234567u});
            CHECK(dropout_keep(d, 3, b, h, i, j) == (words[static_cast<std::size_t>(j % 4)] >= threshold));
          }
  }

  TEST_CASE("dropout: p = 0 keeps every weight; p just below 1 drops nearly all") {
    const Dropout none{0.0f, 12345, 0};
    for (int64_t i = 0; i < 64; ++i)
      for (int64_t j = 0; j < 64; ++j) CHECK(dropout_keep(none, 2, 1, 1, i, j));
    const Dropout almost{std::nextafter(1.0f, 0.0f), 12345, 0};
    int kept = 0;
    for (int64_t j = 0; j < 100000; ++j) kept += dropout_keep(almost, 1, 0, 0, 0, j);
    CHECK(kept <= 5);  // expected 100000·2^-24, about 0.006
  }

  TEST_CASE("dropout: the keep rate of 1e5 draws is within 5 sigma of 1 - p") {
    for (const float p : {0.1f, 0.5f, 0.9f}) {
      const Dropout d{p, 0x9e3779b97f4a7c15ull, 3};
      const int64_t n = 100000;
      int64_t kept = 0;
      for (int64_t r = 0; r < n; ++r) kept += dropout_keep(d, 4, r % 3, r % 4, r / 400, r % 400);
      const double rate = static_cast<double>(kept) / static_cast<double>(n);
      const double sigma = std::sqrt(static_cast<double>(p) * (1.0 - p) / static_cast<double>(n));
      INFO("p " << p << ", keep rate " << rate);
      CHECK(std::fabs(rate - (1.0 - p)) < 5.0 * sigma);
    }
  }

  TEST_CASE("dropout: another seed or offset gives another mask") {
    const Dropout base{0.5f, 42, 0};
    Dropout other_seed = base, other_high_seed = base, other_offset = base;
    other_seed.seed = 43;
    other_high_seed.seed = 42 + (1ull << 32);  // the key's second word
    other_offset.offset = 1;
    int differ_seed = 0, differ_high = 0, differ_offset = 0, differ_head = 0;
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t j = 0; j < 16; ++j) {
        const bool k = dropout_keep(base, 2, 0, 0, i, j);
        differ_seed += k != dropout_keep(other_seed, 2, 0, 0, i, j);
        differ_high += k != dropout_keep(other_high_seed, 2, 0, 0, i, j);
        differ_offset += k != dropout_keep(other_offset, 2, 0, 0, i, j);
        differ_head += k != dropout_keep(base, 2, 0, 1, i, j);
      }
    // About half of 256 each; far from 0.
    CHECK(differ_seed > 64);
    CHECK(differ_high > 64);
    CHECK(differ_offset > 64);
    CHECK(differ_head > 64);
    // Only the counter's word b·heads + h matters: (b, h) = (1, 0) with 2 heads and (0, 2) with 4
    // heads are both word 2.
    for (int64_t j = 0; j < 16; ++j) CHECK(dropout_keep(base, 2, 1, 0, 3, j) == dropout_keep(base, 4, 0, 2, 3, j));
  }

  TEST_CASE("dropout: p must be in [0, 1), in every call that takes options") {
    CHECK(error_message([] { check_dropout({1.0f, 0, 0}); }) == "dropout: p must be in [0, 1), got 1");
    CHECK(error_message([] { check_dropout({-0.5f, 0, 0}); }) == "dropout: p must be in [0, 1), got -0.5");
    CHECK(error_message([] { check_dropout({std::numeric_limits<float>::quiet_NaN(), 0, 0}); }) ==
          "dropout: p must be in [0, 1), got nan");
    CHECK(error_message([] { check_dropout({std::numeric_limits<float>::infinity(), 0, 0}); }) ==
          "dropout: p must be in [0, 1), got inf");
    CHECK(error_message([] { check_dropout({0.1f, 0, 0}); }) == "<no vkattn::Error thrown>");
    CHECK(error_message([] { check_dropout({0.0f, 0, 0}); }) == "<no vkattn::Error thrown>");

    std::mt19937 rng(1);
    Dense c(rng, 1, 1, 1, 2, 3, 4, 4);
    c.options.dropout = Dropout{1.5f, 0, 0};
    CHECK(error_message([&] { reference::attention(c.inputs()); }) == "dropout: p must be in [0, 1), got 1.5");
    const MhaWeights w = identity_layer();
    const std::vector<float> x(4, 0.5f);
    MhaInputs mi;
    mi.batch = 1, mi.seq_q = 2, mi.seq_k = 2;
    mi.query = x;
    mi.options.dropout = Dropout{1.0f, 0, 0};
    CHECK(error_message([&] { reference::multi_head_attention(w, mi); }) == "dropout: p must be in [0, 1), got 1");
  }

  TEST_CASE("dropout: the dense reference's O is (P∘Z)·V; P, the LSE and the weights are untouched") {
    std::mt19937 rng(2);
    Dense c(rng, 2, 4, 2, 5, 7, 3, 4);
    c.options.causal = Causal::bottom_right;
    const reference::Outputs plain = reference::attention(c.inputs());
    c.options.dropout = Dropout{0.3f, 99, 5};
    const reference::Outputs dropped = reference::attention(c.inputs());
    CHECK(dropped.lse == plain.lse);
    CHECK(dropped.weights == plain.weights);
    int differ = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t i = 0; i < c.seq_q; ++i)
          for (int64_t d = 0; d < c.dim_v; ++d) {
            double expected = 0.0;
            for (int64_t j = 0; j < c.seq_k; ++j)
              expected += plain.weights[static_cast<std::size_t>(((b * c.heads + h) * c.seq_q + i) * c.seq_k + j)] *
                          factor(*c.options.dropout, c.heads, b, h, i, j) *
                          c.v[static_cast<std::size_t>(((b * c.kv_heads + h / 2) * c.seq_k + j) * c.dim_v + d)];
            CHECK(dropped.at(b, h, i, d) == doctest::Approx(expected).epsilon(1e-12));
            differ += dropped.at(b, h, i, d) != plain.at(b, h, i, d);
          }
    CHECK(differ > 0);
    // p = 0 is no dropout, bit for bit.
    c.options.dropout = Dropout{0.0f, 99, 5};
    const reference::Outputs zero = reference::attention(c.inputs());
    CHECK(zero.out == plain.out);
  }

  TEST_CASE("dropout: a packed batch's sequence b draws batch element b's mask, i and j from its first row") {
    std::mt19937 rng(3);
    const int64_t heads = 2, kv_heads = 1, dim = 3, dim_v = 2;
    const std::vector<int32_t> cu_q = {0, 3, 3, 7}, cu_k = {0, 4, 6, 11};
    const std::vector<float> q = random_values(rng, static_cast<std::size_t>(7 * heads * dim));
    const std::vector<float> k = random_values(rng, static_cast<std::size_t>(11 * kv_heads * dim));
    const std::vector<float> v = random_values(rng, static_cast<std::size_t>(11 * kv_heads * dim_v));
    reference::VarlenInputs in;
    in.q_layout = packed_layout(DType::f32, 7, heads, dim);
    in.k_layout = packed_layout(DType::f32, 11, kv_heads, dim);
    in.v_layout = packed_layout(DType::f32, 11, kv_heads, dim_v);
    in.q = q;
    in.k.values = k;
    in.v.values = v;
    in.cu_seqlens_q = cu_q;
    in.cu_seqlens_k = cu_k;
    in.weights = true;
    const Dropout d{0.4f, 7, 1};
    in.options.dropout = d;
    const reference::VarlenOutputs o = reference::varlen_attention(in);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t row = cu_q[static_cast<std::size_t>(b)]; row < cu_q[static_cast<std::size_t>(b + 1)]; ++row)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t x = 0; x < dim_v; ++x) {
            double expected = 0.0;
            for (int64_t key = cu_k[static_cast<std::size_t>(b)]; key < cu_k[static_cast<std::size_t>(b + 1)]; ++key)
              expected += o.weights[static_cast<std::size_t>((h * 7 + row) * 11 + key)] *
                          factor(d, heads, b, h, row - cu_q[static_cast<std::size_t>(b)],
                                 key - cu_k[static_cast<std::size_t>(b)]) *
                          v[static_cast<std::size_t>(key * dim_v + x)];
            CHECK(o.at(row, h, x) == doctest::Approx(expected).epsilon(1e-12));
          }
  }

  TEST_CASE("dropout: the layer reference drops the attention weights in O, not those it returns") {
    const MhaWeights w = identity_layer();
    std::mt19937 rng(4);
    const int64_t batch = 2, sq = 3, sk = 6;
    const std::vector<float> q = random_values(rng, batch * sq * 2), k = random_values(rng, batch * sk * 2),
                             v = random_values(rng, batch * sk * 2);
    MhaInputs in;
    in.batch = batch, in.seq_q = sq, in.seq_k = sk;
    in.query = q, in.key = k, in.value = v;
    in.need_weights = true;
    in.average_weights = false;
    const reference::MhaOutputs plain = reference::multi_head_attention(w, in);
    const Dropout d{0.5f, 2024, 0};
    in.options.dropout = d;
    const reference::MhaOutputs dropped = reference::multi_head_attention(w, in);
    CHECK(dropped.weights == plain.weights);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t e = 0; e < 2; ++e) {
          double expected = 0.0;
          for (int64_t j = 0; j < sk; ++j)
            expected += plain.weights[static_cast<std::size_t>((b * sq + i) * sk + j)] * factor(d, 1, b, 0, i, j) *
                        v[static_cast<std::size_t>((b * sk + j) * 2 + e)];
          CHECK(dropped.out[static_cast<std::size_t>((b * sq + i) * 2 + e)] == doctest::Approx(expected).epsilon(1e-12));
        }
  }
}
