// What the serving references (paged_reference.cpp, varlen_reference.cpp) share: K/V data to f32
// values, and one sequence's dense problem handed to reference::attention.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vkattn/serving_reference.hpp"

namespace vkattn::reference::detail {

// The f32 values of K or V data holding at least `elements` values: a copy of the values, or the
// q8_0 bytes dequantized. Throws Error naming `name` when the data is of the other kind or short.
std::vector<float> kv_values(const char* name, const KvData& data, KvQuant quant, int64_t elements);

// Throws "<name>: <given> values given, layout needs <needed>" when short: one wording for the dense
// reference (reference.cpp) and the serving ones.
void check_span(const char* name, std::size_t given, int64_t needed);

// Each given per-head tensor's span holds at least its layout's elements (check_span).
void check_head_value_spans(const PerHeadValues& values);

// One sequence: Q (1, heads, seq_q, dim_qk), K and V (1, kv_heads, seq_k, dim) with their spans,
// and the call's modifiers, ALiBi taken for batch element `b`. seq_k may be 0 (K and V then
// unread): every row fully masked, by the dense reference's own rule.
struct Sequence {
  TensorLayout q_layout, k_layout, v_layout;
  std::span<const float> q, k, v;
  int64_t seq_k = 0;
  bool weights = false;  // also P (1, heads, seq_q, seq_k); none with no keys
};

// Sequence s as the dense call reference::attention takes, its per-head values row b of the call's,
// for batch element b: `inputs` points into s's spans and, for a sequence with no keys, into this
// object's one zero key (hidden behind a key length of 0), so it is neither copied nor moved.
struct SequenceCall {
  SequenceCall(const Sequence& s, const AttentionOptions& options, const PerHeadValues& per_head, int64_t b);
  SequenceCall(const SequenceCall&) = delete;
  SequenceCall& operator=(const SequenceCall&) = delete;

  Inputs inputs;

 private:
  std::vector<float> none_;
  int32_t no_keys_[1] = {0};
};

// The packed batch's checks (check_varlen_attention, the spans, cu_seqlens' values), the batch
// cu_seqlens_q.size() - 1; throws vkattn::Error. K and V's data are checked where they are read
// (kv_values).
VarlenProblem check_varlen_inputs(const VarlenInputs& in);

// Sequence b of a packed batch: its rows of Q (from packed row q0) and of K and V (from packed row
// k0, their f32 values k and v), as windows onto the packed tensors.
struct PackedSequence {
  Sequence sequence;
  int64_t q0 = 0, k0 = 0;
};
PackedSequence packed_sequence(const VarlenInputs& in, std::span<const float> k, std::span<const float> v, int64_t b);

// Sequence s attended by the dense reference, with dropout's b = b (its mask is sequence b's, i and j
// counted within the sequence).
Outputs attend(const Sequence& s, const AttentionOptions& options, const PerHeadValues& per_head, int64_t b);

}  // namespace vkattn::reference::detail
