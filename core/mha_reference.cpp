// The fp64 CPU reference of the multi-head attention layer (torch.nn.MultiheadAttention semantics,
// the contract (docs/semantics.md)). Plain loops, double precision: obviously right rather than fast.
#include "vkattn/mha_reference.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "size_check.hpp"
#include "score_chain.hpp"
#include "window_rule.hpp"
#include "vkattn/error.hpp"

namespace vkattn::reference {

namespace {

// y[r, o] = sum_i x[r, i] * W[o, i] + b[o], in double. x is (rows, in), W is (out, in).
std::vector<double> linear(std::span<const float> x, int64_t rows, int64_t in, const float* w, int64_t out,
                           const float* b) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? static_cast<double>(b[o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        s += static_cast<double>(x[static_cast<std::size_t>(r * in + i)]) * static_cast<double>(w[o * in + i]);
      }
      y[static_cast<std::size_t>(r * out + o)] = s;
    }
  }
  return y;
}

// The projected Q (B,Sq,E), K and V (B,Sk,KVD), in double.
struct Projected {
  const std::vector<double>& q;
  const std::vector<double>& k;
  const std::vector<double>& v;
};

// The layer's inputs as it reads them: key and value are the query in self-attention.
struct LayerInputs {
  std::span<const float> query, key, value;
};
LayerInputs layer_inputs(const MhaInputs& in, const MhaCall& call) {
  return {in.query, call.self_attention ? in.query : in.key, call.self_attention ? in.query : in.value};
}

// The input projections' biases (nullptr without bias): q, k, v, as in_proj_bias holds them.
struct InBiases {
  const float *q, *k, *v;
};
InBiases in_biases(const MhaWeights& w, const MhaDims& dims) {
  if (!w.bias) return {nullptr, nullptr, nullptr};
  const float* b = w.in_proj_bias.data();
  return {b, b + dims.embed_dim, b + dims.embed_dim + dims.kv_dim()};
}

// The input projections (fp64): Q (B,Sq,E), K and V (B,Sk,KVD).
struct Projections {
  std::vector<double> q, k, v;
};
Projections project(const MhaWeights& w, const MhaDims& dims, const MhaCall& call, const LayerInputs& x) {
  const int64_t E = dims.embed_dim, KVD = dims.kv_dim(), B = call.batch;
  const InBiases b = in_biases(w, dims);
  return {linear(x.query, B * call.seq_q, E, w.q_proj_weight.data(), E, b.q),
          linear(x.key, B * call.seq_k, dims.kdim, w.k_proj_weight.data(), KVD, b.k),
          linear(x.value, B * call.seq_k, dims.vdim, w.v_proj_weight.data(), KVD, b.v)};
}

// Causal (in its own alignment) and the window (i + off - left <= j <= i + off + right): the keys
// [begin, end) row i may see.
std::pair<int64_t, int64_t> visible_keys(const MhaInputs& in, const MhaCall& call, int64_t i) {
  const int64_t Sq = call.seq_q, Sk = call.seq_k, off = call.diagonal_offset();
  const Window window = in.options.window.value_or(Window{});
  int64_t begin = 0, end = Sk;
  if (in.options.causal == Causal::top_left) end = std::min(Sk, i + 1);
  if (in.options.causal == Causal::bottom_right) end = std::min(Sk, i + 1 + Sk - Sq);
  if (window.left >= 0) begin = vkattn::detail::window_key_begin(i + off, window.left, Sk);
  if (window.right >= 0) end = std::min(end, vkattn::detail::window_key_end(i + off, window.right, Sk));
  return {begin, end};
}

// torch's scale in double; a given scale as the f32 the device is given.
double layer_scale(const MhaInputs& in, const MhaDims& dims) {
  return in.options.scale ? static_cast<double>(*in.options.scale) : 1.0 / std::sqrt(static_cast<double>(dims.head_dim()));
}

