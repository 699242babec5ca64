// Bad arguments at the GPU entry points: each throws vkattn::Error whose message names the argument,
// nothing the caller owns changes, and the Context keeps working for the next valid call.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "compare.hpp"
#include "guarded_buffer.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

constexpr int64_t B = 2, H = 4, KV = 2, SQ = 10, SK = 12, D = 32;
constexpr uint8_t kPattern = 0x5A;  // what out and lse hold before every call

// One valid f32 problem with its buffers; each error case breaks a copy of `args`.
struct Fixture {
  Context& ctx = context();
  std::vector<float> q = random(B * H * SQ * D, 1), k = random(B * KV * SK * D, 2), v = random(B * KV * SK * D, 3);
  Buffer q_buf = upload(ctx, q), k_buf = upload(ctx, k), v_buf = upload(ctx, v);
  Buffer small_buf = Buffer::allocate(ctx, 64);
  Buffer mask_buf = Buffer::allocate(ctx, B * H * SQ * SK);
  Buffer kv_buf = Buffer::allocate(ctx, 4);  // room for 1 of the B = 2 lengths
  GuardedBuffer out_buf{ctx, B * H * SQ * D * 4, kPattern};
  GuardedBuffer lse_buf{ctx, B * H * SQ * 4, kPattern};
  AttentionArgs args;
  reference::Outputs ref;

  static std::vector<float> random(int64_t n, uint64_t stream) {
    std::mt19937_64 rng(case_seed(8000 + stream));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& e : x) e = dist(rng);
    return x;
  }
  static Buffer upload(Context& ctx, const std::vector<float>& x) {
    Buffer b = Buffer::allocate(ctx, x.size() * 4);
    b.upload(x.data(), x.size() * 4);
    return b;
  }

  Fixture() {
    mask_buf.fill(1);
    args.q = {&q_buf, TensorLayout::bhsd(DType::f32, B, H, SQ, D)};
    args.k = {&k_buf, TensorLayout::bhsd(DType::f32, B, KV, SK, D)};
    args.v = {&v_buf, TensorLayout::bhsd(DType::f32, B, KV, SK, D)};
    args.out = {&out_buf.buffer(), TensorLayout::bhsd(DType::f32, B, H, SQ, D)};
    args.lse = {&lse_buf.buffer(), 0};

    reference::Inputs in;
    in.q_layout = args.q.layout;
    in.k_layout = args.k.layout;
    in.v_layout = args.v.layout;
    in.q = q;
    in.k = k;
    in.v = v;
    ref = reference::attention(in);
  }

  // The broken call must throw an Error naming `expected`, leave out and lse as they were, and the
  // next valid call must still give the right answer.
  void expect_error(const std::function<void(AttentionArgs&)>& breaks, const std::vector<std::string>& expected) {
    out_buf.reset();
    lse_buf.reset();
    AttentionArgs bad = args;
    breaks(bad);
    std::string message;
    try {
      attention(ctx, bad);
      message = "<no error>";
    } catch (const Error& e) {
      message = e.what();
      CHECK_MESSAGE(e.vk_result().empty(), "an argument error carries no VkResult, got " << e.vk_result());
    }
    INFO("message: " << message);
    for (const std::string& part : expected) CHECK_MESSAGE(contains(message, part), "expected '" << part << "'");
    expect_untouched(out_buf, "out");
    expect_untouched(lse_buf, "lse");
    expect_no_validation_messages();

    attention(ctx, args);
    std::vector<float> out(static_cast<std::size_t>(B * H * SQ * D)), lse(static_cast<std::size_t>(B * H * SQ));
    out_buf.buffer().download(out.data(), out.size() * 4);
    lse_buf.buffer().download(lse.data(), lse.size() * 4);
    compare_with_reference(ref, out, lse, 1.0, DType::f32);
    expect_no_validation_messages();
  }

  static void expect_untouched(const GuardedBuffer& buffer, const char* what) {
    const std::vector<uint8_t> bytes = buffer.download_checked(what);
    std::size_t changed = 0;
    for (const uint8_t b : bytes) changed += b != kPattern;
    CHECK_MESSAGE(changed == 0, what << ": " << changed << " bytes changed by a call that threw");
  }
};

}  // namespace

