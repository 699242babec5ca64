// Bad arguments at the GPU entry points: each throws vkattn::Error whose message names the argument,
// nothing the caller owns changes, and the Context keeps working for the next valid call.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "compare.hpp"
#include "guarded_buffer.hpp"
#include "instance.hpp"
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
      CHECK_MESSAGE(e.code() == ErrorCode::invalid_argument, "an argument error, got code " << to_string(e.code()));
      CHECK_MESSAGE(e.vk_result().empty(), "an argument error carries no VkResult, got " << e.vk_result());
      CHECK(e.vk_result_code() == 0);
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

  TEST_CASE("head dim above 576, GQA not divisible") {
    Fixture f;
    f.expect_error(
        [](AttentionArgs& a) {
          a.q.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 600);
          a.k.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 600);
          a.v.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 32);
          a.out.layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 32);
          a.lse.buffer = nullptr;
        },
        {"q.dim (600)", "576"});
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
  TEST_CASE("the weights P: a path that cannot give them, a buffer too small or misaligned") {
    Fixture f;
    Buffer weights = Buffer::allocate(f.ctx, B * H * SQ * SK * 4 + 16);
    f.expect_error(
        [&](AttentionArgs& a) {
          a.weights = {&weights, 0};
          a.path = AttentionPath::fused;
        },
        {"path", "fused", "weights"});
    f.expect_error([&](AttentionArgs& a) { a.weights = {&f.small_buf, 0}; }, {"weights:", "bytes", "(2, 4, 10, 12)"});
    f.expect_error([&](AttentionArgs& a) { a.weights = {&weights, 2}; }, {"weights:", "multiple of 4"});
    f.expect_error([&](AttentionArgs& a) { a.weights = {&weights, 32}; }, {"weights:", "bytes"});

    // The plan says which path runs and what the scores cost.
    AttentionArgs with_weights = f.args;
    with_weights.weights = {&weights, 0};
    const AttentionPlan plan = plan_attention(f.ctx, with_weights);
    CHECK(std::string(plan.path) == "unfused");
    CHECK(plan.scores_bytes == uint64_t(B * H * SQ * SK * 4));
    CHECK(plan.workspace_bytes == 0);  // the scores live in the weights buffer
    AttentionArgs unfused = f.args;
    unfused.path = AttentionPath::unfused;
    CHECK(plan_attention(f.ctx, unfused).workspace_bytes >= uint64_t(B * H * SQ * SK * 4));
    CHECK(std::string(plan_attention(f.ctx, f.args).path) == "fused");
    // Recording the unfused path without the workspace it needs is refused before anything is recorded.
    CHECK(contains(error_message([&] { record_attention(f.ctx, reinterpret_cast<VkCommandBuffer>(1), unfused); }),
                   "workspace"));
    expect_no_validation_messages();
  }

  TEST_CASE("the multi-head layer: bad weights and bad inputs are refused before any dispatch") {
    Context& ctx = context();
    MhaWeights w = constant_mha_weights(8, 3);  // 8 % 3 != 0
    CHECK(contains(error_message([&] { MultiHeadAttention layer(ctx, w); }), "embed_dim (8)"));
    w.num_heads = 2;
    w.k_proj_weight.resize(60);
    CHECK(contains(error_message([&] { MultiHeadAttention layer(ctx, w); }), "k_proj_weight: expected 64 values (8, 8)"));
    w.k_proj_weight.resize(64);
    MultiHeadAttention layer(ctx, w);
    const std::vector<float> x(3 * 8, 0.5f), short_key(2 * 8, 0.5f);
    MhaInputs in;
    in.batch = 1, in.seq_q = 3, in.seq_k = 3;
    in.query = x;
    in.key = short_key;
    in.value = x;
    CHECK(contains(error_message([&] { layer.forward(in); }), "key: expected 24 values (1, 3, 8)"));
    in.key = x;
    in.key_padding_mask = {0, 1};
    CHECK(contains(error_message([&] { layer.forward(in); }), "key_padding_mask"));
    in.key_padding_mask.clear();
    in.need_weights = true;
    CHECK(contains(error_message([&] { layer.forward(in, AttentionPath::fused); }), "fused"));
    CHECK(layer.forward(in).out.size() == 24);  // and the layer still works
    expect_no_validation_messages();
  }

  TEST_CASE("a buffer beyond the device's limits is refused as unsupported, naming the size and the limit") {
    Fixture f;
    const ThrownError e = thrown_error([&] { Buffer huge = Buffer::allocate(f.ctx, uint64_t{1} << 50); });
    const std::string& message = e.message;
    INFO("message: " << message);
    CHECK(e.code == code_name(ErrorCode::unsupported));
    CHECK(e.vk_result.empty());
    CHECK(e.vk_result_code == 0);
    CHECK(contains(message, "1125899906842624 bytes exceed"));
    CHECK((contains(message, "maxBufferSize") || contains(message, "maxMemoryAllocationSize") ||
           contains(message, "heap")));
    expect_no_validation_messages();
    f.expect_error([](AttentionArgs& a) { a.v.layout.seq = 11; }, {"v.seq (11)"});  // then a valid call
  }

  TEST_CASE("device selection: no usable device is unsupported, a selector that matches none is an argument error") {
    // As enumerated: DeviceInfo::index is the position in the list.
    const auto device = [](std::string name, DeviceType type, bool usable) {
      DeviceInfo d;
      d.name = std::move(name);
      d.type = type;
      d.push_descriptor = usable;
      d.api_version = usable ? VK_API_VERSION_1_3 : VK_API_VERSION_1_1;
      return d;
    };
    const auto listed = [](std::vector<DeviceInfo> devices) {
      for (uint32_t i = 0; i < devices.size(); ++i) devices[i].index = i;
      return devices;
    };
    const DeviceInfo old = device("Old GPU", DeviceType::discrete, false), other = device("Other", DeviceType::other, true),
                     cpu = device("CPU", DeviceType::cpu, true), gpu = device("GPU", DeviceType::integrated, true);
    for (const auto& [devices, selector, code, part] :
         std::vector<std::tuple<std::vector<DeviceInfo>, std::string, ErrorCode, std::string>>{
             {{}, "", ErrorCode::unsupported, "no Vulkan device found"},
             {{old}, "", ErrorCode::unsupported, "no Vulkan device has Vulkan 1.2"},
             {{gpu, old}, "old", ErrorCode::unsupported, "'Old GPU' lacks Vulkan 1.2"},
             {{gpu, old}, "1", ErrorCode::unsupported, "'Old GPU' lacks Vulkan 1.2"},
             {{gpu, old}, "7", ErrorCode::invalid_argument, "no Vulkan device matches '7'"}}) {
      const ThrownError e = thrown_error([&] { detail::select_device(listed(devices), selector); });
      INFO("selector '" << selector << "': " << e.message);
      CHECK(contains(e.message, part));
      CHECK(e.code == code_name(code));
    }
    // Without a selector the best usable type wins: discrete, integrated, virtual, CPU, then any other.
    CHECK(detail::select_device(listed({old, other, cpu, gpu}), "") == 3);
    CHECK(detail::select_device(listed({old, other, cpu}), "") == 2);
    CHECK(detail::select_device(listed({old, other}), "") == 1);
    CHECK(detail::select_device(listed({gpu, cpu}), "cpu") == 1);
    CHECK(cpu.is_cpu());
    CHECK_FALSE(gpu.is_cpu());
  }
}