// Starts `row` as row i of head h in batch element b and scores its visible keys: key padding
// (nonzero = ignore) and attn_mask entries of -inf hide a key.
void score_row(const MhaInputs& in, const MhaDims& dims, const MhaCall& call, const Projected& x,
               const detail::HeadModifiers& head, int64_t b, int64_t h, int64_t i, detail::ScoreRow& row) {
  const int64_t E = dims.embed_dim, H = dims.num_heads, D = dims.head_dim(), KVD = dims.kv_dim();
  const int64_t g = h / (H / dims.kv_heads);  // query heads per KV head
  const int64_t Sq = call.seq_q, Sk = call.seq_k;
  const auto [begin, end] = visible_keys(in, call, i);
  row.start(head, i + call.diagonal_offset());
  row.score_keys(
      begin, end,
      [&](int64_t j) -> std::optional<double> {
        if (!in.key_padding_mask.empty() && in.key_padding_mask[static_cast<std::size_t>(b * Sk + j)] != 0) {
          return std::nullopt;
        }
        const double bias =
            in.attn_mask.empty() ? 0.0 : static_cast<double>(in.attn_mask[static_cast<std::size_t>(i * Sk + j)]);
        if (bias == -std::numeric_limits<double>::infinity()) return std::nullopt;
        return bias;
      },
      [&](int64_t j) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          dot += x.q[static_cast<std::size_t>((b * Sq + i) * E + h * D + d)] *
                 x.k[static_cast<std::size_t>((b * Sk + j) * KVD + g * D + d)];
        }
        return dot;
      });
}

// Attention per (batch, head, query row) through the score chain, the heads merged into (B,Sq,E);
// P into `weights` when the call needs them (already sized and zeroed).
std::vector<double> attend_heads(const MhaWeights& w, const MhaInputs& in, const MhaDims& dims, const MhaCall& call,
                                 const Projected& x, std::vector<double>& weights) {
  const int64_t E = dims.embed_dim, H = dims.num_heads, D = dims.head_dim(), KVD = dims.kv_dim();
  const int64_t group = H / dims.kv_heads;  // query heads per KV head
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k;
  std::vector<double> attn(static_cast<std::size_t>(B * Sq * E), 0.0);
  const PerHeadValues per_head = w.per_head();
  detail::ScoreRow row(detail::score_modifiers(in.options, layer_scale(in, dims), per_head));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const detail::HeadModifiers head = detail::head_modifiers(per_head, b, h);
      for (int64_t i = 0; i < Sq; ++i) {
        score_row(in, dims, call, x, head, b, h, i, row);
        if (row.empty()) continue;  // fully masked row: attention output 0, weights 0 (not NaN)
        row.softmax();
        row.apply_dropout(H, b, h, i);  // dropout on the weights in O (not on the weights returned)
        row.output(
            D, detail::ValueSum::probabilities,
            [&](int64_t j, int64_t d) { return x.v[static_cast<std::size_t>((b * Sk + j) * KVD + g * D + d)]; },
            attn.data() + (b * Sq + i) * E + h * D);
        if (!in.need_weights) continue;
        const std::span<const int64_t> keys = row.keys();
        for (std::size_t n = 0; n < keys.size(); ++n) {
          const int64_t j = keys[n];
          if (in.average_weights) {
            weights[static_cast<std::size_t>((b * Sq + i) * Sk + j)] += row.probability(n) / static_cast<double>(H);
          } else {
            weights[static_cast<std::size_t>(((b * H + h) * Sq + i) * Sk + j)] = row.probability(n);
          }
        }
      }
    }
  }
  return attn;
}

}  // namespace

