// reference::varlen_attention: each sequence of the packed batch is a window onto the packed
// tensors (an offset of cu_seqlens rows, no copy), attended as a dense call of reference::attention.
#include <string>

#include "sequence_reference.hpp"
#include "size_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn::reference {

namespace detail {

VarlenProblem check_varlen_inputs(const VarlenInputs& in) {
  if (in.cu_seqlens_q.empty())
    throw Error("cu_seqlens_q: no values given; it holds batch + 1 values (at least 2)");
  const int64_t batch = static_cast<int64_t>(in.cu_seqlens_q.size()) - 1;
  VarlenAttentionLayouts l;
  l.q = in.q_layout;
  l.k = in.k_layout;
  l.v = in.v_layout;
  l.out = packed_layout(in.q_layout.dtype, in.q_layout.seq, in.q_layout.heads, in.v_layout.dim);
  l.kv_quant = in.kv_quant;
  l.batch = batch;
  l.has_lse = true;
  l.options = in.options;
  l.per_head() = in.layouts();
  const VarlenProblem p = check_varlen_attention(l);

  check_span("q", in.q.size(), in.q_layout.required_elements());
  check_head_value_spans(in);
  check_cu_seqlens("cu_seqlens_q", in.cu_seqlens_q, batch, p.total_q(), "total_q (q.seq)");
  check_cu_seqlens("cu_seqlens_k", in.cu_seqlens_k, batch, p.total_k(), "total_k (k.seq)");
  return p;
}

PackedSequence packed_sequence(const VarlenInputs& in, std::span<const float> k, std::span<const float> v, int64_t b) {
  PackedSequence ps;
  ps.q0 = in.cu_seqlens_q[static_cast<std::size_t>(b)];
  ps.k0 = in.cu_seqlens_k[static_cast<std::size_t>(b)];
  const int64_t seq_q = in.cu_seqlens_q[static_cast<std::size_t>(b + 1)] - ps.q0;
  const int64_t seq_k = in.cu_seqlens_k[static_cast<std::size_t>(b + 1)] - ps.k0;
  Sequence& s = ps.sequence;
  s.q_layout = in.q_layout;
  s.q_layout.seq = seq_q;
  s.q_layout.offset += ps.q0 * in.q_layout.stride_seq;
  s.k_layout = in.k_layout;
  s.v_layout = in.v_layout;
  s.k_layout.seq = s.v_layout.seq = seq_k;
  s.k_layout.offset += ps.k0 * in.k_layout.stride_seq;
  s.v_layout.offset += ps.k0 * in.v_layout.stride_seq;
  s.q = in.q;
  s.k = k;
  s.v = v;
  s.seq_k = seq_k;
  s.weights = in.weights;
  return ps;
}

}  // namespace detail

VarlenOutputs varlen_attention(const VarlenInputs& in) {
  const VarlenProblem p = detail::check_varlen_inputs(in);
  const int64_t batch = p.batch;
  const std::vector<float> k = detail::kv_values("k", in.k, p.kv_quant, in.k_layout.required_elements());
  const std::vector<float> v = detail::kv_values("v", in.v, p.kv_quant, in.v_layout.required_elements());

  const AttentionProblem& a = p.attention;
  VarlenOutputs o;
  o.total_q = p.total_q();
  o.heads = a.heads;
  o.dim_v = a.dim_v;
  o.out.resize(static_cast<std::size_t>(o.total_q * a.heads * a.dim_v));
  o.lse.resize(static_cast<std::size_t>(a.heads * o.total_q));
  o.total_k = p.total_k();
  if (in.weights)
    o.weights.assign(static_cast<std::size_t>(vkattn::detail::checked_product("weights", {a.heads, o.total_q, o.total_k})), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const detail::PackedSequence ps = detail::packed_sequence(in, k, v, b);
    const int64_t q0 = ps.q0, k0 = ps.k0, seq_q = ps.sequence.q_layout.seq, seq_k = ps.sequence.seq_k;
    if (seq_q == 0) continue;
    const Outputs r = detail::attend(ps.sequence, in.options, in, b);
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < seq_q; ++i) {
        for (int64_t d = 0; d < a.dim_v; ++d)
          o.out[static_cast<std::size_t>(((q0 + i) * a.heads + h) * a.dim_v + d)] = r.at(0, h, i, d);
        o.lse[static_cast<std::size_t>(h * o.total_q + q0 + i)] = r.lse[static_cast<std::size_t>(h * seq_q + i)];
        for (int64_t j = 0; j < seq_k && in.weights; ++j)
          o.weights[static_cast<std::size_t>((h * o.total_q + q0 + i) * o.total_k + k0 + j)] =
              r.weights[static_cast<std::size_t>((h * seq_q + i) * seq_k + j)];
      }
  }
  return o;
}

}  // namespace vkattn::reference
