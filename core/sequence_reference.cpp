// One sequence of a paged or packed batch as a dense call of reference::attention: the serving
// references reuse its softmax, masks and modifiers rather than restate them.
#include "sequence_reference.hpp"

#include <algorithm>
#include <string>

#include "dense_reference.hpp"
#include "vkattn/error.hpp"
#include "vkattn/q8_0.hpp"

namespace vkattn::reference::detail {

void check_span(const char* name, std::size_t given, int64_t needed) {
  if (static_cast<int64_t>(given) < needed)
    throw Error(std::string(name) + ": " + std::to_string(given) + " values given, layout needs " +
                std::to_string(needed));
}

std::vector<float> kv_values(const char* name, const KvData& data, KvQuant quant, int64_t elements) {
  const std::string n(name);
  if (quant == KvQuant::q8_0) {
    if (!data.values.empty()) throw Error(n + ": f32 values given, but it is q8_0: give its bytes (KvData::q8_0)");
    // The layouts' q8_0 checks make `elements` whole blocks.
    const int64_t bytes = q8_0_bytes(elements);
    if (static_cast<int64_t>(data.q8_0.size()) < bytes)
      throw Error(n + ": " + std::to_string(data.q8_0.size()) + " q8_0 bytes given, layout needs " +
                  std::to_string(bytes) + " (" + std::to_string(elements) + " values)");
    return dequantize_q8_0(data.q8_0.first(static_cast<std::size_t>(bytes)));
  }
  if (!data.q8_0.empty()) throw Error(n + ": q8_0 bytes given, but it is not q8_0: give its values (KvData::values)");
  check_span(name, data.values.size(), elements);
  return {data.values.begin(), data.values.end()};
}

void check_head_value_spans(const PerHeadValues& values) {
  for (PerHeadTensor t : kPerHeadTensors)
    if (values.layout(t)) check_span(to_string(t), values.values(t).size(), values.layout(t)->required_elements());
}

SequenceCall::SequenceCall(const Sequence& s, const AttentionOptions& options, const PerHeadValues& per_head,
                           int64_t b) {
  Inputs& in = inputs;
  in.q_layout = s.q_layout;
  in.q = s.q;
  in.options = options;
  // Each tensor as this sequence's (heads): row b of per-sequence (batch, heads) values.
  for (PerHeadTensor t : kPerHeadTensors) {
    const std::optional<HeadValuesLayout>& layout = per_head.layout(t);
    if (!layout) continue;
    in.layout(t) = HeadValuesLayout{1, layout->heads, 0};
    in.values(t) = per_head.values(t).subspan(static_cast<std::size_t>(layout->index(b, 0)),
                                              static_cast<std::size_t>(layout->heads));
  }
  // No keys: one zero key behind a key length of 0, so the dense reference's fully-masked rule (O =
  // 0, LSE = -inf or the sink) decides, not a copy of it here.
  if (s.seq_k == 0) {
    in.k_layout = TensorLayout::bhsd(s.k_layout.dtype, 1, s.k_layout.heads, 1, s.k_layout.dim);
    in.v_layout = TensorLayout::bhsd(s.v_layout.dtype, 1, s.v_layout.heads, 1, s.v_layout.dim);
    none_.assign(static_cast<std::size_t>(s.k_layout.heads * std::max(s.k_layout.dim, s.v_layout.dim)), 0.0f);
    in.k = none_;
    in.v = none_;
    in.kv_lengths = no_keys_;
  } else {
    in.k_layout = s.k_layout;
    in.v_layout = s.v_layout;
    in.k = s.k;
    in.v = s.v;
    in.weights = s.weights;
  }
}

Outputs attend(const Sequence& s, const AttentionOptions& options, const PerHeadValues& per_head, int64_t b) {
  const SequenceCall call(s, options, per_head, b);
  return attention(call.inputs, {}, b);
}

}  // namespace vkattn::reference::detail
