#include "bench_backward.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "bench_metrics.hpp"
#include "vkattn/attention_backward.hpp"
#include "vkattn/backward_reference.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/timer.hpp"

namespace vkattn::cli {
namespace {

// FlashAttention's convention for the backward pass: 2.5x the forward's FLOPs.
constexpr double kBackwardFlopsFactor = 2.5;

// One rotated set: the forward's inputs and outputs, dO and the gradients.
struct BackwardSet {
  Buffer q, k, v, out, lse, grad_out, dq, dk, dv;
};

std::vector<float> download_values(const Buffer& b, DType dtype, std::size_t n) {
  std::vector<std::byte> raw(n * dtype_size(dtype));
  if (n) b.download(raw.data(), raw.size());
  std::vector<float> values(n);
  decode(dtype, raw.data(), values.data(), n);
  return values;
}

// max |got - want| / max |want| over one gradient (NaN where want has none: +inf).
double gradient_error(const std::vector<float>& got, const std::vector<double>& want) {
  double scale = 0.0, err = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(want[i]));
  for (std::size_t i = 0; i < want.size(); ++i)
    err = std::max(err, std::isnan(got[i]) && !std::isnan(want[i]) ? INFINITY : std::abs(double(got[i]) - want[i]));
  return err / std::max(scale, 1e-3);
}

// --check: set 0's gradients against the fp64 reference's; the worst of dQ, dK and dV.
CheckResult check_gradients(const AttentionLayouts& l, DType dtype, const std::vector<float>& q, const std::vector<float>& k,
                            const std::vector<float>& v, const std::vector<float>& grad_out, const PerHeadValues& per_head,
                            const BackwardSet& set0) {
  reference::Inputs in;
  in.q_layout = l.q, in.k_layout = l.k, in.v_layout = l.v;
  in.q = q, in.k = k, in.v = v;
  in.options = l.options;
  in.per_head_values() = per_head;
  const reference::Gradients want = reference::attention_backward(in, l.out, grad_out);
  // The reference's K and V gradients are dense (B, G, Sk, D); the bench's layouts are BHSD or BSHD.
  const auto dense = [&](const std::vector<float>& got, const TensorLayout& t) {
    std::vector<float> d(static_cast<std::size_t>(t.element_count()));
    for (int64_t b = 0; b < t.batch; ++b)
      for (int64_t h = 0; h < t.heads; ++h)
        for (int64_t s = 0; s < t.seq; ++s)
          for (int64_t e = 0; e < t.dim; ++e)
            d[std::size_t(((b * t.heads + h) * t.seq + s) * t.dim + e)] = got[std::size_t(t.index(b, h, s, e))];
    return d;
  };
  CheckResult r;
  r.tolerance = dtype == DType::f32 ? 2e-4 : dtype == DType::f16 ? 1e-2 : 6e-2;
  r.rows_checked = static_cast<std::size_t>(l.q.batch * l.q.heads * l.q.seq);
  const std::size_t nq = std::size_t(l.q.required_elements()), nk = std::size_t(l.k.required_elements()),
                    nv = std::size_t(l.v.required_elements());
  r.max_err_over_max_v = std::max({gradient_error(dense(download_values(set0.dq, dtype, nq), l.q), want.dq),
                                   gradient_error(dense(download_values(set0.dk, dtype, nk), l.k), want.dk),
                                   gradient_error(dense(download_values(set0.dv, dtype, nv), l.v), want.dv)});
  return r;
}

}  // namespace

