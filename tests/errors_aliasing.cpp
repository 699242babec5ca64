// Outputs that share memory with another argument, and Buffers of another Context: refused on every
// path (fused, unfused, plan_attention, record_attention) with an Error naming both arguments, before
// anything is dispatched.
#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

constexpr int64_t B = 1, H = 2, S = 8, D = 16;
constexpr int64_t kTensor = B * H * S * D;  // elements of q, k, v and out
constexpr uint64_t kPoolFloats = 4096;

// One VkBuffer holding every argument: q, k, v at elements 0, 256, 512; out at 1024; lse at 1536;
// weights at 2048; the rest spare. Views (Buffer::wrap) of the same VkBuffer count as the same memory.
struct Pool {
  Context& ctx = context();
  Buffer pool = Buffer::allocate(ctx, kPoolFloats * 4);
  std::vector<float> initial = std::vector<float>(kPoolFloats);
  AttentionArgs args;

  Pool() {
    std::mt19937_64 rng(case_seed(8500));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : initial) x = dist(rng);
    args.q = {&pool, TensorLayout::bhsd(DType::f32, B, H, S, D)};
    args.k = {&pool, TensorLayout::bhsd(DType::f32, B, H, S, D)};
    args.v = {&pool, TensorLayout::bhsd(DType::f32, B, H, S, D)};
    args.out = {&pool, TensorLayout::bhsd(DType::f32, B, H, S, D)};
    args.k.layout.offset = kTensor;
    args.v.layout.offset = 2 * kTensor;
    args.out.layout.offset = 4 * kTensor;
    args.lse = {&pool, 4 * 6 * kTensor};
  }

  std::vector<float> contents() const {
    std::vector<float> x(kPoolFloats);
    pool.download(x.data(), x.size() * 4);
    return x;
  }

  // `call` on the broken arguments must throw an Error containing each of `expected`, and leave the
  // whole pool as it was.
  void expect_refused(const std::function<void(const AttentionArgs&)>& call,
                      const std::function<void(AttentionArgs&)>& breaks, const std::vector<std::string>& expected) {
    pool.upload(initial.data(), initial.size() * 4);
    AttentionArgs bad = args;
    breaks(bad);
    const std::string message = error_message([&] { call(bad); });
    INFO("message: " << message);
    for (const std::string& part : expected) CHECK_MESSAGE(contains(message, part), "expected '" << part << "'");
    CHECK_MESSAGE(contents() == initial, "a refused call changed the caller's buffer");
    expect_no_validation_messages();
  }
};

}  // namespace

