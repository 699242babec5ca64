// The three-stage path's row softmax by quads (attention_softmax_quads, CPU devices with shaderInt64):
// taken where seq_k % 4 == 0 and P's binding starts on a 16-byte grid at replay, the plain build
// elsewhere (the chunk mask), and both give the fp64 reference's weights and O. The conformance
// suites run both builds over every mask and modifier (seq_k of either residue); this pins which
// build runs where, with the weights at an offset that puts P off the grid.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"
#include "vkattn/dispatch_profile.hpp"
#include "vkattn/reference.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

std::vector<float> random_values(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Buffer upload_floats(Context& ctx, const std::vector<float>& values) {
  Buffer b = Buffer::allocate(ctx, values.size() * 4);
  b.upload(values.data(), values.size() * 4);
  return b;
}

// One causal three-stage call with the weights written `weights_offset` bytes into their buffer (P
// poisoned first): the softmax pipeline that ran, and the largest error of P and O against the fp64
// reference.
struct SoftmaxRun {
  std::string softmax_pipeline;
  double p_error = INFINITY, o_error = INFINITY;
};

SoftmaxRun run_three_stage(Context& ctx, int64_t seq_q, int64_t seq_k, uint64_t weights_offset) {
  const TensorLayout ql = TensorLayout::bhsd(DType::f32, 1, 2, seq_q, 32), kl = TensorLayout::bhsd(DType::f32, 1, 2, seq_k, 32);
  const std::vector<float> q = random_values(std::size_t(ql.required_elements()), 1),
                           k = random_values(std::size_t(kl.required_elements()), 2),
                           v = random_values(std::size_t(kl.required_elements()), 3);
  Buffer qb = upload_floats(ctx, q), kb = upload_floats(ctx, k), vb = upload_floats(ctx, v);
  Buffer ob = upload_floats(ctx, std::vector<float>(std::size_t(ql.required_elements()), NAN));
  const std::size_t p_count = std::size_t(2 * seq_q * seq_k);
  std::vector<float> poison(weights_offset / 4 + p_count, NAN);
  Buffer wb = upload_floats(ctx, poison);

  AttentionArgs args;
  args.q = {&qb, ql};
  args.k = {&kb, kl};
  args.v = {&vb, kl};
  args.out = {&ob, ql};
  args.weights = {&wb, weights_offset};
  args.options.causal = Causal::bottom_right;
  args.path = AttentionPath::unfused;

  SoftmaxRun run;
  {
    DispatchProfile profile(ctx);
    attention(ctx, args);
    for (const DispatchTime& t : profile.collect())
      if (t.pipeline.find("softmax") != std::string::npos) run.softmax_pipeline = t.pipeline;
  }
  std::vector<float> got_p(poison.size()), got_o(q.size());
  wb.download(got_p.data(), got_p.size() * 4);
  ob.download(got_o.data(), got_o.size() * 4);

  reference::Inputs in;
  in.q_layout = ql, in.k_layout = kl, in.v_layout = kl;
  in.q = q, in.k = k, in.v = v;
  in.options = args.options;
  in.weights = true;
  const reference::Outputs ref = reference::attention(in);
  run.p_error = run.o_error = 0;
  // A NaN left (the poison, never written) is an error of inf.
  const auto error = [](float got, double want) { return std::isnan(got) ? INFINITY : std::abs(double(got) - want); };
  for (std::size_t e = 0; e < p_count; ++e) run.p_error = std::max(run.p_error, error(got_p[weights_offset / 4 + e], ref.weights[e]));
  for (std::size_t e = 0; e < got_o.size(); ++e) run.o_error = std::max(run.o_error, error(got_o[e], ref.out[e]));
  return run;
}

}  // namespace

TEST_SUITE("softmax-quads") {
  TEST_CASE("the softmax by quads runs where P's rows start on 16-byte quads, the plain build elsewhere; both give the reference") {
    Context& ctx = context();
    const DeviceInfo& info = ctx.device_info();
    if (!info.timestamps) return;  // the profile names the pipelines through timestamps
    const bool quads_here = info.is_cpu() && info.shader_int64;
    struct Shape {
      int64_t seq_q, seq_k;
      uint64_t weights_offset;
      bool quads;
    };
    // 36 keys (a multiple of 4) with P at offset 0: quads; at 4 bytes (off the grid): the plain build;
    // 37 keys: the plain build whatever the offset. Causal, so each row's visible keys end mid-quad.
    for (const Shape& s : {Shape{7, 36, 0, quads_here}, Shape{7, 36, 4, false}, Shape{7, 37, 0, false}, Shape{1, 4, 0, quads_here}}) {
      const SoftmaxRun run = run_three_stage(ctx, s.seq_q, s.seq_k, s.weights_offset);
      INFO("seq_q " << s.seq_q << ", seq_k " << s.seq_k << ", weights at byte " << s.weights_offset << ": " << run.softmax_pipeline);
      CHECK(run.softmax_pipeline == (s.quads ? "attention_softmax_quads" : "attention_softmax"));
      CHECK(run.p_error < 1e-5);
      CHECK(run.o_error < 1e-4);
    }
    expect_no_validation_messages();
  }
}