TEST_SUITE("errors") {
  TEST_CASE("shapes that do not agree") {
    Fixture f;
    f.expect_error([](AttentionArgs& a) { a.k.layout.dim = 16; }, {"k.dim (16)", "q.dim (32)"});
    f.expect_error([](AttentionArgs& a) { a.v.layout.seq = 11; }, {"v.seq (11)", "k.seq (12)"});
    f.expect_error([](AttentionArgs& a) { a.out.layout.heads = 2; }, {"out.heads (2)"});
    f.expect_error([](AttentionArgs& a) { a.k.layout.batch = 1; }, {"k.batch (1)"});
    f.expect_error([](AttentionArgs& a) { a.out.layout.dtype = DType::f16; }, {"out.dtype (f16)"});
  }

  TEST_CASE("head dim above 256, GQA not divisible") {
    Fixture f;
    f.expect_error(
        [](AttentionArgs& a) {
          a.q.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 300);
          a.k.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 300);
          a.v.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 32);
          a.out.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 32);
          a.lse.buffer = nullptr;
        },
        {"q.dim (300)", "256"});
    f.expect_error(
        [](AttentionArgs& a) {
          a.k.layout = TensorLayout::bhsd(DType::f32, B, 3, 4, D);
          a.v.layout = TensorLayout::bhsd(DType::f32, B, 3, 4, D);
        },
        {"k.heads (3)", "q.heads (4)"});
  }

  TEST_CASE("a mask that does not broadcast or does not fit") {
    Fixture f;
    f.expect_error(
        [&](AttentionArgs& a) { a.mask = {&f.mask_buf, MaskLayout::dense(MaskType::boolean, 3, 1, SQ, SK)}; },
        {"mask", "batch 3"});
    f.expect_error(
        [&](AttentionArgs& a) { a.mask = {&f.mask_buf, MaskLayout::dense(MaskType::boolean, 1, KV, SQ, SK)}; },
        {"mask", "heads 2"});
    f.expect_error(
        [&](AttentionArgs& a) { a.mask = {&f.mask_buf, MaskLayout::dense(MaskType::boolean, 1, 1, SQ, SK + 1)}; },
        {"mask", "seq_k (13)"});
    // The buffer holds B*H*SQ*SK bytes: an f32 mask of that shape needs four times as much.
    f.expect_error(
        [&](AttentionArgs& a) { a.mask = {&f.mask_buf, MaskLayout::dense(MaskType::f32, B, H, SQ, SK)}; },
        {"mask"});
  }

  TEST_CASE("a scale that is not finite") {
    Fixture f;
    f.expect_error([](AttentionArgs& a) { a.options.scale = std::numeric_limits<float>::infinity(); },
                   {"scale", "inf"});
    f.expect_error([](AttentionArgs& a) { a.options.scale = std::numeric_limits<float>::quiet_NaN(); },
                   {"scale", "nan"});
  }

  TEST_CASE("buffers too small for their layouts") {
    Fixture f;
    f.expect_error([&](AttentionArgs& a) { a.q.buffer = &f.small_buf; }, {"q:", "bytes"});
    f.expect_error([&](AttentionArgs& a) { a.v.buffer = &f.small_buf; }, {"v:", "bytes"});
    // Past the end of the payload and its guard bytes.
    f.expect_error([&](AttentionArgs& a) { a.out.layout.offset = 100; }, {"out:", "bytes"});
    f.expect_error([&](AttentionArgs& a) { a.k.layout.stride_batch += 1; }, {"k:"});
    f.expect_error([&](AttentionArgs& a) { a.lse.offset = 512; }, {"lse:"});
    f.expect_error([&](AttentionArgs& a) { a.kv_lengths = {&f.kv_buf, 0}; }, {"kv_lengths:"});  // 1 of 2
  }

  TEST_CASE("null buffers") {
    Fixture f;
    f.expect_error([](AttentionArgs& a) { a.q.buffer = nullptr; }, {"q:", "null"});
    f.expect_error([](AttentionArgs& a) { a.k.buffer = nullptr; }, {"k:", "null"});
    f.expect_error([](AttentionArgs& a) { a.v.buffer = nullptr; }, {"v:", "null"});
    f.expect_error([](AttentionArgs& a) { a.out.buffer = nullptr; }, {"out:", "null"});
    // A moved-from Buffer holds no VkBuffer.
    Buffer moved_from = Buffer::allocate(f.ctx, 64);
    const Buffer taken = std::move(moved_from);
    f.expect_error([&](AttentionArgs& a) { a.k.buffer = &moved_from; }, {"k:", "null"});
  }

  TEST_CASE("negative strides and an output that overlaps itself") {
    Fixture f;
    f.expect_error([](AttentionArgs& a) { a.q.layout.stride_seq = -D; }, {"q.stride_seq (-32)"});
    f.expect_error([](AttentionArgs& a) { a.out.layout.stride_head = 0; }, {"out", "overlap"});
  }

  TEST_CASE("plan_attention and record_attention check the same") {
    Fixture f;
    AttentionArgs bad = f.args;
    bad.v.layout.seq = 11;
    CHECK(contains(error_message([&] { plan_attention(f.ctx, bad); }), "v.seq (11)"));
    CHECK(contains(error_message([&] { record_attention(f.ctx, VK_NULL_HANDLE, f.args); }), "command_buffer"));
    CHECK_NOTHROW(plan_attention(f.ctx, f.args));
    expect_no_validation_messages();
  }
}

TEST_SUITE("errors") {
  TEST_CASE("out of memory is an Error with the VkResult, and the context stays usable") {
    Fixture f;
    std::string message, result;
    try {
      Buffer huge = Buffer::allocate(f.ctx, uint64_t{1} << 50);  // a petabyte
      message = "<no error>";
    } catch (const Error& e) {
      message = e.what();
      result = e.vk_result();
    }
    INFO("message: " << message);
    CHECK(contains(result, "VK_ERROR_OUT_OF"));
    expect_no_validation_messages();
    f.expect_error([](AttentionArgs& a) { a.v.layout.seq = 11; }, {"v.seq (11)"});  // then a valid call
  }
}