BenchResult bench_backward(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype) {
  AttentionLayouts layouts = bench_layouts(shape, dtype);
  layouts.has_lse = true;  // the backward reads the forward's LSE
  BenchResult result;
  result.shape = shape;
  result.dtype = dtype;
  result.backward = true;
  const AttentionProblem problem = check_attention(layouts);
  const auto bytes_of = [](const TensorLayout& t) { return uint64_t(t.required_elements()) * dtype_size(t.dtype); };
  const uint64_t q_bytes = bytes_of(layouts.q), k_bytes = bytes_of(layouts.k), v_bytes = bytes_of(layouts.v),
                 out_bytes = bytes_of(layouts.out), lse_bytes = uint64_t(problem.batch * problem.heads * problem.seq_q) * 4;
  // Per set: Q, K, V, O, LSE, dO and the three gradients.
  const uint64_t set_bytes = 2 * (q_bytes + k_bytes + v_bytes) + 2 * out_bytes + lse_bytes;
  check_shape_fits(o, context.device_info(), {q_bytes, k_bytes, v_bytes, out_bytes, out_bytes, q_bytes, k_bytes, v_bytes});

  std::mt19937_64 rng(o.seed);
  const std::vector<float> q = random_values(std::size_t(layouts.q.element_count()), dtype, rng);
  const std::vector<float> k = random_values(std::size_t(layouts.k.required_elements()), dtype, rng);
  const std::vector<float> v = random_values(std::size_t(layouts.v.required_elements()), dtype, rng);
  const std::vector<float> grad_out = random_values(std::size_t(layouts.out.element_count()), dtype, rng);
  const PerHeadInputs per_head = PerHeadInputs::fixed(shape.per_head, shape.heads);

  context.release_scratch();
  context.reset_peak_memory();
  const uint64_t baseline = context.memory_stats().current_bytes;
  PerHead<std::optional<Buffer>> per_head_storage;
  const PerHead<const Buffer*> per_head_buffers = per_head.upload(context, per_head_storage);

  std::vector<BackwardSet> sets;
  result.rotated_input_bytes = make_rotated_sets(context, rotation_count(double(set_bytes)), sets, [&] {
    const auto empty = [&](uint64_t bytes) { return Buffer::allocate(context, std::max<uint64_t>(bytes, 16)); };
    return BackwardSet{upload(context, dtype, q),        upload(context, dtype, k), upload(context, dtype, v),
                       empty(out_bytes),                empty(lse_bytes),          upload(context, dtype, grad_out),
                       empty(q_bytes),                  empty(k_bytes),            empty(v_bytes)};
  });
  result.rotations = static_cast<int>(sets.size());

  // --path unfused: the three-stage forward (without weights: they are not timed) and its backward.
  AttentionSpec spec = AttentionSpec::dense(layouts);
  spec.path = shape.path;
  std::vector<BackwardBuffers> rotations(sets.size());
  {
    const PreparedAttention forward(context, spec);
    for (std::size_t r = 0; r < sets.size(); ++r) {
      BackwardBuffers& b = rotations[r];
      b.forward.q = &sets[r].q, b.forward.k = &sets[r].k, b.forward.v = &sets[r].v, b.forward.out = &sets[r].out;
      b.forward.lse = {&sets[r].lse, 0};
      b.forward.per_head() = per_head_buffers;
      b.grad_out = &sets[r].grad_out;
      b.grad_q = &sets[r].dq, b.grad_k = &sets[r].dk, b.grad_v = &sets[r].dv;
      forward.run(b.forward);  // the forward, before anything is timed
    }
  }
  const PreparedAttentionBackward planned(context, spec);
  const BackwardPlan& plan = planned.plan();
  result.plan.path = "backward";
  result.plan.kernel = plan.kernel;
  result.plan.splits = std::max(plan.query_splits, plan.key_splits);
  result.plan.workspace_bytes = planned.workspace_bytes();
  result.plan.chunks = plan.dispatches;
  result.device_bytes = set_bytes + result.plan.workspace_bytes;
  if (o.check)
    for (BackwardSet& s : sets) s.dq.fill(0xFF), s.dk.fill(0xFF), s.dv.fill(0xFF);

  time_runs(context, o,
            [&](int warmup, int iters) { return time_attention_backward(context, spec, rotations, warmup, iters); }, result);
  result.peak_device_bytes = context.memory_stats().peak_bytes - baseline - result.rotated_input_bytes;
  const double seconds = result.ms_median * 1e-3;
  result.tflops = seconds > 0 ? kBackwardFlopsFactor * credited_flops(problem, {}, false) / seconds * 1e-12 : 0.0;
  // Bytes the backward reads and writes at least once: Q, K, V, O, dO, LSE and the gradients.
  result.gbps = seconds > 0 ? double(set_bytes) / seconds * 1e-9 : 0.0;
  if (o.check) result.check = check_gradients(layouts, dtype, q, k, v, grad_out, per_head.reference(), sets[0]);
  return result;
}

}  // namespace vkattn::cli
