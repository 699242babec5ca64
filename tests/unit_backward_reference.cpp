// The fp64 backward reference (vkattn/backward_reference.hpp) against central finite differences of
// the fp64 forward reference: L = Σ dO∘O, each input nudged by ±h. The inputs are multiples of 1/64
// and h = 2^-12, so every nudged value is an exact f32 and the forward sees exactly x ± h; the
// difference's error is then O(h²) (about 1e-7 here), far below a wrong gradient's.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"
#include "vkattn/backward_reference.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

constexpr float kStep = 0x1p-12f;  // h
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// n values in [-1, 1], each a multiple of 1/64.
std::vector<float> grid_values(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> dist(-64, 64);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(rng)) / 64.0f;
  return v;
}

// A dense BHSD problem, its modifiers and dO.
struct Problem {
  int64_t batch = 2, heads = 4, kv_heads = 2, seq_q = 5, seq_k = 7, dim_qk = 3, dim_v = 4;
  std::vector<float> q, k, v, grad, mask, alibi, sinks;
  std::optional<MaskLayout> mask_layout;
  std::vector<int32_t> kv_lengths;
  AttentionOptions options;

  explicit Problem(uint32_t seed) {
    std::mt19937 rng(seed);
    q = grid_values(rng, static_cast<std::size_t>(batch * heads * seq_q * dim_qk));
    // Larger keys make sharper rows (and softcap bend): scores up to about 3.5.
    k = grid_values(rng, static_cast<std::size_t>(batch * kv_heads * seq_k * dim_qk));
    for (float& x : k) x *= 2.0f;
    v = grid_values(rng, static_cast<std::size_t>(batch * kv_heads * seq_k * dim_v));
    grad = grid_values(rng, static_cast<std::size_t>(batch * heads * seq_q * dim_v));
  }

  TensorLayout grad_layout() const { return TensorLayout::bhsd(DType::f32, batch, heads, seq_q, dim_v); }

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
    if (!alibi.empty()) {
      in.alibi_layout = HeadValuesLayout{1, heads, 0};
      in.alibi = alibi;
    }
    if (!sinks.empty()) {
      in.sinks_layout = HeadValuesLayout{1, heads, 0};
      in.sinks = sinks;
    }
    return in;
  }

  // L = Σ dO∘O in fp64 (a fully masked row's O is 0).
  double loss() const {
    const reference::Outputs o = reference::attention(inputs());
    double l = 0.0;
    for (std::size_t n = 0; n < o.out.size(); ++n) l += static_cast<double>(grad[n]) * o.out[n];
    return l;
  }
};

// The central difference of `loss` in x[n]; x must be what `loss` reads.
double central_difference(std::vector<float>& x, std::size_t n, const std::function<double()>& loss) {
  const float x0 = x[n];
  x[n] = x0 + kStep;
  const double up = loss();
  x[n] = x0 - kStep;
  const double down = loss();
  x[n] = x0;
  return (up - down) / (2.0 * static_cast<double>(kStep));
}

// Each analytic gradient against the central difference of its input; returns the largest |gradient|
// (so a case can check it is not vacuous).
double check_against_differences(const char* name, std::vector<float>& x, const std::vector<double>& analytic,
                                 const std::function<double()>& loss) {
  REQUIRE(analytic.size() == x.size());
  double largest = 0.0;
  for (std::size_t n = 0; n < x.size(); ++n) {
    const double numeric = central_difference(x, n, loss);
    INFO(name << "[" << n << "]: analytic " << analytic[n] << ", central difference " << numeric);
    CHECK(std::fabs(analytic[n] - numeric) <= 2e-6 + 1e-5 * std::fabs(numeric));
    largest = std::max(largest, std::fabs(analytic[n]));
  }
  return largest;
}

