// reference::varlen_attention: by hand (an empty sequence, seq_q > seq_k inside a batch), against
// the dense reference (each sequence alone; equal lengths as one BSHD batch), strided rows, q8_0 K/V.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "support.hpp"

using namespace vkattn;

namespace {

constexpr double kInfD = std::numeric_limits<double>::infinity();

std::vector<float> random_values(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A packed batch: dense packed Q (total_q, H, D), K (total_k, G, D), V (total_k, G, Dv).
struct VarlenCase {
  int64_t heads, kv_heads, dim, dim_v;
  std::vector<int32_t> cu_q, cu_k;
  std::vector<float> q, k, v;
  AttentionOptions options;
  std::optional<HeadValuesLayout> alibi_layout, sinks_layout;
  std::vector<float> alibi, sinks;

  int64_t batch() const { return static_cast<int64_t>(cu_q.size()) - 1; }
  int64_t total_q() const { return cu_q.back(); }
  int64_t total_k() const { return cu_k.back(); }

  VarlenCase(std::mt19937& rng, int64_t h, int64_t g, int64_t d, int64_t dv, std::vector<int32_t> cq,
             std::vector<int32_t> ck)
      : heads(h), kv_heads(g), dim(d), dim_v(dv), cu_q(std::move(cq)), cu_k(std::move(ck)) {
    q = random_values(rng, static_cast<std::size_t>(total_q() * h * d));
    k = random_values(rng, static_cast<std::size_t>(total_k() * g * d));
    v = random_values(rng, static_cast<std::size_t>(total_k() * g * dv));
  }

  reference::VarlenInputs inputs() const {
    reference::VarlenInputs in;
    in.q_layout = packed_layout(DType::f32, total_q(), heads, dim);
    in.k_layout = packed_layout(DType::f32, total_k(), kv_heads, dim);
    in.v_layout = packed_layout(DType::f32, total_k(), kv_heads, dim_v);
    in.q = q;
    in.k.values = k;
    in.v.values = v;
    in.cu_seqlens_q = cu_q;
    in.cu_seqlens_k = cu_k;
    in.options = options;
    in.alibi_layout = alibi_layout;
    in.sinks_layout = sinks_layout;
    in.alibi = alibi;
    in.sinks = sinks;
    return in;
  }

  // Sequence b alone, dense (1, heads, seq, dim) as a BSHD view of its packed rows.
  reference::Outputs dense_sequence(int64_t b) const {
    const int64_t q0 = cu_q[static_cast<std::size_t>(b)], k0 = cu_k[static_cast<std::size_t>(b)];
    reference::Inputs in;
    in.q_layout = TensorLayout::bshd(DType::f32, 1, cu_q[static_cast<std::size_t>(b + 1)] - q0, heads, dim);
    in.k_layout = TensorLayout::bshd(DType::f32, 1, cu_k[static_cast<std::size_t>(b + 1)] - k0, kv_heads, dim);
    in.v_layout = TensorLayout::bshd(DType::f32, 1, cu_k[static_cast<std::size_t>(b + 1)] - k0, kv_heads, dim_v);
    in.q_layout.offset = q0 * heads * dim;
    in.k_layout.offset = k0 * kv_heads * dim;
    in.v_layout.offset = k0 * kv_heads * dim_v;
    in.q = q;
    in.k = k;
    in.v = v;
    in.options = options;
    in.sinks_layout = sinks_layout;
    in.sinks = sinks;
    if (alibi_layout) {
      in.alibi_layout = HeadValuesLayout{1, heads, 0};
      in.alibi = std::span<const float>(alibi).subspan(
          static_cast<std::size_t>(alibi_layout->batch == 1 ? 0 : b * heads), static_cast<std::size_t>(heads));
    }
    return reference::attention(in);
  }
};

double max_diff(double a, double b) {
  if (std::isinf(a) || std::isinf(b)) return a == b ? 0.0 : kInfD;
  if (std::isnan(a) || std::isnan(b)) return kInfD;
  return std::fabs(a - b);
}

// Every row of sequence b of a varlen result against the dense result of that sequence alone.
double sequence_diff(const VarlenCase& c, const reference::VarlenOutputs& o, int64_t b, const reference::Outputs& d) {
  double m = 0.0;
  const int64_t q0 = c.cu_q[static_cast<std::size_t>(b)];
  for (int64_t h = 0; h < c.heads; ++h)
    for (int64_t i = 0; i < d.seq_q; ++i) {
      for (int64_t x = 0; x < c.dim_v; ++x) m = std::max(m, max_diff(o.at(q0 + i, h, x), d.at(0, h, i, x)));
      m = std::max(m, max_diff(o.lse_at(h, q0 + i), d.lse[static_cast<std::size_t>(h * d.seq_q + i)]));
    }
  return m;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("varlen reference: by hand, an empty sequence and seq_q > seq_k in one batch") {
    // One head, dim 1, q = 0: O is the mean of the sequence's visible V. Sequences: (1 query, 2 keys),
    // (0 queries, 3 keys), (2 queries, 1 key).
    reference::VarlenInputs in;
    const std::vector<float> q = {0, 0, 0};
    const std::vector<float> k = {1, 2, 3, 4, 5, 6};
    const std::vector<float> v = {2, 4, 100, 200, 300, 7};
    const std::vector<int32_t> cu_q = {0, 1, 1, 3}, cu_k = {0, 2, 5, 6};
    in.q_layout = packed_layout(DType::f32, 3, 1, 1);
    in.k_layout = in.v_layout = packed_layout(DType::f32, 6, 1, 1);
    in.q = q;
    in.k.values = k;
    in.v.values = v;
    in.cu_seqlens_q = cu_q;
    in.cu_seqlens_k = cu_k;
    reference::VarlenOutputs o = reference::varlen_attention(in);
    CHECK(o.at(0, 0, 0) == 3.0);  // mean of 2 and 4: sequence 0 never sees sequence 1's keys
    CHECK(o.lse_at(0, 0) == doctest::Approx(std::log(2.0)));
    CHECK(o.at(1, 0, 0) == 7.0);
    CHECK(o.at(2, 0, 0) == 7.0);
    // Bottom-right causal in sequence 2: off = 1 - 2 = -1, so its row 0 sees no key (O = 0, LSE = -inf)
    // and row 1 sees key 0; sequence 0's one row (off = 1) sees both keys.
    in.options.causal = Causal::bottom_right;
    o = reference::varlen_attention(in);
    CHECK(o.at(0, 0, 0) == 3.0);
    CHECK(o.at(1, 0, 0) == 0.0);
    CHECK(o.lse_at(0, 1) == -kInfD);
    CHECK(o.at(2, 0, 0) == 7.0);
    CHECK(o.lse_at(0, 2) == doctest::Approx(0.0));
    // Top-left: row i sees keys j <= i; sequence 0's row 0 sees key 0 only.
    in.options.causal = Causal::top_left;
    o = reference::varlen_attention(in);
    CHECK(o.at(0, 0, 0) == 2.0);
    CHECK(o.at(1, 0, 0) == 7.0);
  }

  TEST_CASE("varlen reference: each sequence agrees with the dense reference of that sequence alone") {
    std::mt19937 rng(1410);
    // Lengths: (3, 7), (0, 4), (5, 2) (seq_q > seq_k), (1, 0) (no keys), (4, 4).
    VarlenCase c(rng, 4, 2, 16, 8, {0, 3, 3, 8, 9, 13}, {0, 7, 11, 13, 13, 17});
    std::vector<AttentionOptions> sets(5);
    sets[1].causal = Causal::bottom_right;
    sets[2].causal = Causal::top_left;
    sets[3].window = Window{2, 1};
    sets[3].softcap = 1.5f;
    sets[4].causal = Causal::bottom_right;
    sets[4].window = Window{1, -1};
    for (const AttentionOptions& options : sets)
      for (const bool modifiers : {false, true}) {
        INFO("causal " << to_string(options.causal) << " modifiers " << modifiers);
        c.options = options;
        c.alibi_layout.reset();
        c.sinks_layout.reset();
        if (modifiers) {
          c.alibi_layout = HeadValuesLayout{5, 4, 0};
          c.alibi = random_values(rng, 20);
          c.sinks_layout = HeadValuesLayout{1, 4, 0};
          c.sinks = random_values(rng, 4);
        }
        const reference::VarlenOutputs o = reference::varlen_attention(c.inputs());
        for (const int64_t b : {0, 2, 4}) CHECK(sequence_diff(c, o, b, c.dense_sequence(b)) <= 1e-12);
        // Sequence 3 has no keys: O = 0, LSE = -inf or the sink.
        for (int64_t h = 0; h < 4; ++h) {
          for (int64_t x = 0; x < 8; ++x) CHECK(o.at(8, h, x) == 0.0);
          CHECK(o.lse_at(h, 8) == (modifiers ? static_cast<double>(c.sinks[static_cast<std::size_t>(h)]) : -kInfD));
        }
      }
  }

  TEST_CASE("varlen reference: equal lengths are one dense BSHD batch; strided rows change nothing") {
    std::mt19937 rng(1411);
    // 3 sequences of 4 queries and 6 keys: packed Q (12, H, D) is dense Q (3, 4, H, D) in BSHD.
    VarlenCase c(rng, 6, 3, 8, 8, {0, 4, 8, 12}, {0, 6, 12, 18});
    c.options.causal = Causal::bottom_right;
    c.options.window = Window{2, -1};
    c.options.softcap = 3.0f;
    c.alibi_layout = HeadValuesLayout{1, 6, 0};
    c.alibi = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f};
    const reference::VarlenOutputs o = reference::varlen_attention(c.inputs());

    reference::Inputs dense;
    dense.q_layout = TensorLayout::bshd(DType::f32, 3, 4, 6, 8);
    dense.k_layout = TensorLayout::bshd(DType::f32, 3, 6, 3, 8);
    dense.v_layout = TensorLayout::bshd(DType::f32, 3, 6, 3, 8);
    dense.q = c.q;
    dense.k = c.k;
    dense.v = c.v;
    dense.options = c.options;
    dense.alibi_layout = c.alibi_layout;
    dense.alibi = c.alibi;
    const reference::Outputs d = reference::attention(dense);
    double m = 0.0;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t h = 0; h < 6; ++h)
        for (int64_t i = 0; i < 4; ++i) {
          for (int64_t x = 0; x < 8; ++x) m = std::max(m, max_diff(o.at(b * 4 + i, h, x), d.at(b, h, i, x)));
          m = std::max(m, max_diff(o.lse_at(h, b * 4 + i), d.lse[static_cast<std::size_t>((b * 6 + h) * 4 + i)]));
        }
    CHECK(m <= 1e-12);

    // The same rows with padding between them (row stride 100, head stride 10) and an offset.
    reference::VarlenInputs in = c.inputs();
    std::vector<float> q_strided(5 + 12 * 100, std::numeric_limits<float>::quiet_NaN());
    in.q_layout.stride_seq = 100;
    in.q_layout.stride_head = 10;
    in.q_layout.offset = 5;
    for (int64_t r = 0; r < 12; ++r)
      for (int64_t h = 0; h < 6; ++h)
        for (int64_t x = 0; x < 8; ++x)
          q_strided[static_cast<std::size_t>(in.q_layout.index(0, h, r, x))] = c.q[static_cast<std::size_t>((r * 6 + h) * 8 + x)];
    in.q = q_strided;
    const reference::VarlenOutputs s = reference::varlen_attention(in);
    CHECK(s.out == o.out);
    CHECK(s.lse == o.lse);
  }

  TEST_CASE("varlen reference: q8_0 K and V are the problem on their dequantized values") {
    std::mt19937 rng(1412);
    VarlenCase c(rng, 2, 1, 32, 64, {0, 2, 5}, {0, 9, 10});
    c.options.causal = Causal::bottom_right;
    const std::vector<uint8_t> k_bytes = quantize_q8_0(c.k, 32), v_bytes = quantize_q8_0(c.v, 64);
    reference::VarlenInputs in = c.inputs();
    in.kv_quant = KvQuant::q8_0;
    in.k = {{}, k_bytes};
    in.v = {{}, v_bytes};
    const reference::VarlenOutputs o = reference::varlen_attention(in);
    VarlenCase f32 = c;
    f32.k = dequantize_q8_0(k_bytes);
    f32.v = dequantize_q8_0(v_bytes);
    const reference::VarlenOutputs e = reference::varlen_attention(f32.inputs());
    CHECK(o.out == e.out);
    CHECK(o.lse == e.lse);
  }
}
