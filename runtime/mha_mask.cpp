#include "mha_mask.hpp"

#include <cstring>
#include <limits>

namespace vkattn::detail {

MhaMask merge_mha_masks(const MhaInputs& in, const MhaCall& call) {
  const int64_t B = call.batch, Sq = call.seq_q, Sk = call.seq_k;
  MhaMask m;
  const bool padding = !in.key_padding_mask.empty(), additive = !in.attn_mask.empty();
  if (padding && !additive) {
    m.bytes.resize(in.key_padding_mask.size());
    for (std::size_t i = 0; i < m.bytes.size(); ++i)
      m.bytes[i] = std::byte{in.key_padding_mask[i] ? uint8_t(0) : uint8_t(1)};
    MaskLayout l;
    l.type = MaskType::boolean;
    l.batch = B, l.heads = 1, l.seq_q = Sq, l.seq_k = Sk;
    l.stride_batch = Sk, l.stride_head = 0, l.stride_q = 0;
    m.layout = l;
  } else if (additive) {
    const int64_t mb = padding ? B : 1;
    std::vector<float> bias(static_cast<std::size_t>(mb * Sq * Sk));
    for (int64_t b = 0; b < mb; ++b)
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < Sk; ++j) {
          const bool hidden = padding && in.key_padding_mask[static_cast<std::size_t>(b * Sk + j)] != 0;
          bias[static_cast<std::size_t>((b * Sq + i) * Sk + j)] =
              hidden ? -std::numeric_limits<float>::infinity() : in.attn_mask[static_cast<std::size_t>(i * Sk + j)];
        }
    m.bytes.resize(bias.size() * 4);
    if (!bias.empty()) std::memcpy(m.bytes.data(), bias.data(), m.bytes.size());
    m.layout = MaskLayout::dense(MaskType::f32, mb, 1, Sq, Sk);
  }
  return m;
}

}  // namespace vkattn::detail