// Every gradient of the problem against finite differences; every one not all zero unless asked.
reference::Gradients check_gradients(Problem& p, bool expect_dv = true) {
  const std::vector<float> grad = p.grad;
  const reference::Gradients g = reference::attention_backward(p.inputs(), p.grad_layout(), p.grad);
  CHECK(g.batch == p.batch);
  CHECK(g.heads == p.heads);
  CHECK(g.kv_heads == p.kv_heads);
  CHECK(g.seq_q == p.seq_q);
  CHECK(g.seq_k == p.seq_k);
  CHECK(g.dim_qk == p.dim_qk);
  CHECK(g.dim_v == p.dim_v);
  const auto loss = [&] { return p.loss(); };
  CHECK(check_against_differences("dq", p.q, g.dq, loss) > 1e-3);
  CHECK(check_against_differences("dk", p.k, g.dk, loss) > 1e-3);
  const double dv = check_against_differences("dv", p.v, g.dv, loss);
  if (expect_dv) CHECK(dv > 1e-3);
  if (!p.sinks.empty()) {
    CHECK(check_against_differences("dsinks", p.sinks, g.dsinks, loss) > 1e-3);
  } else {
    CHECK(g.dsinks.empty());
  }
  return g;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("backward reference: finite differences, no modifiers (GQA, odd sizes)") {
    Problem p(1);
    check_gradients(p);
    p.options.scale = 0.75f;
    check_gradients(p);
  }

  TEST_CASE("backward reference: finite differences, causal top-left and bottom-right") {
    Problem p(2);
    p.options.causal = Causal::top_left;
    check_gradients(p);
    p.options.causal = Causal::bottom_right;
    check_gradients(p);
  }

  TEST_CASE("backward reference: finite differences, a sliding window") {
    Problem p(3);
    p.options.window = Window{2, 1};
    check_gradients(p);
    p.options.causal = Causal::bottom_right;
    p.options.window = Window{1, -1};
    check_gradients(p);
  }

  TEST_CASE("backward reference: finite differences, ALiBi") {
    Problem p(4);
    p.alibi = {0.5f, 0.25f, 0.125f, 1.0f};
    check_gradients(p);
  }

  TEST_CASE("backward reference: finite differences through the softcap") {
    Problem p(5);
    p.options.softcap = 1.25f;  // scores reach about 3.5: well into the bend
    check_gradients(p);
    // With ALiBi and a float mask after it.
    p.alibi = {0.5f, 0.25f, 0.125f, 1.0f};
    p.options.causal = Causal::top_left;
    check_gradients(p);
  }

  TEST_CASE("backward reference: finite differences, attention sinks") {
    Problem p(6);
    p.sinks = {0.5f, -1.0f, 1.5f, 0.0f};
    check_gradients(p);
    p.options.causal = Causal::bottom_right;
    check_gradients(p);
  }

  TEST_CASE("backward reference: finite differences, boolean and float masks") {
    Problem p(7);
    std::mt19937 rng(70);
    std::uniform_int_distribution<int> coin(0, 3);
    // Boolean, (batch, heads): about a quarter of the keys hidden.
    p.mask_layout = MaskLayout::dense(MaskType::boolean, p.batch, p.heads, p.seq_q, p.seq_k);
    p.mask.resize(static_cast<std::size_t>(p.batch * p.heads * p.seq_q * p.seq_k));
    for (float& m : p.mask) m = coin(rng) == 0 ? 0.0f : 1.0f;
    check_gradients(p);
    // Float, broadcast over the batch: biases and some -inf.
    p.mask_layout = MaskLayout::dense(MaskType::f32, 1, p.heads, p.seq_q, p.seq_k);
    p.mask.resize(static_cast<std::size_t>(p.heads * p.seq_q * p.seq_k));
    for (float& m : p.mask) m = coin(rng) == 0 ? kNegInf : static_cast<float>(coin(rng)) / 4.0f - 0.5f;
    check_gradients(p);
  }

  TEST_CASE("backward reference: finite differences, key lengths") {
    Problem p(8);
    p.kv_lengths = {3, 7};
    const reference::Gradients g = check_gradients(p);
    // Keys past a batch element's length get nothing.
    for (int64_t kv = 0; kv < p.kv_heads; ++kv)
      for (int64_t j = 3; j < p.seq_k; ++j)
        for (int64_t d = 0; d < p.dim_v; ++d) CHECK(g.dv[static_cast<std::size_t>((kv * p.seq_k + j) * p.dim_v + d)] == 0.0);
  }

  TEST_CASE("backward reference: a fully masked row gets exactly zero gradients") {
    Problem p(9);
    p.sinks = {0.5f, -1.0f, 1.5f, 0.0f};
    // Batch element 0 has no keys at all; in batch element 1 the boolean mask hides every key of row 2.
    p.kv_lengths = {0, 7};
    p.mask_layout = MaskLayout::dense(MaskType::boolean, 1, 1, p.seq_q, p.seq_k);
    p.mask.assign(static_cast<std::size_t>(p.seq_q * p.seq_k), 1.0f);
    for (int64_t j = 0; j < p.seq_k; ++j) p.mask[static_cast<std::size_t>(2 * p.seq_k + j)] = 0.0f;
    const reference::Gradients g = check_gradients(p);
    const auto dq_row_zero = [&](int64_t b, int64_t h, int64_t i) {
      for (int64_t d = 0; d < p.dim_qk; ++d)
        if (g.dq[static_cast<std::size_t>(((b * p.heads + h) * p.seq_q + i) * p.dim_qk + d)] != 0.0) return false;
      return true;
    };
    for (int64_t h = 0; h < p.heads; ++h) {
      for (int64_t i = 0; i < p.seq_q; ++i) CHECK(dq_row_zero(0, h, i));
      CHECK(dq_row_zero(1, h, 2));
      CHECK_FALSE(dq_row_zero(1, h, 1));
    }
    for (std::size_t n = 0; n < static_cast<std::size_t>(p.kv_heads * p.seq_k * p.dim_qk); ++n) CHECK(g.dk[n] == 0.0);
  }

  TEST_CASE("backward reference: finite differences with dropout (the mask is fixed by the indices)") {
    Problem p(10);
    p.options.dropout = Dropout{0.3f, 0x5eed, 2};
    const reference::Gradients dropped = check_gradients(p);
    p.options.dropout.reset();
    const reference::Gradients plain = reference::attention_backward(p.inputs(), p.grad_layout(), p.grad);
    CHECK(dropped.dv != plain.dv);
    // p = 0 is no dropout, bit for bit.
    p.options.dropout = Dropout{0.0f, 0x5eed, 2};
    const reference::Gradients zero = reference::attention_backward(p.inputs(), p.grad_layout(), p.grad);
    CHECK(zero.dq == plain.dq);
    CHECK(zero.dk == plain.dk);
    CHECK(zero.dv == plain.dv);
  }

  TEST_CASE("backward reference: finite differences, every modifier at once") {
    Problem p(11);
    p.options.causal = Causal::bottom_right;
    p.options.window = Window{3, -1};
    p.options.softcap = 2.0f;
    p.options.scale = 0.625f;
    p.options.dropout = Dropout{0.25f, 1, 0};
    p.alibi = {0.5f, 0.25f, 0.125f, 1.0f};
    p.sinks = {0.5f, -1.0f, 1.5f, 0.0f};
    p.kv_lengths = {6, 7};
    p.mask_layout = MaskLayout::dense(MaskType::f32, p.batch, 1, p.seq_q, p.seq_k);
    std::mt19937 rng(110);
    p.mask = grid_values(rng, static_cast<std::size_t>(p.batch * p.seq_q * p.seq_k));
    p.mask[3] = kNegInf;
    check_gradients(p);
  }

  TEST_CASE("backward reference: grad_out is read through its layout") {
    Problem p(12);
    const reference::Gradients dense = reference::attention_backward(p.inputs(), p.grad_layout(), p.grad);
    // The same dO as a (batch, seq, heads, dim) array at an offset.
    const int64_t offset = 5;
    const TensorLayout bshd = [&] {
      TensorLayout l = TensorLayout::bshd(DType::f32, p.batch, p.seq_q, p.heads, p.dim_v);
      l.offset = offset;
      return l;
    }();
    std::vector<float> grad(static_cast<std::size_t>(offset + p.batch * p.seq_q * p.heads * p.dim_v), 99.0f);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads; ++h)
        for (int64_t i = 0; i < p.seq_q; ++i)
          for (int64_t d = 0; d < p.dim_v; ++d)
            grad[static_cast<std::size_t>(bshd.index(b, h, i, d))] =
                p.grad[static_cast<std::size_t>(((b * p.heads + h) * p.seq_q + i) * p.dim_v + d)];
    const reference::Gradients strided = reference::attention_backward(p.inputs(), bshd, grad);
    CHECK(strided.dq == dense.dq);
    CHECK(strided.dk == dense.dk);
    CHECK(strided.dv == dense.dv);
  }

  TEST_CASE("backward reference: grad_out's shape, dtype and size are checked") {
    Problem p(13);
    TensorLayout wrong = TensorLayout::bhsd(DType::f32, p.batch, p.heads, p.seq_q, p.dim_v + 1);
    std::vector<float> big(1000, 0.0f);
    CHECK(error_message([&] { reference::attention_backward(p.inputs(), wrong, big); }) ==
          "grad_out: shape (2, 4, 5, 5) must equal O's (batch, heads, seq_q, dim_v) = (2, 4, 5, 4)");
    wrong = TensorLayout::bhsd(DType::f16, p.batch, p.heads, p.seq_q, p.dim_v);
    CHECK(error_message([&] { reference::attention_backward(p.inputs(), wrong, big); }) ==
          "grad_out.dtype (f16) must equal q.dtype (f32)");
    const std::vector<float> short_grad(p.grad.begin(), p.grad.end() - 1);
    CHECK(contains(error_message([&] { reference::attention_backward(p.inputs(), p.grad_layout(), short_grad); }),
                   "grad_out: 159 values given, layout needs 160"));
    // The forward's own checks come first.
    p.options.dropout = Dropout{2.0f, 0, 0};
    CHECK(error_message([&] { reference::attention_backward(p.inputs(), p.grad_layout(), p.grad); }) ==
          "dropout: p must be in [0, 1), got 2");
  }

  TEST_CASE("backward reference: a packed batch equals each sequence's dense call, and finite differences") {
    std::mt19937 rng(14);
    const int64_t heads = 4, kv_heads = 2, dim = 3, dim_v = 2;
    // Sequences (q, k): (3, 4), (0, 2), (2, 0), (4, 5).
    const std::vector<int32_t> cu_q = {0, 3, 3, 5, 9}, cu_k = {0, 4, 6, 6, 11};
    const int64_t total_q = 9, total_k = 11;
    std::vector<float> q = grid_values(rng, static_cast<std::size_t>(total_q * heads * dim));
    std::vector<float> k = grid_values(rng, static_cast<std::size_t>(total_k * kv_heads * dim));
    std::vector<float> v = grid_values(rng, static_cast<std::size_t>(total_k * kv_heads * dim_v));
    std::vector<float> sinks = {0.25f, -0.5f, 1.0f, 0.0f};
    const std::vector<float> grad = grid_values(rng, static_cast<std::size_t>(total_q * heads * dim_v));
    AttentionOptions options;
    options.causal = Causal::bottom_right;
    options.softcap = 1.5f;
    const auto packed = [&] {
      reference::VarlenInputs in;
      in.q_layout = packed_layout(DType::f32, total_q, heads, dim);
      in.k_layout = packed_layout(DType::f32, total_k, kv_heads, dim);
      in.v_layout = packed_layout(DType::f32, total_k, kv_heads, dim_v);
      in.q = q;
      in.k.values = k;
      in.v.values = v;
      in.cu_seqlens_q = cu_q;
      in.cu_seqlens_k = cu_k;
      in.sinks_layout = HeadValuesLayout{1, heads, 0};
      in.sinks = sinks;
      in.options = options;
      return in;
    };
    const TensorLayout grad_layout = packed_layout(DType::f32, total_q, heads, dim_v);
    const reference::VarlenGradients g = reference::varlen_attention_backward(packed(), grad_layout, grad);
    CHECK(g.total_q == total_q);
    CHECK(g.total_k == total_k);

    // Each sequence alone as a dense call on BSHD views of its rows.
    std::vector<double> dsinks(4, 0.0);
    for (int64_t b = 0; b < 4; ++b) {
      const int64_t q0 = cu_q[static_cast<std::size_t>(b)], k0 = cu_k[static_cast<std::size_t>(b)];
      const int64_t sq = cu_q[static_cast<std::size_t>(b + 1)] - q0, sk = cu_k[static_cast<std::size_t>(b + 1)] - k0;
      if (sq == 0 || sk == 0) continue;  // (the dense API takes no empty side)
      reference::Inputs in;
      in.q_layout = TensorLayout::bshd(DType::f32, 1, sq, heads, dim);
      in.k_layout = TensorLayout::bshd(DType::f32, 1, sk, kv_heads, dim);
      in.v_layout = TensorLayout::bshd(DType::f32, 1, sk, kv_heads, dim_v);
      in.q_layout.offset = q0 * heads * dim;
      in.k_layout.offset = k0 * kv_heads * dim;
      in.v_layout.offset = k0 * kv_heads * dim_v;
      in.q = q;
      in.k = k;
      in.v = v;
      in.sinks_layout = HeadValuesLayout{1, heads, 0};
      in.sinks = sinks;
      in.options = options;
      TensorLayout gl = TensorLayout::bshd(DType::f32, 1, sq, heads, dim_v);
      gl.offset = q0 * heads * dim_v;
      const reference::Gradients d = reference::attention_backward(in, gl, grad);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < sq; ++i)
          for (int64_t x = 0; x < dim; ++x)
            CHECK(g.dq[static_cast<std::size_t>(((q0 + i) * heads + h) * dim + x)] ==
                  d.dq[static_cast<std::size_t>((h * sq + i) * dim + x)]);
      for (int64_t kv = 0; kv < kv_heads; ++kv)
        for (int64_t j = 0; j < sk; ++j) {
          for (int64_t x = 0; x < dim; ++x)
            CHECK(g.dk[static_cast<std::size_t>(((k0 + j) * kv_heads + kv) * dim + x)] ==
                  d.dk[static_cast<std::size_t>((kv * sk + j) * dim + x)]);
          for (int64_t x = 0; x < dim_v; ++x)
            CHECK(g.dv[static_cast<std::size_t>(((k0 + j) * kv_heads + kv) * dim_v + x)] ==
                  d.dv[static_cast<std::size_t>((kv * sk + j) * dim_v + x)]);
        }
      for (int64_t h = 0; h < heads; ++h) dsinks[static_cast<std::size_t>(h)] += d.dsinks[static_cast<std::size_t>(h)];
    }
    for (int64_t h = 0; h < heads; ++h) CHECK(g.dsinks[static_cast<std::size_t>(h)] == doctest::Approx(dsinks[static_cast<std::size_t>(h)]).epsilon(1e-12));
    // Sequence 2's queries (rows 3 and 4) have no key: no gradient; sequence 1's keys (rows 4 and 5)
    // are seen by no query: none either.
    for (int64_t x = 0; x < 2 * heads * dim; ++x) CHECK(g.dq[static_cast<std::size_t>(3 * heads * dim + x)] == 0.0);
    for (int64_t x = 0; x < kv_heads * dim; ++x) CHECK(g.dk[static_cast<std::size_t>(4 * kv_heads * dim + x)] == 0.0);

    // With dropout (sequence b's mask is batch element b's) against finite differences of the packed
    // forward reference.
    options.dropout = Dropout{0.35f, 77, 4};
    const reference::VarlenGradients gd = reference::varlen_attention_backward(packed(), grad_layout, grad);
    const auto loss = [&] {
      const reference::VarlenOutputs o = reference::varlen_attention(packed());
      double l = 0.0;
      for (std::size_t n = 0; n < o.out.size(); ++n) l += static_cast<double>(grad[n]) * o.out[n];
      return l;
    };
    CHECK(check_against_differences("dq", q, gd.dq, loss) > 1e-3);
    CHECK(check_against_differences("dk", k, gd.dk, loss) > 1e-3);
    CHECK(check_against_differences("dv", v, gd.dv, loss) > 1e-3);
    CHECK(check_against_differences("dsinks", sinks, gd.dsinks, loss) > 1e-3);
  }

  TEST_CASE("backward reference: the packed backward refuses q8_0 K/V and checks grad_out") {
    reference::VarlenInputs in;
    const std::vector<float> q(2 * 32, 0.0f), grad(2 * 32, 0.0f);
    const std::vector<uint8_t> kv(2 * 34, 0);
    const std::vector<int32_t> cu = {0, 2};
    in.q_layout = packed_layout(DType::f32, 2, 1, 32);
    in.k_layout = in.v_layout = packed_layout(DType::f32, 2, 1, 32);
    in.q = q;
    in.kv_quant = KvQuant::q8_0;
    in.k.q8_0 = kv;
    in.v.q8_0 = kv;
    in.cu_seqlens_q = cu;
    in.cu_seqlens_k = cu;
    const TensorLayout grad_layout = packed_layout(DType::f32, 2, 1, 32);
    CHECK(contains(error_message([&] { reference::varlen_attention_backward(in, grad_layout, grad); }),
                   "kv_quant: q8_0 K and V are an inference layout"));
    const std::vector<float> k(2 * 32, 0.0f);
    in.kv_quant = KvQuant::none;
    in.k = {};
    in.v = {};
    in.k.values = k;
    in.v.values = k;
    CHECK(error_message([&] { reference::varlen_attention_backward(in, grad_layout, grad); }) ==
          "<no vkattn::Error thrown>");
    CHECK(error_message([&] {
            reference::varlen_attention_backward(in, packed_layout(DType::f32, 3, 1, 32), grad);
          }) == "grad_out: shape (1, 1, 3, 32) must be O's packed (1, heads, total_q, dim_v) = (1, 1, 2, 32) (packed_layout)");
  }
}