TEST_SUITE("errors") {
  TEST_CASE("an output overlapping another argument, on every path") {
    Pool p;
    Context& ctx = p.ctx;
    const Buffer view = Buffer::wrap(ctx, p.pool.handle(), 4 * 2 * kTensor + 64, 4 * kTensor);  // inside v
    Buffer weights = Buffer::allocate(ctx, 4 * B * H * S * S);
    for (const AttentionPath path : {AttentionPath::fused, AttentionPath::unfused}) {
      const std::string path_name = to_string(path);
      CAPTURE(path_name);
      const auto run = [&](const AttentionArgs& a) {
        AttentionArgs with_path = a;
        with_path.path = a.weights.buffer ? AttentionPath::automatic : path;
        attention(ctx, with_path);
      };
      // The two reports: out on k (wrong results), lse inside out.
      p.expect_refused(run, [](AttentionArgs& a) { a.out.layout.offset = kTensor; },
                       {"out overlaps k: bytes [1024, 2048) and [1024, 2048) of the same VkBuffer"});
      p.expect_refused(run, [](AttentionArgs& a) { a.lse.offset = 4 * 4 * kTensor + 100 * 4; },
                       {"out overlaps lse: bytes [4096, 5120) and [4496, 4560)"});
      // A partial overlap through another Buffer viewing the same VkBuffer.
      p.expect_refused(run,
                       [&](AttentionArgs& a) {
                         a.out.buffer = &view;
                         a.out.layout.offset = 0;
                       },
                       {"out overlaps v: bytes [2112, 3136) and [2048, 3072)"});
      // Strided: out interleaved with k (the extents cover first to last element).
      p.expect_refused(run,
                       [](AttentionArgs& a) {
                         a.out.layout.stride_seq = 2 * D;
                         a.out.layout.stride_head = 2 * S * D;
                         a.out.layout.stride_batch = 2 * H * S * D;
                         a.out.layout.offset = kTensor + 3 * D;
                       },
                       {"out overlaps k"});
      p.expect_refused(run,
                       [&](AttentionArgs& a) {
                         a.mask = {&p.pool, MaskLayout::dense(MaskType::f32, 1, 1, S, S)};
                         a.mask.layout.offset = 4 * kTensor + 32;
                       },
                       {"out overlaps mask"});
      p.expect_refused(run, [&](AttentionArgs& a) { a.kv_lengths = {&p.pool, 4 * 6 * kTensor + 8}; },
                       {"lse overlaps kv_lengths"});
    }
    // The weights P (unfused) over q.
    p.expect_refused([&](const AttentionArgs& a) { attention(ctx, a); }, [&](AttentionArgs& a) { a.weights = {&p.pool, 0}; },
                     {"weights overlaps q: bytes [0, 512) and [0, 1024)"});
    // plan_attention refuses the same.
    p.expect_refused([&](const AttentionArgs& a) { plan_attention(ctx, a); },
                     [](AttentionArgs& a) { a.out.layout.offset = kTensor; }, {"out overlaps k"});
    // record_attention's workspace (the unfused path's scores) over out, before anything is recorded.
    AttentionArgs unfused = p.args;
    unfused.path = AttentionPath::unfused;
    const uint64_t need = plan_attention(ctx, unfused).workspace_bytes;
    REQUIRE(need > 0);
    REQUIRE(need <= 4 * 4 * kTensor);
    p.expect_refused(
        [&](const AttentionArgs& a) {
          record_attention(ctx, reinterpret_cast<VkCommandBuffer>(1), a, {&p.pool, 4 * 4 * kTensor - 16});
        },
        [](AttentionArgs& a) { a.path = AttentionPath::unfused; }, {"out overlaps workspace"});
  }

  TEST_CASE("inputs may share memory; outputs next to them are fine") {
    Pool p;
    AttentionArgs self = p.args;
    self.k.layout.offset = 0;  // q, k and v the same elements
    self.v.layout.offset = 0;
    self.out.layout.offset = kTensor;  // right after them
    self.lse.offset = 4 * 2 * kTensor;  // right after out
    for (const AttentionPath path : {AttentionPath::fused, AttentionPath::unfused}) {
      self.path = path;
      CHECK_NOTHROW(attention(p.ctx, self));
    }
    expect_no_validation_messages();
  }

  TEST_CASE("a Buffer of another Context") {
    Pool p;
    ContextOptions options;
    options.validation = validation_enabled();
    options.kernel = kernel_variant();
    Context other(options);
    Buffer foreign = Buffer::allocate(other, 4 * kTensor);
    // No dispatch is tried before the first check passes: a foreign VkBuffer in a dispatch is undefined.
    AttentionArgs bad = p.args;
    bad.k.buffer = &foreign;
    bad.k.layout.offset = 0;
    REQUIRE(contains(error_message([&] { plan_attention(p.ctx, bad); }),
                     "k: the Buffer belongs to another Context than the one the call is made with"));
    const auto run = [&](const AttentionArgs& a) { attention(p.ctx, a); };
    p.expect_refused(run,
                     [&](AttentionArgs& a) {
                       a.out.buffer = &foreign;
                       a.out.layout.offset = 0;
                     },
                     {"out: the Buffer belongs to another Context"});
    p.expect_refused(run, [&](AttentionArgs& a) { a.lse = {&foreign, 0}; }, {"lse: the Buffer belongs to another Context"});
    p.expect_refused(
        [&](const AttentionArgs& a) { record_attention(p.ctx, reinterpret_cast<VkCommandBuffer>(1), a, {&foreign, 0}); },
        [](AttentionArgs& a) { a.path = AttentionPath::unfused; }, {"workspace: the Buffer belongs to another Context"});
  }
}