MhaOutputs multi_head_attention(const MhaWeights& w, const MhaInputs& in) {
  // ---- checks -------------------------------------------------------------------------------------
  const MhaDims dims = check_mha_weights(w);
  const MhaCall call = check_mha_inputs(dims, in);
  const int64_t E = dims.embed_dim, H = dims.num_heads;
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k;

  // ---- projections (fp64) -------------------------------------------------------------------------
  const Projections x = project(w, dims, call, layer_inputs(in, call));

  // ---- attention per (batch, head, query row), heads merged into attn (B,Sq,E) --------------------
  MhaOutputs o;
  if (in.need_weights) {
    o.weights.assign(static_cast<std::size_t>(in.average_weights ? B * Sq * Sk : B * H * Sq * Sk), 0.0);
  }
  const std::vector<double> attn = attend_heads(w, in, dims, call, Projected{x.q, x.k, x.v}, o.weights);

  // ---- output projection --------------------------------------------------------------------------
  o.out.assign(static_cast<std::size_t>(B * Sq * E), 0.0);
  for (int64_t r = 0; r < B * Sq; ++r) {
    for (int64_t e = 0; e < E; ++e) {
      double s = w.bias ? static_cast<double>(w.out_proj_bias[static_cast<std::size_t>(e)]) : 0.0;
      for (int64_t c = 0; c < E; ++c) {
        s += attn[static_cast<std::size_t>(r * E + c)] *
             static_cast<double>(w.out_proj_weight[static_cast<std::size_t>(e * E + c)]);
      }
      o.out[static_cast<std::size_t>(r * E + e)] = s;
    }
  }
  return o;
}

namespace {

// The backward pass of y = x·Wᵀ + b (x (rows, in), W (out, in)) given dy (rows, out): adds dW (out,
// in) and db (out, when given) and writes dx (rows, in), all fp64.
void linear_backward(std::span<const float> x, int64_t rows, int64_t in, const float* w, int64_t out,
                     const std::vector<double>& dy, std::vector<double>& dw, std::vector<double>* db,
                     std::vector<double>& dx) {
  dx.assign(static_cast<std::size_t>(rows * in), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      const double g = dy[static_cast<std::size_t>(r * out + o)];
      if (db) (*db)[static_cast<std::size_t>(o)] += g;
      for (int64_t i = 0; i < in; ++i) {
        dw[static_cast<std::size_t>(o * in + i)] += g * static_cast<double>(x[static_cast<std::size_t>(r * in + i)]);
        dx[static_cast<std::size_t>(r * in + i)] += g * static_cast<double>(w[o * in + i]);
      }
    }
}

}  // namespace

std::vector<double> MhaGradients::in_proj_weight() const {
  if (kdim != embed_dim || vdim != embed_dim) return {};
  std::vector<double> stacked(q_proj_weight);
  stacked.insert(stacked.end(), k_proj_weight.begin(), k_proj_weight.end());
  stacked.insert(stacked.end(), v_proj_weight.begin(), v_proj_weight.end());
  return stacked;
}

