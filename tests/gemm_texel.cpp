// The CPU devices' GEMM reading A and B through uniform texel buffers (gemm_subgroup_texel): the
// buffers vkattn allocates on a CPU device carry a texel view of their whole VkBuffer, and a GEMM
// runs the build that reads by texels those of its operands (Q or the weights P; K or V) whose
// Buffers have one and start on their quad grids; an operand in a wrapped Buffer (the application's
// VkBuffer: no view) is read from its storage buffer, and one off its grid makes the whole GEMM the
// element-wise build. The builds compute the same sums in the same order, so every run must agree
// bit for bit, and each matches the fp64 reference. The conformance suites run the texel builds on
// every shape, mask and dtype of the three-stage path; this pins which build runs where.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "command_buffer.hpp"
#include "command_list.hpp"
#include "support.hpp"
#include "vkattn/dispatch_profile.hpp"
#include "vkattn/mha.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/reference.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

// Values exactly representable in f16, so that the reference sees what the device reads.
std::vector<float> random_f16_values(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(DType::f16, dist(rng));
  return v;
}

Buffer upload_f16(Context& ctx, const std::vector<float>& values, std::size_t elements) {
  std::vector<uint16_t> bits(elements, 0x7e00);  // NaN past the values
  encode(DType::f16, values.data(), bits.data(), values.size());
  Buffer b = Buffer::allocate(ctx, elements * 2);
  b.upload(bits.data(), elements * 2);
  return b;
}

struct GemmRun {
  std::string scores_pipeline, pv_pipeline;  // the GEMMs that ran: Q·Kᵀ (f16, f16 -> f32) and P·V (f32, f16 -> f16)
  std::vector<uint16_t> out;                 // O's bits
  double error = INFINITY;                   // the largest |O - reference|
};

// MQA decode in three stages, 4 query heads on one KV head, over `keys` keys of dim 64, f16: K and V
// given as `k` and `v` (their layouts' element offset `k_offset`), O poisoned first.
GemmRun run_decode(Context& ctx, Buffer& kb, Buffer& vb, int64_t keys, int64_t k_offset, const std::vector<float>& q,
                   const std::vector<float>& k, const std::vector<float>& v) {
  const TensorLayout ql = TensorLayout::bhsd(DType::f16, 1, 4, 1, 64);
  TensorLayout kl = TensorLayout::bhsd(DType::f16, 1, 1, keys, 64);
  kl.offset = k_offset;
  const TensorLayout vl = TensorLayout::bhsd(DType::f16, 1, 1, keys, 64);
  Buffer qb = upload_f16(ctx, q, q.size());
  Buffer ob = upload_f16(ctx, {}, q.size());

  AttentionArgs args;
  args.q = {&qb, ql};
  args.k = {&kb, kl};
  args.v = {&vb, vl};
  args.out = {&ob, ql};
  args.path = AttentionPath::unfused;

  GemmRun run;
  {
    DispatchProfile profile(ctx);
    attention(ctx, args);
    for (const DispatchTime& t : profile.collect()) {
      if (t.pipeline.find("_f16_f16_f32") != std::string::npos) run.scores_pipeline = t.pipeline;
      if (t.pipeline.find("_f32_f16_f16") != std::string::npos) run.pv_pipeline = t.pipeline;
    }
  }
  run.out.resize(q.size());
  ob.download(run.out.data(), run.out.size() * 2);

  reference::Inputs in;
  in.q_layout = ql, in.k_layout = TensorLayout::bhsd(DType::f16, 1, 1, keys, 64), in.v_layout = vl;
  const std::vector<float> k_rows(k.begin() + k_offset, k.begin() + k_offset + keys * 64);  // (the spans outlive no copy)
  in.q = q, in.k = k_rows, in.v = v;
  const reference::Outputs ref = reference::attention(in);
  run.error = 0;
  for (std::size_t e = 0; e < run.out.size(); ++e) {
    const float got = f16_bits_to_f32(run.out[e]);
    run.error = std::max(run.error, std::isnan(got) ? INFINITY : std::abs(double(got) - ref.out[e]));
  }
  return run;
}

}  // namespace

