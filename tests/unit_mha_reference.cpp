// The fp64 multi-head attention layer reference on problems small enough to compute by hand
// (torch.nn.MultiheadAttention semantics, the contract (docs/semantics.md)): checked against arithmetic, not itself.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "support.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha_reference.hpp"

using namespace vkattn;
using vkattn::MhaInputs;
using vkattn::MhaWeights;
using vkattn::reference::multi_head_attention;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

// E = 2 layer with identity q/k/v projections, zero in-projection biases and the given output
// projection (row-major (2, 2)) and bias.
MhaWeights identity_layer(int64_t heads, std::vector<float> wo = {1, 0, 0, 1}, std::vector<float> bo = {0, 0}) {
  MhaWeights w;
  w.embed_dim = 2;
  w.num_heads = heads;
  w.bias = true;
  w.q_proj_weight = {1, 0, 0, 1};
  w.k_proj_weight = {1, 0, 0, 1};
  w.v_proj_weight = {1, 0, 0, 1};
  w.in_proj_bias = {0, 0, 0, 0, 0, 0};
  w.out_proj_weight = std::move(wo);
  w.out_proj_bias = std::move(bo);
  return w;
}

MhaInputs make_inputs(int64_t batch, int64_t sq, int64_t sk, const std::vector<float>& q, const std::vector<float>& k,
                      const std::vector<float>& v) {
  MhaInputs in;
  in.batch = batch;
  in.seq_q = sq;
  in.seq_k = sk;
  in.query = q;
  in.key = k;
  in.value = v;
  return in;
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("mha reference: one key gives value·Woᵀ + bo") {
  const MhaWeights w = identity_layer(1, {1, 2, 3, 4}, {0.5f, -1.0f});
  const std::vector<float> q = {0.3f, -0.7f}, k = {2, 1}, v = {3, 5};
  MhaInputs in = make_inputs(1, 1, 1, q, k, v);
  in.need_weights = true;
  const auto o = multi_head_attention(w, in);
  REQUIRE(o.out.size() == 2);
  CHECK(o.out[0] == doctest::Approx(1 * 3 + 2 * 5 + 0.5).epsilon(1e-14));
  CHECK(o.out[1] == doctest::Approx(3 * 3 + 4 * 5 - 1.0).epsilon(1e-14));
  REQUIRE(o.weights.size() == 1);
  CHECK(o.weights[0] == 1.0);
}

TEST_CASE("mha reference: from_packed splits in_proj_weight into Wq, Wk, Wv") {
  // Wq = 0 makes every score 0 (uniform weights); Wk arbitrary; Wv = 2·I; Wo = I.
  const std::vector<float> in_w = {0, 0, 0, 0, /*Wk*/ 5, -3, 7, 1, /*Wv*/ 2, 0, 0, 2};
  const std::vector<float> in_b = {0, 0, 9, 9, 1, -1};  // q, k, v biases
  const std::vector<float> out_w = {1, 0, 0, 1}, out_b = {10, 20};
  const MhaWeights w = MhaWeights::from_packed(2, 1, in_w, in_b, out_w, out_b);
  CHECK(w.bias);
  const std::vector<float> q = {4, 4}, k = {1, 2, 3, 4}, v = {1, 2, 3, 4};
  const auto o = multi_head_attention(w, make_inputs(1, 1, 2, q, k, v));
  // v' = 2·v + (1, -1): (3, 3) and (7, 7); mean (5, 5); + out bias.
  CHECK(o.out[0] == doctest::Approx(15.0).epsilon(1e-14));
  CHECK(o.out[1] == doctest::Approx(25.0).epsilon(1e-14));
  CHECK(error_message([&] { MhaWeights::from_packed(2, 1, std::vector<float>(11), in_b, out_w, out_b); }) ==
        "in_proj_weight: expected 12 values (6, 2), given 11");
}

TEST_CASE("mha reference: equal scores give 0.5/0.5 and the mean") {
  const MhaWeights w = identity_layer(1);
  const std::vector<float> q = {0, 0}, k = {1, -2, 4, 3}, v = {1, 2, 3, 6};
  MhaInputs in = make_inputs(1, 1, 2, q, k, v);
  in.need_weights = true;
  const auto o = multi_head_attention(w, in);
  REQUIRE(o.weights.size() == 2);
  CHECK(o.weights[0] == 0.5);
  CHECK(o.weights[1] == 0.5);
  CHECK(o.out[0] == doctest::Approx(2.0).epsilon(1e-14));
  CHECK(o.out[1] == doctest::Approx(4.0).epsilon(1e-14));
}

TEST_CASE("mha reference: key_padding_mask (nonzero = ignore) removes keys, even NaN ones") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const MhaWeights w = identity_layer(1);
  const std::vector<float> q = {0, 0, 0, 0};
  // Batch 0: key/value 1 is NaN and masked. Batch 1: key 0 masked.
  const std::vector<float> k = {1, 1, nan, nan, 2, 2, /**/ 1, 1, 1, 1, 1, 1};
  const std::vector<float> v = {1, 0, nan, nan, 0, 1, /**/ 100, 100, 3, 4, 5, 8};
  MhaInputs in = make_inputs(2, 1, 3, q, k, v);
  in.key_padding_mask = {0, 1, 0, /**/ 1, 0, 0};
  in.need_weights = true;
  in.average_weights = false;
  const auto o = multi_head_attention(w, in);
  REQUIRE(o.weights.size() == 6);
  CHECK(o.weights[0] == 0.5);
  CHECK(o.weights[1] == 0.0);
  CHECK(o.weights[2] == 0.5);
  CHECK(o.weights[3] == 0.0);
  CHECK(o.weights[4] == 0.5);
  CHECK(o.weights[5] == 0.5);
  CHECK(o.out[0] == doctest::Approx(0.5).epsilon(1e-14));
  CHECK(o.out[1] == doctest::Approx(0.5).epsilon(1e-14));
  CHECK(o.out[2] == doctest::Approx(4.0).epsilon(1e-14));
  CHECK(o.out[3] == doctest::Approx(6.0).epsilon(1e-14));
}

