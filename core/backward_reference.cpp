// The fp64 reference of attention's backward pass (vkattn/backward_reference.hpp; the contract:
// docs/semantics.md, "Backward"). Each row is recomputed through the forward's own code (score_row,
// the score chain's softmax, dropout and O), then differentiated by the score chain's
// ScoreRow::backward, which the layer's backward reference shares. Plain loops in double precision:
// it is the yardstick for a device's backward pass.
#include "vkattn/backward_reference.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "dense_reference.hpp"
#include "layout_check.hpp"
#include "score_chain.hpp"
#include "sequence_reference.hpp"
#include "vkattn/error.hpp"

namespace vkattn::reference {

namespace {

std::string shape_text(int64_t a, int64_t b, int64_t c, int64_t d) {
  return "(" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ", " + std::to_string(d) + ")";
}

// grad_out's layout is valid, of the call's dtype, and its span holds it.
void check_grad_out_data(const TensorLayout& layout, DType dtype, std::span<const float> grad_out) {
  vkattn::detail::check_tensor_layout("grad_out", layout);
  if (layout.dtype != dtype)
    throw Error(std::string("grad_out.dtype (") + to_string(layout.dtype) + ") must equal q.dtype (" +
                to_string(dtype) + ")");
  detail::check_span("grad_out", grad_out.size(), layout.required_elements());
}

std::size_t at(int64_t index) { return static_cast<std::size_t>(index); }

// attention_backward with dropout's batch index of batch element b being dropout_batch + b (a packed
// batch's sequence b is a dense call of batch 1 with dropout_batch b), as detail::attention.
Gradients attention_backward_at(const Inputs& in, const TensorLayout& g_layout, std::span<const float> grad_out,
                             int64_t dropout_batch) {
  const AttentionProblem p = detail::check_inputs(in, {});
  if (g_layout.batch != p.batch || g_layout.heads != p.heads || g_layout.seq != p.seq_q || g_layout.dim != p.dim_v)
    throw Error("grad_out: shape " + shape_text(g_layout.batch, g_layout.heads, g_layout.seq, g_layout.dim) +
                " must equal O's (batch, heads, seq_q, dim_v) = " + shape_text(p.batch, p.heads, p.seq_q, p.dim_v));
  check_grad_out_data(g_layout, p.dtype, grad_out);

  Gradients g;
  g.batch = p.batch, g.heads = p.heads, g.kv_heads = p.kv_heads, g.seq_q = p.seq_q, g.seq_k = p.seq_k;
  g.dim_qk = p.dim_qk, g.dim_v = p.dim_v;
  g.dq.assign(at(p.batch * p.heads * p.seq_q * p.dim_qk), 0.0);
  g.dk.assign(at(p.batch * p.kv_heads * p.seq_k * p.dim_qk), 0.0);
  g.dv.assign(at(p.batch * p.kv_heads * p.seq_k * p.dim_v), 0.0);
  if (in.sinks_layout) g.dsinks.assign(at(in.sinks_layout->batch * in.sinks_layout->heads), 0.0);

  detail::ScoreRow row(detail::score_modifiers(in.options, static_cast<double>(p.scale), in.per_head_values()));
  std::vector<double> o(at(p.dim_v)), dout(at(p.dim_v));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t kv = h / p.group_size();
      const auto q = [&](int64_t i, int64_t d) { return static_cast<double>(in.q[at(in.q_layout.index(b, h, i, d))]); };
      const auto k = [&](int64_t j, int64_t d) { return static_cast<double>(in.k[at(in.k_layout.index(b, kv, j, d))]); };
      const auto v = [&](int64_t j, int64_t d) { return static_cast<double>(in.v[at(in.v_layout.index(b, kv, j, d))]); };
      for (int64_t i = 0; i < p.seq_q; ++i) {
        // The forward's row: its scores, P, dropout's Z and O, exactly as reference::attention has them.
        detail::score_row(in, p, b, h, i, row);
        if (row.empty()) continue;  // fully masked: O = 0 whatever the inputs; no gradient
        row.softmax();
        row.apply_dropout(p.heads, dropout_batch + b, h, i);
        row.output(p.dim_v, detail::ValueSum::weights_then_divide, v, o.data());
        for (int64_t d = 0; d < p.dim_v; ++d) dout[at(d)] = static_cast<double>(grad_out[at(g_layout.index(b, h, i, d))]);

        const double d_row = row.backward(
            p.dim_qk, p.dim_v, o.data(), dout.data(), [&](int64_t d) { return q(i, d); }, k, v,
            [&](int64_t d, double x) { g.dq[at(((b * p.heads + h) * p.seq_q + i) * p.dim_qk + d)] += x; },
            [&](int64_t j, int64_t d, double x) { g.dk[at(((b * p.kv_heads + kv) * p.seq_k + j) * p.dim_qk + d)] += x; },
            [&](int64_t j, int64_t d, double x) { g.dv[at(((b * p.kv_heads + kv) * p.seq_k + j) * p.dim_v + d)] += x; });
        if (in.sinks_layout) {  // dσ_h = -e^(σ_h - LSE) D_i, summed over what the tensor broadcasts
          const HeadValuesLayout& l = *in.sinks_layout;
          g.dsinks[at(l.index(b, h) - l.offset)] += row.sink_gradient(d_row);
        }
      }
    }
  return g;
}

}  // namespace

