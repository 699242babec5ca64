// The fp64 CPU reference of the multi-head attention layer (torch.nn.MultiheadAttention semantics,
// the contract (README.md, "Semantics")). Plain loops, double precision: obviously right rather than fast.
#include "vkattn/mha_reference.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>

#include "size_check.hpp"
#include "score_rule.hpp"
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

}  // namespace

MhaOutputs multi_head_attention(const MhaWeights& w, const MhaInputs& in) {
  // ---- checks -------------------------------------------------------------------------------------
  const MhaDims dims = check_mha_weights(w);
  const MhaCall call = check_mha_inputs(dims, in);
  const int64_t E = dims.embed_dim, H = dims.num_heads, kdim = dims.kdim, vdim = dims.vdim;
  const int64_t D = dims.head_dim();    // head dim
  const int64_t KVD = dims.kv_dim();    // projected key/value width
  const int64_t group = H / dims.kv_heads;  // query heads per KV head
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
  std::vector<double> attn(static_cast<std::size_t>(B * Sq * E), 0.0);
  if (in.need_weights) {
    o.weights.assign(static_cast<std::size_t>(in.average_weights ? B * Sq * Sk : B * H * Sq * Sk), 0.0);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // The score modifiers, in attention's order (reference.cpp): scale·q·k -> softcap -> + ALiBi ->
  // + attn_mask -> the boolean masks (causal, window, key padding) -> softmax with the sink.
  const double softcap = in.softcap ? static_cast<double>(*in.softcap) : 0.0;
  const int64_t off = call.diagonal_offset();
  const Window window = in.window.value_or(Window{});
  std::vector<int64_t> keys;
  std::vector<double> p;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const double slope = dims.has_alibi ? static_cast<double>(w.alibi_slopes[static_cast<std::size_t>(h)]) : 0.0;
      for (int64_t i = 0; i < Sq; ++i) {
        // Visible keys: causal rule, the window (i + off - left <= j <= i + off + right), key padding
        // (nonzero = ignore), and attn_mask entries of -inf. Masked keys are skipped, not weighted by
        // 0, so NaN/Inf in them cannot leak into the row.
        int64_t begin = 0, end = Sk;
        if (in.causal == Causal::top_left) end = std::min(Sk, i + 1);
        if (in.causal == Causal::bottom_right) end = std::min(Sk, i + 1 + Sk - Sq);
        if (window.left >= 0) begin = detail::window_key_begin(i + off, window.left, Sk);
        if (window.right >= 0) end = std::min(end, detail::window_key_end(i + off, window.right, Sk));
        keys.clear();
        p.clear();
        for (int64_t j = begin; j < end; ++j) {
          if (!in.key_padding_mask.empty() && in.key_padding_mask[static_cast<std::size_t>(b * Sk + j)] != 0) {
            continue;
          }
          const double bias =
              in.attn_mask.empty() ? 0.0 : static_cast<double>(in.attn_mask[static_cast<std::size_t>(i * Sk + j)]);
          if (bias == -std::numeric_limits<double>::infinity()) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            dot += q[static_cast<std::size_t>((b * Sq + i) * E + h * D + d)] *
                   k[static_cast<std::size_t>((b * Sk + j) * KVD + g * D + d)];
          }
          double score = detail::score(scale, dot, 0.0);
          if (softcap > 0.0 && std::isfinite(score)) score = softcap * std::tanh(score / softcap);
          if (dims.has_alibi) score = detail::add_bias(score, detail::alibi_bias(slope, i + off - j));
          keys.push_back(j);
          p.push_back(detail::add_bias(score, bias));
        }
        if (keys.empty()) continue;  // fully masked row: attention output 0, weights 0 (not NaN)
        // The sink joins the max and the denominator, with no value: it only scales the row down.
        const double sink = dims.has_sinks ? static_cast<double>(w.sinks[static_cast<std::size_t>(h)]) : 0.0;
        double max = dims.has_sinks ? sink : p[0];
        for (const double s : p) max = std::max(max, s);
        double sum = dims.has_sinks ? std::exp(sink - max) : 0.0;
        for (double& s : p) {
          s = std::exp(s - max);
          sum += s;
        }
        double* out_row = attn.data() + (b * Sq + i) * E + h * D;
        for (std::size_t n = 0; n < keys.size(); ++n) {
          const double pn = p[n] / sum;
          const int64_t j = keys[n];
          for (int64_t d = 0; d < D; ++d) out_row[d] += pn * v[static_cast<std::size_t>((b * Sk + j) * KVD + g * D + d)];
          if (in.need_weights) {
            if (in.average_weights) {
              o.weights[static_cast<std::size_t>((b * Sq + i) * Sk + j)] += pn / static_cast<double>(H);
            } else {
              o.weights[static_cast<std::size_t>(((b * H + h) * Sq + i) * Sk + j)] = pn;
            }
          }
        }
      }
    }
  }

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