MhaGradients multi_head_attention_backward(const MhaWeights& w, const MhaInputs& in, std::span<const float> grad_out) {
  // ---- checks -------------------------------------------------------------------------------------
  const MhaDims dims = check_mha_weights(w);
  const MhaCall call = check_mha_inputs(dims, in);
  const int64_t E = dims.embed_dim, H = dims.num_heads, D = dims.head_dim(), KVD = dims.kv_dim();
  const int64_t group = H / dims.kv_heads;
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k;
  vkattn::detail::check_size("grad_out", grad_out.size(), B * Sq * E, vkattn::detail::shape_string({B, Sq, E}),
                             " (the layer's output: batch, seq_q, embed_dim)");
  const auto at = [](int64_t index) { return static_cast<std::size_t>(index); };

  // ---- the forward, as multi_head_attention computes it (weights P not needed) ---------------------
  const LayerInputs xin = layer_inputs(in, call);
  const Projections x = project(w, dims, call, xin);
  MhaInputs forward = in;
  forward.need_weights = false;
  std::vector<double> no_weights;
  const std::vector<double> attn = attend_heads(w, forward, dims, call, Projected{x.q, x.k, x.v}, no_weights);

  MhaGradients g;
  g.embed_dim = E, g.kdim = dims.kdim, g.vdim = dims.vdim, g.kv_dim = KVD;

  // ---- output projection: out = attn·Woᵀ + bo -----------------------------------------------------
  g.out_proj_weight.assign(at(E * E), 0.0);
  if (w.bias) g.out_proj_bias.assign(at(E), 0.0);
  std::vector<double> d_attn(at(B * Sq * E), 0.0);
  for (int64_t r = 0; r < B * Sq; ++r)
    for (int64_t e = 0; e < E; ++e) {
      const double dy = static_cast<double>(grad_out[at(r * E + e)]);
      if (w.bias) g.out_proj_bias[at(e)] += dy;
      for (int64_t c = 0; c < E; ++c) {
        g.out_proj_weight[at(e * E + c)] += dy * attn[at(r * E + c)];
        d_attn[at(r * E + c)] += dy * static_cast<double>(w.out_proj_weight[at(e * E + c)]);
      }
    }

  // ---- attention per (batch, head, query row): the score chain's backward --------------------------
  std::vector<double> dq(at(B * Sq * E), 0.0), dk(at(B * Sk * KVD), 0.0), dv(at(B * Sk * KVD), 0.0);
  if (dims.has_sinks) g.sinks.assign(at(H), 0.0);
  const PerHeadValues per_head = w.per_head();
  detail::ScoreRow row(detail::score_modifiers(in.options, layer_scale(in, dims), per_head));
  std::vector<double> o(at(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kv = h / group;
      const detail::HeadModifiers head = detail::head_modifiers(per_head, b, h);
      for (int64_t i = 0; i < Sq; ++i) {
        score_row(in, dims, call, Projected{x.q, x.k, x.v}, head, b, h, i, row);
        if (row.empty()) continue;  // fully masked: attention output 0 whatever the inputs
        row.softmax();
        row.apply_dropout(H, b, h, i);
        const auto v = [&](int64_t j, int64_t d) { return x.v[at((b * Sk + j) * KVD + kv * D + d)]; };
        row.output(D, detail::ValueSum::probabilities, v, o.data());
        const double d_row = row.backward(
            D, D, o.data(), d_attn.data() + (b * Sq + i) * E + h * D,
            [&](int64_t d) { return x.q[at((b * Sq + i) * E + h * D + d)]; },
            [&](int64_t j, int64_t d) { return x.k[at((b * Sk + j) * KVD + kv * D + d)]; }, v,
            [&](int64_t d, double value) { dq[at((b * Sq + i) * E + h * D + d)] += value; },
            [&](int64_t j, int64_t d, double value) { dk[at((b * Sk + j) * KVD + kv * D + d)] += value; },
            [&](int64_t j, int64_t d, double value) { dv[at((b * Sk + j) * KVD + kv * D + d)] += value; });
        if (dims.has_sinks) g.sinks[at(h)] += row.sink_gradient(d_row);
      }
    }

  // ---- input projections --------------------------------------------------------------------------
  g.q_proj_weight.assign(at(E * E), 0.0);
  g.k_proj_weight.assign(at(KVD * dims.kdim), 0.0);
  g.v_proj_weight.assign(at(KVD * dims.vdim), 0.0);
  std::vector<double> dbq, dbk, dbv;
  if (w.bias) dbq.assign(at(E), 0.0), dbk.assign(at(KVD), 0.0), dbv.assign(at(KVD), 0.0);
  std::vector<double> dx_q, dx_k, dx_v;
  linear_backward(xin.query, B * Sq, E, w.q_proj_weight.data(), E, dq, g.q_proj_weight, w.bias ? &dbq : nullptr, dx_q);
  linear_backward(xin.key, B * Sk, dims.kdim, w.k_proj_weight.data(), KVD, dk, g.k_proj_weight, w.bias ? &dbk : nullptr,
                  dx_k);
  linear_backward(xin.value, B * Sk, dims.vdim, w.v_proj_weight.data(), KVD, dv, g.v_proj_weight,
                  w.bias ? &dbv : nullptr, dx_v);
  if (w.bias) {
    g.in_proj_bias = dbq;
    g.in_proj_bias.insert(g.in_proj_bias.end(), dbk.begin(), dbk.end());
    g.in_proj_bias.insert(g.in_proj_bias.end(), dbv.begin(), dbv.end());
  }
  g.query = std::move(dx_q);
  if (call.self_attention) {  // the query is also the key and the value
    for (std::size_t n = 0; n < g.query.size(); ++n) g.query[n] += dx_k[n] + dx_v[n];
  } else {
    g.key = std::move(dx_k);
    g.value = std::move(dx_v);
  }
  return g;
}

}  // namespace vkattn::reference