TEST_CASE("mha reference: causal top-left vs bottom-right with seq_q != seq_k") {
  const MhaWeights w = identity_layer(1);
  // Zero queries: every visible key scores 0, so weights are uniform over the visible keys.
  const std::vector<float> k = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> v = {1, 0, 2, 0, 4, 0, 8, 0};

  SUBCASE("seq_q = 2 < seq_k = 4") {
    const std::vector<float> q = {0, 0, 0, 0};
    MhaInputs in = make_inputs(1, 2, 4, q, k, v);
    in.need_weights = true;
    in.options.causal = Causal::top_left;  // row 0 sees key 0; row 1 sees keys 0, 1
    auto o = multi_head_attention(w, in);
    const std::vector<double> tl = {1, 0, 0, 0, 0.5, 0.5, 0, 0};
    for (std::size_t n = 0; n < tl.size(); ++n) CHECK(o.weights[n] == doctest::Approx(tl[n]).epsilon(1e-14));
    CHECK(o.weights[1] == 0.0);
    CHECK(o.weights[2] == 0.0);
    CHECK(o.weights[3] == 0.0);
    CHECK(o.weights[6] == 0.0);
    CHECK(o.weights[7] == 0.0);
    CHECK(o.out[0] == doctest::Approx(1.0).epsilon(1e-14));
    CHECK(o.out[2] == doctest::Approx(1.5).epsilon(1e-14));

    in.options.causal = Causal::bottom_right;  // j <= i + 2: row 0 sees keys 0..2; row 1 all four
    o = multi_head_attention(w, in);
    const double third = 1.0 / 3.0;
    const std::vector<double> br = {third, third, third, 0, 0.25, 0.25, 0.25, 0.25};
    for (std::size_t n = 0; n < br.size(); ++n) CHECK(o.weights[n] == doctest::Approx(br[n]).epsilon(1e-14));
    CHECK(o.weights[3] == 0.0);
    CHECK(o.out[0] == doctest::Approx(7.0 / 3.0).epsilon(1e-14));
    CHECK(o.out[2] == doctest::Approx(15.0 / 4.0).epsilon(1e-14));
  }

  SUBCASE("seq_q = 3 > seq_k = 2, bottom-right: row 0 fully masked gives out_proj_bias and zero weights") {
    const MhaWeights wb = identity_layer(1, {1, 0, 0, 1}, {0.25f, -0.5f});
    const std::vector<float> q = {0, 0, 0, 0, 0, 0};
    const std::vector<float> k2(k.begin(), k.begin() + 4), v2(v.begin(), v.begin() + 4);
    MhaInputs in = make_inputs(1, 3, 2, q, k2, v2);
    in.need_weights = true;
    in.options.causal = Causal::bottom_right;  // j <= i - 1: row 0 none, row 1 key 0, row 2 keys 0, 1
    const auto o = multi_head_attention(wb, in);
    const std::vector<double> br = {0, 0, 1, 0, 0.5, 0.5};
    for (std::size_t n = 0; n < br.size(); ++n) CHECK(o.weights[n] == doctest::Approx(br[n]).epsilon(1e-14));
    CHECK(o.weights[0] == 0.0);
    CHECK(o.weights[1] == 0.0);
    CHECK(o.weights[3] == 0.0);
    CHECK(o.out[0] == 0.25);  // attention output 0 (not NaN as in PyTorch), then + out_proj_bias
    CHECK(o.out[1] == -0.5);
    CHECK(o.out[2] == doctest::Approx(1.25).epsilon(1e-14));
    CHECK(o.out[4] == doctest::Approx(1.75).epsilon(1e-14));
  }
}

