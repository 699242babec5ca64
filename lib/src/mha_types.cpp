// MhaWeights::from_packed: torch's packed in_proj_weight split into the three projections.
#include "vkattn/mha_types.hpp"

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

}  // namespace vkattn
