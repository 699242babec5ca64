// The fp64 CPU reference of the multi-head attention layer (torch.nn.MultiheadAttention semantics,
// DESIGN.md §1). Plain loops, double precision: obviously right rather than fast.
#include "vkattn/mha_reference.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "vkattn/error.hpp"

namespace vkattn::reference {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

// "(a, b, c)". Built with += (GCC 12 warns falsely, -Wrestrict, on "(" + std::string).
std::string shape(std::initializer_list<int64_t> dims) {
  std::string s(1, '(');
  for (const int64_t d : dims) {
    if (s.size() > 1) s += ", ";
    s += num(d);
  }
  s += ')';
  return s;
}

void check_size(const char* name, std::size_t given, int64_t expected, const std::string& shape) {
  if (static_cast<int64_t>(given) != expected) {
    throw Error(std::string(name) + ": expected " + num(expected) + " values " + shape + ", given " +
                std::to_string(given));
  }
}

void check_positive(const char* name, int64_t v) {
  if (v < 1) throw Error(std::string(name) + " (" + num(v) + ") must be >= 1");
}

void check_non_negative(const char* name, int64_t v) {
  if (v < 0) throw Error(std::string(name) + " (" + num(v) + ") must be >= 0");
}

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

MhaWeights MhaWeights::from_packed(int64_t embed_dim, int64_t num_heads, std::span<const float> in_proj_weight,
                                   std::span<const float> in_proj_bias, std::span<const float> out_proj_weight,
                                   std::span<const float> out_proj_bias) {
  check_positive("embed_dim", embed_dim);
  check_positive("num_heads", num_heads);
  const int64_t e = embed_dim;
  check_size("in_proj_weight", in_proj_weight.size(), 3 * e * e, shape({3 * e, e}));
  const bool bias = !in_proj_bias.empty() || !out_proj_bias.empty();
  if (bias) {
    check_size("in_proj_bias", in_proj_bias.size(), 3 * e, shape({3 * e}));
    check_size("out_proj_bias", out_proj_bias.size(), e, shape({e}));
  }
  MhaWeights w;
  w.embed_dim = e;
  w.num_heads = num_heads;
  w.kv_heads = num_heads;
  w.kdim = e;
  w.vdim = e;
  w.bias = bias;
  const auto ee = static_cast<std::ptrdiff_t>(e * e);
  w.q_proj_weight.assign(in_proj_weight.begin(), in_proj_weight.begin() + ee);
  w.k_proj_weight.assign(in_proj_weight.begin() + ee, in_proj_weight.begin() + 2 * ee);
  w.v_proj_weight.assign(in_proj_weight.begin() + 2 * ee, in_proj_weight.end());
  w.in_proj_bias.assign(in_proj_bias.begin(), in_proj_bias.end());
  w.out_proj_weight.assign(out_proj_weight.begin(), out_proj_weight.end());
  w.out_proj_bias.assign(out_proj_bias.begin(), out_proj_bias.end());
  return w;
}

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
  check_size("key", in.key.size(), B * Sk * kdim, shape({B, Sk, kdim}));
  check_size("value", in.value.size(), B * Sk * vdim, shape({B, Sk, vdim}));
  if (!in.key_padding_mask.empty()) {
    check_size("key_padding_mask", in.key_padding_mask.size(), B * Sk, shape({B, Sk}));
  }

  // ---- projections (fp64) -------------------------------------------------------------------------
  const float* bq = w.bias ? w.in_proj_bias.data() : nullptr;
  const float* bk = w.bias ? w.in_proj_bias.data() + E : nullptr;
  const float* bv = w.bias ? w.in_proj_bias.data() + E + KVD : nullptr;
  const std::vector<double> q = linear(in.query, B * Sq, E, w.q_proj_weight.data(), E, bq);       // (B,Sq,E)
  const std::vector<double> k = linear(in.key, B * Sk, kdim, w.k_proj_weight.data(), KVD, bk);    // (B,Sk,KVD)
  const std::vector<double> v = linear(in.value, B * Sk, vdim, w.v_proj_weight.data(), KVD, bv);  // (B,Sk,KVD)

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
        // Visible keys: causal rule, then key padding (nonzero = ignore). Masked keys are skipped, not
        // weighted by 0, so NaN/Inf in them cannot leak into the row.
        int64_t end = Sk;
        if (in.causal == Causal::top_left) end = std::min(Sk, i + 1);
        if (in.causal == Causal::bottom_right) end = std::min(Sk, i + 1 + Sk - Sq);
        keys.clear();
        p.clear();
        for (int64_t j = 0; j < end; ++j) {
          if (!in.key_padding_mask.empty() && in.key_padding_mask[static_cast<std::size_t>(b * Sk + j)] != 0) {
            continue;
          }
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            dot += q[static_cast<std::size_t>((b * Sq + i) * E + h * D + d)] *
                   k[static_cast<std::size_t>((b * Sk + j) * KVD + g * D + d)];
          }
          keys.push_back(j);
          p.push_back(scale * dot);
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