TEST_CASE("mha reference: average_weights is the mean over heads of the per-head weights") {
  // H = 2, E = 2: head dim 1, scale 1. Head 0 reads feature 0, head 1 feature 1.
  const MhaWeights w = identity_layer(2);
  const std::vector<float> q = {1, 2}, k = {1, 0, 0, 1}, v = {1, 0, 0, 1};
  MhaInputs in = make_inputs(1, 1, 2, q, k, v);
  in.need_weights = true;
  in.average_weights = false;
  const auto per_head = multi_head_attention(w, in);
  const double e = std::exp(1.0), e2 = std::exp(2.0);
  // Head 0: scores (1, 0); head 1: scores (0, 2).
  const std::vector<double> expect = {e / (e + 1), 1 / (e + 1), 1 / (1 + e2), e2 / (1 + e2)};
  REQUIRE(per_head.weights.size() == 4);
  for (std::size_t n = 0; n < 4; ++n) CHECK(per_head.weights[n] == doctest::Approx(expect[n]).epsilon(1e-14));
  CHECK(per_head.out[0] == doctest::Approx(e / (e + 1)).epsilon(1e-14));
  CHECK(per_head.out[1] == doctest::Approx(e2 / (1 + e2)).epsilon(1e-14));

  in.average_weights = true;
  const auto avg = multi_head_attention(w, in);
  REQUIRE(avg.weights.size() == 2);
  CHECK(avg.weights[0] == doctest::Approx((expect[0] + expect[2]) / 2).epsilon(1e-14));
  CHECK(avg.weights[1] == doctest::Approx((expect[1] + expect[3]) / 2).epsilon(1e-14));
  CHECK(avg.out == per_head.out);

  in.need_weights = false;
  CHECK(multi_head_attention(w, in).weights.empty());
}

TEST_CASE("mha reference: grouped KV heads (kv_heads = 1 shared by both query heads)") {
  MhaWeights w = identity_layer(2);
  w.kv_heads = 1;
  w.k_proj_weight = {1, 0};  // (kv_dim 1, kdim 2)
  w.v_proj_weight = {1, 0};
  w.in_proj_bias = {0, 0, 0, 0};  // E + 2 * kv_dim
  const std::vector<float> q = {1, 2}, k = {1, 0, 0, 1}, v = {3, 0, 5, 0};
  const auto o = multi_head_attention(w, make_inputs(1, 1, 2, q, k, v));
  // Projected keys (1, 0), values (3, 5). Head 0: scores (1, 0); head 1: scores (2, 0).
  const double e = std::exp(1.0), e2 = std::exp(2.0);
  CHECK(o.out[0] == doctest::Approx((3 * e + 5) / (e + 1)).epsilon(1e-14));
  CHECK(o.out[1] == doctest::Approx((3 * e2 + 5) / (e2 + 1)).epsilon(1e-14));
}

namespace {

// E = 4, H = 2 layer with random projections and biases (seeded): the mask and self-attention tests
// compare two runs of the reference, so the numbers only have to be generic, not hand-checkable.
MhaWeights random_layer(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  const auto fill = [&](std::size_t n) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    return x;
  };
  MhaWeights w;
  w.embed_dim = 4;
  w.num_heads = 2;
  w.q_proj_weight = fill(16);
  w.k_proj_weight = fill(16);
  w.v_proj_weight = fill(16);
  w.in_proj_bias = fill(12);
  w.out_proj_weight = fill(16);
  w.out_proj_bias = fill(4);
  return w;
}

