// MhaWeights::from_packed: torch's packed in_proj_weight split into the three projections.
#include "vkattn/mha_types.hpp"

#include <string>

#include "size_check.hpp"

namespace vkattn {

MhaWeights MhaWeights::from_packed(int64_t embed_dim, int64_t num_heads, std::span<const float> in_proj_weight,
                                   std::span<const float> in_proj_bias, std::span<const float> out_proj_weight,
                                   std::span<const float> out_proj_bias) {
  using detail::check_size;
  using detail::shape_string;
  detail::check_positive("embed_dim", embed_dim);
  detail::check_positive("num_heads", num_heads);
  const int64_t e = embed_dim;
  check_size("in_proj_weight", in_proj_weight.size(), 3 * e * e, shape_string({3 * e, e}));
  check_size("out_proj_weight", out_proj_weight.size(), e * e, shape_string({e, e}));
  // torch's bias=False drops both biases; one without the other is a broken state_dict.
  const bool bias = !in_proj_bias.empty() || !out_proj_bias.empty();
  if (bias) {
    check_size("in_proj_bias", in_proj_bias.size(), 3 * e, shape_string({3 * e}));
    check_size("out_proj_bias", out_proj_bias.size(), e, shape_string({e}));
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

MhaDims check_mha_weights(const MhaWeights& w) {
  using detail::check_size;
  using detail::shape_string;
  detail::check_positive("embed_dim", w.embed_dim);
  detail::check_positive("num_heads", w.num_heads);
  detail::check_non_negative("kv_heads", w.kv_heads);
  detail::check_non_negative("kdim", w.kdim);
  detail::check_non_negative("vdim", w.vdim);
  MhaDims d;
  d.embed_dim = w.embed_dim;
  d.num_heads = w.num_heads;
  d.kv_heads = w.effective_kv_heads();
  d.kdim = w.effective_kdim();
  d.vdim = w.effective_vdim();
  d.bias = w.bias;
  const int64_t E = d.embed_dim, H = d.num_heads;
  if (E % H != 0)
    throw Error("embed_dim (" + std::to_string(E) + ") must be divisible by num_heads (" + std::to_string(H) + ")");
  if (H % d.kv_heads != 0)
    throw Error("num_heads (" + std::to_string(H) + ") must be divisible by kv_heads (" + std::to_string(d.kv_heads) + ")");
  const int64_t KVD = d.kv_dim();
  check_size("q_proj_weight", w.q_proj_weight.size(), E * E, shape_string({E, E}));
  check_size("k_proj_weight", w.k_proj_weight.size(), KVD * d.kdim, shape_string({KVD, d.kdim}));
  check_size("v_proj_weight", w.v_proj_weight.size(), KVD * d.vdim, shape_string({KVD, d.vdim}));
  check_size("out_proj_weight", w.out_proj_weight.size(), E * E, shape_string({E, E}));
  if (w.bias) {
    check_size("in_proj_bias", w.in_proj_bias.size(), E + 2 * KVD, shape_string({E + 2 * KVD}));
    check_size("out_proj_bias", w.out_proj_bias.size(), E, shape_string({E}));
  } else {
    check_size("in_proj_bias", w.in_proj_bias.size(), 0, "(bias is false)");
    check_size("out_proj_bias", w.out_proj_bias.size(), 0, "(bias is false)");
  }
  return d;
}

MhaCall check_mha_inputs(const MhaDims& d, const MhaInputs& in) {
  using detail::check_size;
  using detail::shape_string;
  detail::check_non_negative("batch", in.batch);
  detail::check_non_negative("seq_q", in.seq_q);
  detail::check_non_negative("seq_k", in.seq_k);
  const int64_t B = in.batch, Sq = in.seq_q, Sk = in.seq_k, E = d.embed_dim;
  check_size("query", in.query.size(), B * Sq * E, shape_string({B, Sq, E}));
  MhaCall call;
  call.batch = B, call.seq_q = Sq, call.seq_k = Sk;
  // Self-attention: key and value both empty, seq_k == seq_q, and a query that is not itself empty
  // (with no query rows there is nothing to attend from, and an empty key then just means no keys).
  // seq_k must be given (equal to seq_q) rather than inferred, so that key/value left empty by
  // mistake with another seq_k fail on their size instead of silently attending to the query.
  call.self_attention = in.key.empty() && in.value.empty() && Sk == Sq && B * Sq > 0;
  if (call.self_attention) {
    if (d.kdim != E || d.vdim != E)
      throw Error("self-attention (key and value empty) needs kdim (" + std::to_string(d.kdim) + ") and vdim (" +
                  std::to_string(d.vdim) + ") equal to embed_dim (" + std::to_string(E) + ")");
  } else {
    const std::string hint = in.key.empty() && in.value.empty() && Sk != Sq
                                 ? " (self-attention, with key and value empty, needs seq_k == seq_q (" +
                                       std::to_string(Sq) + "))"
                                 : std::string();
    check_size("key", in.key.size(), B * Sk * d.kdim, shape_string({B, Sk, d.kdim}), hint);
    check_size("value", in.value.size(), B * Sk * d.vdim, shape_string({B, Sk, d.vdim}), hint);
  }
  if (!in.key_padding_mask.empty())
    check_size("key_padding_mask", in.key_padding_mask.size(), B * Sk, shape_string({B, Sk}));
  if (!in.attn_mask.empty()) check_size("attn_mask", in.attn_mask.size(), Sq * Sk, shape_string({Sq, Sk}));
  return call;
}

}  // namespace vkattn
