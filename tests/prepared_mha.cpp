// The multi-head layer on device buffers: a pass prepared for one input shape gives, on the caller's
// buffers, exactly what forward() gives on host arrays — run, or recorded into the caller's command
// buffer twice in a row with one workspace — and refuses buffers that do not fit it, naming them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "command_buffer.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

std::vector<float> random(std::size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

MhaWeights random_layer(int64_t E, int64_t H, int64_t G, int64_t kdim, int64_t vdim, std::mt19937_64& rng) {
  MhaWeights w;
  w.embed_dim = E, w.num_heads = H, w.kv_heads = G, w.kdim = kdim, w.vdim = vdim;
  const int64_t kvd = G * (E / H);
  const float s = 1.0f / std::sqrt(float(E));
  w.q_proj_weight = random(std::size_t(E * E), rng, s);
  w.k_proj_weight = random(std::size_t(kvd * kdim), rng, s);
  w.v_proj_weight = random(std::size_t(kvd * vdim), rng, s);
  w.in_proj_bias = random(std::size_t(E + 2 * kvd), rng, 0.1f);
  w.out_proj_weight = random(std::size_t(E * E), rng, s);
  w.out_proj_bias = random(std::size_t(E), rng, 0.1f);
  return w;
}

Buffer upload(Context& ctx, DType dtype, const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer b = Buffer::allocate(ctx, std::max<std::size_t>(bytes.size(), 16));
  if (!bytes.empty()) b.upload(bytes.data(), bytes.size());
  return b;
}

std::vector<float> download(const Buffer& b, DType dtype, std::size_t n) {
  std::vector<std::byte> raw(n * dtype_size(dtype));
  b.download(raw.data(), raw.size());
  std::vector<float> v(n);
  decode(dtype, raw.data(), v.data(), n);
  return v;
}

}  // namespace