std::vector<float> random_values(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace

TEST_CASE("mha reference: attn_mask of zeros changes nothing") {
  const MhaWeights w = random_layer(11);
  const std::vector<float> q = random_values(2 * 3 * 4, 1), k = random_values(2 * 5 * 4, 2),
                           v = random_values(2 * 5 * 4, 3);
  MhaInputs in = make_inputs(2, 3, 5, q, k, v);
  in.need_weights = true;
  in.average_weights = false;
  in.options.causal = Causal::bottom_right;
  const auto plain = multi_head_attention(w, in);
  in.attn_mask.assign(3 * 5, 0.0f);
  const auto zeros = multi_head_attention(w, in);
  CHECK(zeros.out == plain.out);
  CHECK(zeros.weights == plain.weights);
}

TEST_CASE("mha reference: attn_mask is added to the scaled score") {
  // One head, zero queries: every score is 0, so an additive mask (0, ln 3) gives weights 1/4, 3/4.
  const MhaWeights w = identity_layer(1);
  const std::vector<float> q = {0, 0}, k = {1, 2, 3, 4}, v = {1, 0, 5, 8};
  MhaInputs in = make_inputs(1, 1, 2, q, k, v);
  in.need_weights = true;
  in.attn_mask = {0.0f, static_cast<float>(std::log(3.0))};
  const auto o = multi_head_attention(w, in);
  CHECK(o.weights[0] == doctest::Approx(0.25).epsilon(1e-7));
  CHECK(o.weights[1] == doctest::Approx(0.75).epsilon(1e-7));
  CHECK(o.out[0] == doctest::Approx(0.25 * 1 + 0.75 * 5).epsilon(1e-7));
  CHECK(o.out[1] == doctest::Approx(0.75 * 8).epsilon(1e-7));
}

TEST_CASE("mha reference: attn_mask -inf hides keys exactly like key_padding_mask, NaN keys included") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const MhaWeights w = random_layer(12);
  const std::vector<float> q = random_values(1 * 3 * 4, 4);
  std::vector<float> k = random_values(1 * 4 * 4, 5), v = random_values(1 * 4 * 4, 6);
  // Key 1 is NaN in K and V: hidden by either mask, it must not reach any row.
  for (int d = 0; d < 4; ++d) k[4 + d] = v[4 + d] = nan;
  MhaInputs in = make_inputs(1, 3, 4, q, k, v);
  in.need_weights = true;
  in.average_weights = false;

  MhaInputs padded = in;
  padded.key_padding_mask = {0, 1, 0, 1};  // hide keys 1 and 3
  const auto by_padding = multi_head_attention(w, padded);

  MhaInputs masked = in;
  masked.attn_mask.assign(3 * 4, 0.0f);
  for (int i = 0; i < 3; ++i) masked.attn_mask[i * 4 + 1] = masked.attn_mask[i * 4 + 3] = -inf;
  const auto by_mask = multi_head_attention(w, masked);

  for (const double x : by_mask.out) CHECK(std::isfinite(x));
  CHECK(by_mask.out == by_padding.out);
  CHECK(by_mask.weights == by_padding.weights);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      CHECK(by_mask.weights[static_cast<std::size_t>((h * 3 + i) * 4 + 1)] == 0.0);
      CHECK(by_mask.weights[static_cast<std::size_t>((h * 3 + i) * 4 + 3)] == 0.0);
    }
}

TEST_CASE("mha reference: a row whose attn_mask is all -inf is fully masked (out_proj_bias, zero weights)") {
  const float inf = std::numeric_limits<float>::infinity();
  const MhaWeights w = identity_layer(1, {1, 0, 0, 1}, {0.5f, -2.0f});
  const std::vector<float> q = {1, 1, 1, 1}, k = {1, 2, 3, 4}, v = {1, 0, 5, 8};
  MhaInputs in = make_inputs(1, 2, 2, q, k, v);
  in.need_weights = true;
  in.attn_mask = {-inf, -inf, 0.0f, 0.0f};
  const auto o = multi_head_attention(w, in);
  CHECK(o.out[0] == 0.5);
  CHECK(o.out[1] == -2.0);
  CHECK(o.weights[0] == 0.0);
  CHECK(o.weights[1] == 0.0);
  CHECK(o.weights[2] + o.weights[3] == doctest::Approx(1.0).epsilon(1e-14));
}