Gradients attention_backward(const Inputs& inputs, const TensorLayout& grad_out_layout,
                             std::span<const float> grad_out) {
  return attention_backward_at(inputs, grad_out_layout, grad_out, 0);
}

VarlenGradients varlen_attention_backward(const VarlenInputs& in, const TensorLayout& g_layout,
                                          std::span<const float> grad_out) {
  if (in.kv_quant == KvQuant::q8_0)
    throw Error("kv_quant: q8_0 K and V are an inference layout; the backward pass takes f32, f16 or bf16 K and V");
  const VarlenProblem p = detail::check_varlen_inputs(in);
  const AttentionProblem& a = p.attention;
  if (g_layout.batch != 1 || g_layout.heads != a.heads || g_layout.seq != p.total_q() || g_layout.dim != a.dim_v)
    throw Error("grad_out: shape " + shape_text(g_layout.batch, g_layout.heads, g_layout.seq, g_layout.dim) +
                " must be O's packed (1, heads, total_q, dim_v) = " + shape_text(1, a.heads, p.total_q(), a.dim_v) +
                " (packed_layout)");
  check_grad_out_data(g_layout, a.dtype, grad_out);
  const std::vector<float> k = detail::kv_values("k", in.k, p.kv_quant, in.k_layout.required_elements());
  const std::vector<float> v = detail::kv_values("v", in.v, p.kv_quant, in.v_layout.required_elements());

  VarlenGradients g;
  g.total_q = p.total_q(), g.total_k = p.total_k(), g.heads = a.heads, g.kv_heads = a.kv_heads;
  g.dim_qk = a.dim_qk, g.dim_v = a.dim_v;
  g.dq.assign(at(g.total_q * a.heads * a.dim_qk), 0.0);
  g.dk.assign(at(g.total_k * a.kv_heads * a.dim_qk), 0.0);
  g.dv.assign(at(g.total_k * a.kv_heads * a.dim_v), 0.0);
  if (in.sinks_layout) g.dsinks.assign(at(in.sinks_layout->batch * in.sinks_layout->heads), 0.0);

  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::PackedSequence ps = detail::packed_sequence(in, k, v, b);
    const int64_t q0 = ps.q0, k0 = ps.k0, seq_q = ps.sequence.q_layout.seq, seq_k = ps.sequence.seq_k;
    if (seq_q == 0) continue;
    const detail::SequenceCall call(ps.sequence, in.options, in, b);
    TensorLayout seq_g_layout = g_layout;  // the sequence's rows of grad_out
    seq_g_layout.seq = seq_q;
    seq_g_layout.offset += q0 * g_layout.stride_seq;
    const Gradients r = attention_backward_at(call.inputs, seq_g_layout, grad_out, b);
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < seq_q; ++i)
        for (int64_t d = 0; d < a.dim_qk; ++d)
          g.dq[at(((q0 + i) * a.heads + h) * a.dim_qk + d)] = r.dq[at((h * seq_q + i) * a.dim_qk + d)];
    for (int64_t kv = 0; kv < a.kv_heads; ++kv)
      for (int64_t j = 0; j < seq_k; ++j) {  // none for a sequence without keys (r's one key is a stand-in)
        for (int64_t d = 0; d < a.dim_qk; ++d)
          g.dk[at(((k0 + j) * a.kv_heads + kv) * a.dim_qk + d)] = r.dk[at((kv * seq_k + j) * a.dim_qk + d)];
        for (int64_t d = 0; d < a.dim_v; ++d)
          g.dv[at(((k0 + j) * a.kv_heads + kv) * a.dim_v + d)] = r.dv[at((kv * seq_k + j) * a.dim_v + d)];
      }
    if (in.sinks_layout) {  // the sequence's (heads) are row b of the call's sinks
      const HeadValuesLayout& l = *in.sinks_layout;
      for (int64_t h = 0; h < a.heads; ++h) g.dsinks[at(l.index(b, h) - l.offset)] += r.dsinks[at(h)];
    }
  }
  return g;
}

}  // namespace vkattn::reference