TEST_SUITE("prepared") {
  TEST_CASE("a layer pass on device buffers gives what forward() gives, run or recorded") {
    Context& ctx = context();
    std::mt19937_64 rng(case_seed(9300));
    struct Case {
      const char* name;
      int64_t E, H, G, kdim, vdim, B, Sq, Sk;
      bool self, weights;
      Causal causal;
      DType dtype;
    };
    for (const Case& c : {Case{"cross GQA causal, weights", 24, 4, 2, 10, 14, 2, 5, 9, false, true, Causal::bottom_right, DType::f32},
                          Case{"self, f16", 32, 4, 4, 32, 32, 1, 13, 13, true, false, Causal::none, DType::f16},
                          Case{"decode", 64, 8, 2, 64, 64, 3, 1, 700, false, false, Causal::none, DType::bf16}}) {
      const std::string name = c.name;
      CAPTURE(name);
      if (!device_supports(c.dtype)) continue;
      MultiHeadAttention layer(ctx, random_layer(c.E, c.H, c.G, c.kdim, c.vdim, rng), c.dtype);
      const std::vector<float> x = random(std::size_t(c.B * c.Sq * c.E), rng);
      const std::vector<float> kx = random(std::size_t(c.B * c.Sk * c.kdim), rng);
      const std::vector<float> vx = random(std::size_t(c.B * c.Sk * c.vdim), rng);
      // The inputs as the device holds them, so forward() (which rounds on upload) sees the same.
      const std::vector<float> q_in = download(upload(ctx, c.dtype, x), c.dtype, x.size());
      const std::vector<float> k_in = download(upload(ctx, c.dtype, kx), c.dtype, kx.size());
      const std::vector<float> v_in = download(upload(ctx, c.dtype, vx), c.dtype, vx.size());
      MhaInputs in;
      in.batch = c.B, in.seq_q = c.Sq, in.seq_k = c.Sk, in.query = q_in, in.options.causal = c.causal;
      if (!c.self) in.key = k_in, in.value = v_in;
      in.need_weights = c.weights, in.average_weights = false;
      const MhaResult want = layer.forward(in);

      MhaSpec spec;
      spec.batch = c.B, spec.seq_q = c.Sq, spec.seq_k = c.Sk, spec.self_attention = c.self, spec.options.causal = c.causal;
      spec.weights = c.weights;
      const PreparedMha pass = layer.prepare(spec);
      const Buffer query = upload(ctx, c.dtype, q_in), key = upload(ctx, c.dtype, k_in), value = upload(ctx, c.dtype, v_in);
      const uint64_t out_bytes = uint64_t(c.B * c.Sq * c.E) * dtype_size(c.dtype);
      Buffer out = Buffer::allocate(ctx, out_bytes), out2 = Buffer::allocate(ctx, out_bytes);
      std::optional<Buffer> weights, weights2;
      if (c.weights) {
        weights.emplace(Buffer::allocate(ctx, uint64_t(c.B * c.H * c.Sq * c.Sk) * 4));
        weights2.emplace(Buffer::allocate(ctx, uint64_t(c.B * c.H * c.Sq * c.Sk) * 4));
      }
      MhaBuffers b;
      b.query = &query;
      if (!c.self) b.key = &key, b.value = &value;
      b.out = &out;
      if (weights) b.weights = {&*weights, 0};

      out.fill(0xFF);
      if (weights) weights->fill(0xFF);
      pass.run(b);
      const std::vector<float> got = download(out, c.dtype, want.out.size());
      CHECK_MESSAGE(std::memcmp(got.data(), want.out.data(), got.size() * 4) == 0, "run differs from forward()");
      if (weights) {
        std::vector<float> p(want.weights.size());
        weights->download(p.data(), p.size() * 4);
        CHECK_MESSAGE(p == want.weights, "weights differ from forward()'s");
      }

      // Recorded twice into one command buffer with one workspace: the second pass (other output
      // buffers) must not disturb the first's results.
      Buffer workspace = Buffer::allocate(ctx, pass.workspace_bytes());
      out.fill(0xFF);
      out2.fill(0xFF);
      MhaBuffers b2 = b;
      b2.out = &out2;
      if (weights2) b2.weights = {&*weights2, 0};
      TestCommandBuffer shot(ctx);
      pass.record(shot.cmd(), b, {&workspace, 0});
      shot.barrier();
      pass.record(shot.cmd(), b2, {&workspace, 0});
      shot.barrier();
      shot.submit_and_wait();
      for (const Buffer* o : {&out, &out2}) {
        const std::vector<float> rec = download(*o, c.dtype, want.out.size());
        CHECK_MESSAGE(std::memcmp(rec.data(), want.out.data(), rec.size() * 4) == 0, "a recorded pass differs from forward()");
      }
    }
    expect_no_validation_messages();
  }

  TEST_CASE("a layer pass refuses buffers that do not fit it, naming them") {
    Context& ctx = context();
    std::mt19937_64 rng(case_seed(9400));
    const MultiHeadAttention layer(ctx, random_layer(16, 2, 2, 16, 16, rng), DType::f32);
    MhaSpec spec;
    spec.batch = 1, spec.seq_q = 4, spec.seq_k = 4, spec.self_attention = true;
    const PreparedMha pass = layer.prepare(spec);
    Buffer query = Buffer::allocate(ctx, 4 * 16 * 4), out = Buffer::allocate(ctx, 4 * 16 * 4);
    Buffer small = Buffer::allocate(ctx, 16);
    MhaBuffers b;
    b.query = &query, b.out = &out;
    const auto refused = [&](const MhaBuffers& bad, const std::string& expected) {
      const std::string message = error_message([&] { pass.run(bad); });
      CHECK_MESSAGE(contains(message, expected), "message: " << message << "; expected: " << expected);
    };
    MhaBuffers bad = b;
    bad.key = &query;
    refused(bad, "prepared for self-attention");
    bad = b;
    bad.out = &small;
    refused(bad, "out: needs");
    bad = b;
    bad.out = &query;
    refused(bad, "out overlaps query");
    bad = b;
    bad.weights = {&small, 0};
    refused(bad, "weights: given, but the pass was prepared without them");
    CHECK(contains(error_message([&] { (void)layer.prepare([] { MhaSpec s; s.seq_q = 3, s.seq_k = 4, s.self_attention = true; return s; }()); }),
                   "self_attention needs seq_k == seq_q"));
    TestCommandBuffer shot(ctx);
    CHECK(contains(error_message([&] { pass.record(shot.cmd(), b, {&small, 0}); }), "workspace: needs"));
    shot.end();
    expect_no_validation_messages();
  }
  TEST_CASE("the layer's options reach attention: a given scale and num_splits, checked against the reference") {
    Context& ctx = context();
    std::mt19937_64 rng(case_seed(9310));
    const MhaWeights w = random_layer(16, 2, 1, 16, 16, rng);
    MultiHeadAttention layer(ctx, w, DType::f32);
    const std::vector<float> x = random(2 * 7 * 16, rng), kv = random(2 * 40 * 16, rng);
    MhaInputs in;
    in.batch = 2, in.seq_q = 7, in.seq_k = 40, in.query = x, in.key = kv, in.value = kv;
    in.options.causal = Causal::bottom_right;
    const std::vector<float> torch_scale = layer.forward(in).out;
    in.options.scale = 0.9f;  // 2.5x torch's 1/sqrt(8): a visibly sharper softmax
    in.options.num_splits = 3;
    const std::vector<float> got = layer.forward(in).out;
    const std::vector<double> want = reference::multi_head_attention(w, in).out;
    REQUIRE(got.size() == want.size());
    double worst = 0.0, moved = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(double(got[i]) - want[i]));
      moved = std::max(moved, std::abs(double(got[i]) - double(torch_scale[i])));
    }
    CHECK(worst < 1e-4);
    CHECK(moved > 1e-2);  // the scale was not ignored
    in.options.scale = std::numeric_limits<float>::infinity();
    CHECK(error_message([&] { layer.forward(in); }) == "scale: must be finite, got inf");
  }
}
