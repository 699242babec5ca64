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

// Attention per (batch, head, query row) through the score chain, the heads merged into (B,Sq,E);
// P into `weights` when the call needs them (already sized and zeroed).
std::vector<double> attend_heads(const MhaWeights& w, const MhaInputs& in, const MhaDims& dims, const MhaCall& call,
                                 const Projected& x, std::vector<double>& weights) {
  const int64_t E = dims.embed_dim, H = dims.num_heads, D = dims.head_dim(), KVD = dims.kv_dim();
  const int64_t group = H / dims.kv_heads;  // query heads per KV head
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k;
  std::vector<double> attn(static_cast<std::size_t>(B * Sq * E), 0.0);
  // torch's scale in double; a given scale as the f32 the device is given.
  const double scale = in.options.scale ? static_cast<double>(*in.options.scale) : 1.0 / std::sqrt(static_cast<double>(D));
  const PerHeadValues per_head = w.per_head();
  detail::ScoreRow row(detail::score_modifiers(in.options, scale, per_head));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const detail::HeadModifiers head = detail::head_modifiers(per_head, b, h);
      for (int64_t i = 0; i < Sq; ++i) {
        const auto [begin, end] = visible_keys(in, call, i);
        row.start(head, i + call.diagonal_offset());
        // Key padding (nonzero = ignore) and attn_mask entries of -inf hide a key.
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
  const int64_t E = dims.embed_dim, H = dims.num_heads, kdim = dims.kdim, vdim = dims.vdim;
  const int64_t KVD = dims.kv_dim();  // projected key/value width
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k;
  const std::span<const float> key = call.self_attention ? in.query : in.key;
  const std::span<const float> value = call.self_attention ? in.query : in.value;

  // ---- projections (fp64) -------------------------------------------------------------------------
  const float* bq = w.bias ? w.in_proj_bias.data() : nullptr;
  const float* bk = w.bias ? w.in_proj_bias.data() + E : nullptr;
  const float* bv = w.bias ? w.in_proj_bias.data() + E + KVD : nullptr;
  const std::vector<double> q = linear(in.query, B * Sq, E, w.q_proj_weight.data(), E, bq);       // (B,Sq,E)
  const std::vector<double> k = linear(key, B * Sk, kdim, w.k_proj_weight.data(), KVD, bk);    // (B,Sk,KVD)
  const std::vector<double> v = linear(value, B * Sk, vdim, w.v_proj_weight.data(), KVD, bv);  // (B,Sk,KVD)

  // ---- attention per (batch, head, query row), heads merged into attn (B,Sq,E) --------------------
  MhaOutputs o;
  if (in.need_weights) {
    o.weights.assign(static_cast<std::size_t>(in.average_weights ? B * Sq * Sk : B * H * Sq * Sk), 0.0);
  }
  const std::vector<double> attn = attend_heads(w, in, dims, call, Projected{q, k, v}, o.weights);

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

}  // namespace vkattn::reference