TEST_SUITE("gemm-texel") {
  TEST_CASE("vkattn's buffers on a CPU device carry a texel view of their whole VkBuffer; wrapped ones none") {
    Context& ctx = context();
    Buffer own = Buffer::allocate(ctx, 1000);
    Buffer wrapped = Buffer::wrap(ctx, own.handle(), 16, 512);
    CHECK((detail::texel_view_of(own) != VK_NULL_HANDLE) == ctx.device_info().is_cpu());
    CHECK(detail::texel_view_of(wrapped) == VK_NULL_HANDLE);
    // A slot of the Buffer carries the view, whatever the offset (texel offsets count from byte 0).
    CHECK(detail::slot_of(own, 40).texel == detail::texel_view_of(own));
    CHECK(detail::slot_of(own, 40).base == 40);
  }

  TEST_CASE("the GEMM reads B through the texel view where B's Buffer has one and B starts on its quad grid; the same bits as the storage build") {
    Context& ctx = context();
    const DeviceInfo& info = ctx.device_info();
    if (!info.timestamps || !device_supports(DType::f16)) return;  // the profile names the pipelines through timestamps
    const bool texel_here = detail::texel_view_of(Buffer::allocate(ctx, 16)) != VK_NULL_HANDLE;
    const bool subgroup_gemm = info.is_cpu() && info.shader_int64;  // gemm_subgroup.comp (runtime/gemm.cpp)
    for (const int64_t keys : {int64_t(40), int64_t(203)}) {  // keys % 4 == 0 or not: P·V's quads end mid-row either way
      CAPTURE(keys);
      const std::vector<float> q = random_f16_values(4 * 64, 1), k = random_f16_values(std::size_t(keys + 1) * 64, 2),
                               v = random_f16_values(std::size_t(keys) * 64, 3);
      Buffer kb = upload_f16(ctx, k, k.size()), vb = upload_f16(ctx, v, v.size());
      Buffer k_wrapped = Buffer::wrap(ctx, kb.handle(), kb.offset(), kb.size());
      Buffer v_wrapped = Buffer::wrap(ctx, vb.handle(), vb.offset(), vb.size());

      const GemmRun own = run_decode(ctx, kb, vb, keys, 0, q, k, v);
      const GemmRun wrapped = run_decode(ctx, k_wrapped, v_wrapped, keys, 0, q, k, v);
      // K one element in: the scores' B off its 8-byte quads, read element-wise; V still by texels.
      const GemmRun shifted = run_decode(ctx, kb, vb, keys, 1, q, k, v);
      INFO("own: " << own.scores_pipeline << ", " << own.pv_pipeline << "; wrapped: " << wrapped.scores_pipeline << ", "
                   << wrapped.pv_pipeline << "; K shifted: " << shifted.scores_pipeline << ", " << shifted.pv_pipeline);
      if (subgroup_gemm) {
        // Q and the weights (vkattn's scratch) have views; K and V have them in `own` only.
        const auto name = [&](const std::string& types, const char* texels) {
          return texel_here ? "gemm_subgroup_texel_" + types + " (" + texels + " by texels)" : "gemm_subgroup_" + types;
        };
        // P·V reads its A (the weights, rows of `keys`) by quads, and so by texels, only where keys % 4 == 0.
        const bool pv_a = keys % 4 == 0;
        CHECK(own.scores_pipeline == name("f16_f16_f32", "A and B"));
        CHECK(own.pv_pipeline == name("f32_f16_f16", pv_a ? "A and B" : "B"));
        CHECK(wrapped.scores_pipeline == name("f16_f16_f32", "A"));
        CHECK(wrapped.pv_pipeline == (pv_a ? name("f32_f16_f16", "A") : "gemm_subgroup_f32_f16_f16"));
        CHECK(shifted.scores_pipeline == "gemm_subgroup_f16_f16_f32");
        CHECK(shifted.pv_pipeline == name("f32_f16_f16", pv_a ? "A and B" : "B"));
      }
      CHECK(own.out == wrapped.out);
      CHECK(own.error < 2e-3);
      CHECK(wrapped.error < 2e-3);
      CHECK(shifted.error < 2e-3);
    }
    expect_no_validation_messages();
  }

  TEST_CASE("the layer's attention reads the projected heads through its workspace's texel view; from a wrapped workspace by storage, the same bits") {
    Context& ctx = context();
    const DeviceInfo& info = ctx.device_info();
    if (!info.timestamps || !device_supports(DType::f16)) return;
    const bool texel_here = detail::texel_view_of(Buffer::allocate(ctx, 16)) != VK_NULL_HANDLE;
    const bool subgroup_gemm = info.is_cpu() && info.shader_int64;
    // MQA decode on the three-stage path: 4 heads of 16 on one KV head, 203 keys. The projected Q, K
    // and V live in the pass's workspace (the Context's scratch when run, the caller's when recorded).
    const int64_t E = 64, kv_dim = 16, keys = 203;
    const auto scaled = [](std::size_t n, uint32_t seed) {  // /8 (exact): projections of 64 features stay small
      std::vector<float> v = random_f16_values(n, seed);
      for (float& x : v) x *= 0.125f;
      return v;
    };
    MhaWeights w;
    w.embed_dim = E, w.num_heads = 4, w.kv_heads = 1;
    w.q_proj_weight = scaled(E * E, 11), w.k_proj_weight = scaled(kv_dim * E, 12), w.v_proj_weight = scaled(kv_dim * E, 13);
    w.in_proj_bias = scaled(E + 2 * kv_dim, 14), w.out_proj_weight = scaled(E * E, 15), w.out_proj_bias = scaled(E, 16);
    MultiHeadAttention layer(ctx, w, DType::f16);
    MhaSpec spec;
    spec.seq_q = 1, spec.seq_k = keys, spec.path = AttentionPath::unfused;
    const PreparedMha pass = layer.prepare(spec);

    const std::vector<float> x = random_f16_values(E, 17), kx = random_f16_values(keys * E, 18), vx = random_f16_values(keys * E, 19);
    const Buffer query = upload_f16(ctx, x, x.size()), key = upload_f16(ctx, kx, kx.size()), value = upload_f16(ctx, vx, vx.size());
    Buffer workspace = Buffer::allocate(ctx, pass.workspace_bytes());
    const Buffer wrapped = Buffer::wrap(ctx, workspace.handle(), workspace.offset(), workspace.size());
    // The pass run (scratch), recorded with `ws`: the scores GEMM that ran (Q·Kᵀ, f16 -> f32) and O's bits.
    const auto pass_with = [&](const Buffer* ws) {
      Buffer out = upload_f16(ctx, {}, static_cast<std::size_t>(E));  // NaN
      MhaBuffers b;
      b.query = &query, b.key = &key, b.value = &value, b.out = &out;
      std::string scores;
      {
        DispatchProfile profile(ctx);
        if (ws) {
          TestCommandBuffer shot(ctx);
          pass.record(shot.cmd(), b, {ws, 0});
          shot.barrier();
          shot.submit_and_wait();
        } else {
          pass.run(b);
        }
        for (const DispatchTime& t : profile.collect())
          if (t.pipeline.find("_f16_f16_f32") != std::string::npos) scores = t.pipeline;
      }
      std::vector<uint16_t> bits(static_cast<std::size_t>(E));
      out.download(bits.data(), bits.size() * 2);
      return std::make_pair(scores, bits);
    };
    const auto run = pass_with(nullptr), recorded = pass_with(&workspace), from_wrapped = pass_with(&wrapped);
    INFO("run: " << run.first << "; recorded: " << recorded.first << "; wrapped workspace: " << from_wrapped.first);
    if (subgroup_gemm) {
      const std::string texels = texel_here ? "gemm_subgroup_texel_f16_f16_f32 (A and B by texels)" : "gemm_subgroup_f16_f16_f32";
      CHECK(run.first == texels);
      CHECK(recorded.first == texels);
      CHECK(from_wrapped.first == "gemm_subgroup_f16_f16_f32");
    }
    CHECK(recorded.second == run.second);
    CHECK(from_wrapped.second == run.second);
    // And what forward() gives, which the layer's conformance suite checks against the fp64 reference.
    MhaInputs in;
    in.batch = 1, in.seq_q = 1, in.seq_k = keys, in.query = x, in.key = kx, in.value = vx;
    const MhaResult want = layer.forward(in, AttentionPath::unfused);
    std::vector<float> got(static_cast<std::size_t>(E));
    decode(DType::f16, run.second.data(), got.data(), got.size());
    CHECK(got == want.out);
    expect_no_validation_messages();
  }
}
