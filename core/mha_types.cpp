// MhaWeights::from_packed: torch's packed in_proj_weight split into the three projections.
#include "vkattn/mha_types.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "options_check.hpp"
#include "size_check.hpp"

namespace vkattn {
namespace {

std::string float_text(float v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// A per-head weight (sinks, ALiBi slopes): empty (none) or (H) finite values. True when given.
bool check_head_weights(const char* name, const std::vector<float>& values, int64_t heads) {
  if (values.empty()) return false;
  detail::check_size(name, values.size(), heads, detail::shape_string({heads}), " (one per head, or none)");
  for (std::size_t h = 0; h < values.size(); ++h)
    if (!std::isfinite(values[h]))
      throw Error(std::string(name) + "[" + std::to_string(h) + "] is " + float_text(values[h]) +
                  ": the values must be finite");
  return true;
}

}  // namespace

PerHeadValues MhaWeights::per_head() const {
  PerHeadValues v;
  for (PerHeadTensor t : kPerHeadTensors) {
    if (per_head_weight(t).empty()) continue;
    v.layout(t) = HeadValuesLayout{1, num_heads, 0};
    v.values(t) = per_head_weight(t);
  }
  return v;
}

MhaWeights MhaWeights::from_packed(int64_t embed_dim, int64_t num_heads, std::span<const float> in_proj_weight,
                                   std::span<const float> in_proj_bias, std::span<const float> out_proj_weight,
                                   std::span<const float> out_proj_bias) {
  using detail::check_size;
  using detail::shape_string;
  detail::check_positive("embed_dim", embed_dim);
  detail::check_positive("num_heads", num_heads);
  const int64_t e = embed_dim;
  // The products first: they bound every size below (3 * e cannot wrap once 3 * e * e did not).
  const int64_t ee = detail::checked_product("in_proj_weight", {3, e, e}) / 3;
  check_size("in_proj_weight", in_proj_weight.size(), 3 * ee, shape_string({3 * e, e}));
  check_size("out_proj_weight", out_proj_weight.size(), ee, shape_string({e, e}));
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
  const auto n = static_cast<std::ptrdiff_t>(ee);
  w.q_proj_weight.assign(in_proj_weight.begin(), in_proj_weight.begin() + n);
  w.k_proj_weight.assign(in_proj_weight.begin() + n, in_proj_weight.begin() + 2 * n);
  w.v_proj_weight.assign(in_proj_weight.begin() + 2 * n, in_proj_weight.end());
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
  const int64_t KVD = d.kv_dim();  // <= E
  // Products before the sizes they give: E x E bounds E (and so E + 2 * KVD) well inside int64.
  const int64_t EE = detail::checked_product("q_proj_weight", {E, E});
  const int64_t k_size = detail::checked_product("k_proj_weight", {KVD, d.kdim});
  const int64_t v_size = detail::checked_product("v_proj_weight", {KVD, d.vdim});
  check_size("q_proj_weight", w.q_proj_weight.size(), EE, shape_string({E, E}));
  check_size("k_proj_weight", w.k_proj_weight.size(), k_size, shape_string({KVD, d.kdim}));
  check_size("v_proj_weight", w.v_proj_weight.size(), v_size, shape_string({KVD, d.vdim}));
  check_size("out_proj_weight", w.out_proj_weight.size(), EE, shape_string({E, E}));
  if (w.bias) {
    check_size("in_proj_bias", w.in_proj_bias.size(), E + 2 * KVD, shape_string({E + 2 * KVD}));
    check_size("out_proj_bias", w.out_proj_bias.size(), E, shape_string({E}));
  } else {
    check_size("in_proj_bias", w.in_proj_bias.size(), 0, "(bias is false)");
    check_size("out_proj_bias", w.out_proj_bias.size(), 0, "(bias is false)");
  }
  PerHead<bool> given;
  for (PerHeadTensor t : kPerHeadTensors) given[t] = check_head_weights(per_head_weight_name(t), w.per_head_weight(t), H);
  d.has_sinks = given.sinks, d.has_alibi = given.alibi;
  return d;
}

MhaCall check_mha_inputs(const MhaDims& d, const MhaInputs& in) {
  using detail::check_size;
  using detail::shape_string;
  detail::check_non_negative("batch", in.batch);
  detail::check_non_negative("seq_q", in.seq_q);
  detail::check_non_negative("seq_k", in.seq_k);
  detail::check_causal(in.options);
  const Align align = detail::check_score_options(in.options).align;
  detail::checked_scale(in.options, d.head_dim());
  const int64_t B = in.batch, Sq = in.seq_q, Sk = in.seq_k, E = d.embed_dim;
  // Every count the layer and its reference derive from these sizes, checked before any is used:
  // with them in range no product below (nor the layer's byte sizes) can wrap.
  using detail::checked_product;
  const int64_t query_size = checked_product("query", {B, Sq, E});
  const int64_t key_size = checked_product("key", {B, Sk, d.kdim});
  const int64_t value_size = checked_product("value", {B, Sk, d.vdim});
  checked_product("the projected key and value", {B, Sk, d.kv_dim()});
  const int64_t mask_size = checked_product("attn_mask", {Sq, Sk});
  const int64_t padding_size = checked_product("key_padding_mask", {B, Sk});
  if (!in.key_padding_mask.empty() && !in.attn_mask.empty())
    checked_product("the merged key_padding_mask and attn_mask", {B, Sq, Sk});
  if (in.need_weights) checked_product("need_weights", {B, d.num_heads, Sq, Sk});
  check_size("query", in.query.size(), query_size, shape_string({B, Sq, E}));
  MhaCall call;
  call.batch = B, call.seq_q = Sq, call.seq_k = Sk;
  call.align = align;
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
    check_size("key", in.key.size(), key_size, shape_string({B, Sk, d.kdim}), hint);
    check_size("value", in.value.size(), value_size, shape_string({B, Sk, d.vdim}), hint);
  }
  if (!in.key_padding_mask.empty())
    check_size("key_padding_mask", in.key_padding_mask.size(), padding_size, shape_string({B, Sk}));
  if (!in.attn_mask.empty()) check_size("attn_mask", in.attn_mask.size(), mask_size, shape_string({Sq, Sk}));
  return call;
}

}  // namespace vkattn
