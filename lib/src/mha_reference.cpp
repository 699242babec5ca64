// The fp64 CPU reference of the multi-head attention layer (torch.nn.MultiheadAttention semantics,
// DESIGN.md §1). Plain loops, double precision: obviously right rather than fast.
#include "vkattn/mha_reference.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>

#include "size_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn::reference {

namespace {

using detail::check_non_negative;
using detail::check_positive;
using detail::check_size;

std::string num(int64_t v) { return std::to_string(v); }
std::string shape(std::initializer_list<int64_t> dims) { return detail::shape_string(dims); }

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
  check_positive("embed_dim", w.embed_dim);
  check_positive("num_heads", w.num_heads);
  check_non_negative("kv_heads", w.kv_heads);
  check_non_negative("kdim", w.kdim);
  check_non_negative("vdim", w.vdim);
  const int64_t E = w.embed_dim, H = w.num_heads, KVH = w.effective_kv_heads();
  const int64_t kdim = w.effective_kdim(), vdim = w.effective_vdim();
  if (E % H != 0) {
    throw Error("embed_dim (" + num(E) + ") must be divisible by num_heads (" + num(H) + ")");
  }
  if (H % KVH != 0) {
    throw Error("num_heads (" + num(H) + ") must be divisible by kv_heads (" + num(KVH) + ")");
  }
  const int64_t D = E / H;         // head dim
  const int64_t KVD = KVH * D;     // projected key/value width
  const int64_t group = H / KVH;   // query heads per KV head
  check_non_negative("batch", in.batch);
  check_non_negative("seq_q", in.seq_q);
  check_non_negative("seq_k", in.seq_k);
  const int64_t B = in.batch, Sq = in.seq_q, Sk = in.seq_k;

  check_size("q_proj_weight", w.q_proj_weight.size(), E * E, shape({E, E}));
  check_size("k_proj_weight", w.k_proj_weight.size(), KVD * kdim, shape({KVD, kdim}));
  check_size("v_proj_weight", w.v_proj_weight.size(), KVD * vdim, shape({KVD, vdim}));
  check_size("out_proj_weight", w.out_proj_weight.size(), E * E, shape({E, E}));
  if (w.bias) {
    check_size("in_proj_bias", w.in_proj_bias.size(), E + 2 * KVD, shape({E + 2 * KVD}));
    check_size("out_proj_bias", w.out_proj_bias.size(), E, shape({E}));
  } else {
    check_size("in_proj_bias", w.in_proj_bias.size(), 0, "(bias is false)");
    check_size("out_proj_bias", w.out_proj_bias.size(), 0, "(bias is false)");
  }
  check_size("query", in.query.size(), B * Sq * E, shape({B, Sq, E}));
  // Self-attention: key and value both empty, seq_k == seq_q, and a query that is not itself empty
  // (with no query rows there is nothing to attend from, and an empty key then just means no keys).
  // seq_k must be given (equal to seq_q) rather than inferred, so that key/value left empty by
  // mistake with another seq_k fail on their size instead of silently attending to the query.
  const bool self_attention = in.key.empty() && in.value.empty() && Sk == Sq && B * Sq > 0;
  std::span<const float> key = in.key, value = in.value;
  if (self_attention) {
    if (kdim != E || vdim != E) {
      throw Error("self-attention (key and value empty) needs kdim (" + num(kdim) + ") and vdim (" + num(vdim) +
                  ") equal to embed_dim (" + num(E) + ")");
    }
    key = in.query;
    value = in.query;
  } else {
    const std::string hint = in.key.empty() && in.value.empty() && Sk != Sq
                                 ? " (self-attention, with key and value empty, needs seq_k == seq_q (" + num(Sq) + "))"
                                 : std::string();
    check_size("key", in.key.size(), B * Sk * kdim, shape({B, Sk, kdim}), hint);
    check_size("value", in.value.size(), B * Sk * vdim, shape({B, Sk, vdim}), hint);
  }
  if (!in.key_padding_mask.empty()) {
    check_size("key_padding_mask", in.key_padding_mask.size(), B * Sk, shape({B, Sk}));
  }
  if (!in.attn_mask.empty()) {
    check_size("attn_mask", in.attn_mask.size(), Sq * Sk, shape({Sq, Sk}));
  }

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
  std::vector<int64_t> keys;
  std::vector<double> p;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < Sq; ++i) {
        // Visible keys: causal rule, key padding (nonzero = ignore), and attn_mask entries of -inf.
        // Masked keys are skipped, not weighted by 0, so NaN/Inf in them cannot leak into the row.
        int64_t end = Sk;
        if (in.causal == Causal::top_left) end = std::min(Sk, i + 1);
        if (in.causal == Causal::bottom_right) end = std::min(Sk, i + 1 + Sk - Sq);
        keys.clear();
        p.clear();
        for (int64_t j = 0; j < end; ++j) {
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
          keys.push_back(j);
          p.push_back(scale * dot + bias);
        }
        if (keys.empty()) continue;  // fully masked row: attention output 0, weights 0 (not NaN)
        double max = p[0];
        for (const double s : p) max = std::max(max, s);
        double sum = 0.0;
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