TEST_CASE("mha reference: self-attention (key and value empty) equals passing the query as both") {
  const MhaWeights w = random_layer(13);
  const std::vector<float> q = random_values(2 * 5 * 4, 7);
  MhaInputs cross = make_inputs(2, 5, 5, q, q, q);
  cross.need_weights = true;
  cross.options.causal = Causal::top_left;
  cross.key_padding_mask = {0, 0, 0, 1, 1, /**/ 0, 0, 0, 0, 0};
  cross.attn_mask = random_values(5 * 5, 8);
  const auto expect = multi_head_attention(w, cross);
  MhaInputs self = cross;
  self.key = {};
  self.value = {};
  const auto got = multi_head_attention(w, self);
  CHECK(got.out == expect.out);
  CHECK(got.weights == expect.weights);
}

TEST_CASE("mha reference: self-attention and attn_mask errors") {
  const std::vector<float> q = random_values(1 * 3 * 4, 9), none;
  {
    // seq_k must be given equal to seq_q: another seq_k with empty key/value is a size error that says so.
    const MhaWeights w = random_layer(14);
    const MhaInputs in = make_inputs(1, 3, 2, q, none, none);
    CHECK(error_message([&] { multi_head_attention(w, in); }) ==
          "key: expected 8 values (1, 2, 4), given 0 (self-attention, with key and value empty, needs seq_k == "
          "seq_q (3))");
  }
  {
    // Only one of key/value empty is not self-attention.
    const MhaWeights w = random_layer(14);
    const MhaInputs in = make_inputs(1, 3, 3, q, q, none);
    CHECK(error_message([&] { multi_head_attention(w, in); }) == "value: expected 12 values (1, 3, 4), given 0");
  }
  {
    MhaWeights w = random_layer(14);
    w.kdim = 3;
    w.k_proj_weight.resize(4 * 3);
    CHECK(error_message([&] { multi_head_attention(w, make_inputs(1, 3, 3, q, none, none)); }) ==
          "self-attention (key and value empty) needs kdim (3) and vdim (4) equal to embed_dim (4)");
  }
  {
    const MhaWeights w = random_layer(14);
    MhaInputs in = make_inputs(1, 3, 3, q, none, none);
    in.attn_mask.assign(3 * 4, 0.0f);
    CHECK(error_message([&] { multi_head_attention(w, in); }) == "attn_mask: expected 9 values (3, 3), given 12");
  }
}

TEST_CASE("mha reference: size errors name the array with expected and given sizes") {
  const std::vector<float> q = {0, 0}, k = {1, 2}, v = {3, 4};
  const MhaInputs in = make_inputs(1, 1, 1, q, k, v);
  {
    MhaWeights w = identity_layer(1);
    w.k_proj_weight.pop_back();
    CHECK(error_message([&] { multi_head_attention(w, in); }) == "k_proj_weight: expected 4 values (2, 2), given 3");
  }
  {
    MhaWeights w = identity_layer(1);
    w.in_proj_bias.push_back(0);
    CHECK(error_message([&] { multi_head_attention(w, in); }) == "in_proj_bias: expected 6 values (6), given 7");
  }
  {
    MhaWeights w = identity_layer(1);
    w.bias = false;
    CHECK(contains(error_message([&] { multi_head_attention(w, in); }), "in_proj_bias: expected 0 values"));
  }
  {
    MhaWeights w = identity_layer(1);
    w.out_proj_weight.resize(5);
    CHECK(error_message([&] { multi_head_attention(w, in); }) == "out_proj_weight: expected 4 values (2, 2), given 5");
  }
  {
    const MhaWeights w = identity_layer(1);
    const std::vector<float> q3 = {0, 0, 0};
    MhaInputs bad = in;
    bad.query = q3;
    CHECK(error_message([&] { multi_head_attention(w, bad); }) == "query: expected 2 values (1, 1, 2), given 3");
    bad = in;
    bad.value = std::span<const float>(v).first(1);
    CHECK(error_message([&] { multi_head_attention(w, bad); }) == "value: expected 2 values (1, 1, 2), given 1");
    bad = in;
    bad.key_padding_mask = {0, 0};
    CHECK(error_message([&] { multi_head_attention(w, bad); }) ==
          "key_padding_mask: expected 1 values (1, 1), given 2");
  }
  {
    const MhaWeights w = identity_layer(3);
    CHECK(error_message([&] { multi_head_attention(w, in); }) ==
          "embed_dim (2) must be divisible by num_heads (3)");
  }
  {
    MhaWeights w = identity_layer(2);
    w.kv_heads = 3;
    CHECK(error_message([&] { multi_head_attention(w, in); }) == "num_heads (2) must be divisible by kv_heads (3)");
  }
}

}  // TEST_SUITE
