// Enum arguments outside their range (any int can be static_cast to one) and the multi-head layer's
// extents past int64, at the GPU entry points: an Error naming the argument and the value, before
// anything is dispatched.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

TEST_SUITE("errors") {
  TEST_CASE("enum values out of range: path, causal, dtype, mask type, kernel variant") {
    Context& ctx = context();
    Buffer in = Buffer::allocate(ctx, 1024), out = Buffer::allocate(ctx, 1024);
    out.fill(0x5A);
    AttentionArgs args;
    args.q = args.k = args.v = {&in, TensorLayout::bhsd(DType::f32, 1, 2, 4, 8)};
    args.out = {&out, TensorLayout::bhsd(DType::f32, 1, 2, 4, 8)};
    const auto refused = [&](const AttentionArgs& bad, const std::string& expected) {
      CHECK_MESSAGE(contains(error_message([&] { plan_attention(ctx, bad); }), expected), expected);
      CHECK_MESSAGE(contains(error_message([&] { attention(ctx, bad); }), expected), expected);
    };
    AttentionArgs bad = args;
    bad.path = static_cast<AttentionPath>(9);
    refused(bad, "path: invalid value 9");
    bad = args;
    bad.options.causal = static_cast<Causal>(3);
    refused(bad, "causal: invalid value 3");
    bad = args;
    bad.q.layout.dtype = bad.k.layout.dtype = bad.v.layout.dtype = bad.out.layout.dtype = static_cast<DType>(5);
    refused(bad, "q.dtype: invalid value 5");
    bad = args;
    bad.mask = {&in, MaskLayout::dense(static_cast<MaskType>(4), 1, 1, 4, 4)};
    refused(bad, "mask: invalid type 4");
    std::vector<uint8_t> bytes(1024);
    out.download(bytes.data(), bytes.size());
    CHECK(bytes == std::vector<uint8_t>(1024, 0x5A));

    ContextOptions options;
    options.kernel = static_cast<KernelVariant>(4);
    CHECK(contains(error_message([&] { Context c(options); }), "kernel: invalid value 4"));
    CHECK(std::string(to_string(static_cast<KernelVariant>(4))) == "invalid");

    CHECK(contains(error_message([&] { MultiHeadAttention l(ctx, constant_mha_weights(), static_cast<DType>(7)); }),
                   "dtype: invalid value 7"));
    MultiHeadAttention layer(ctx, constant_mha_weights());
    const std::vector<float> x(3 * 8, 0.5f);
    MhaInputs mi;
    mi.batch = 1, mi.seq_q = 3, mi.seq_k = 3;
    mi.query = x;
    CHECK(contains(error_message([&] { layer.forward(mi, static_cast<AttentionPath>(9)); }), "path: invalid value 9"));
    mi.options.causal = static_cast<Causal>(5);
    CHECK(contains(error_message([&] { layer.forward(mi); }), "causal: invalid value 5"));
    expect_no_validation_messages();
  }

  TEST_CASE("the multi-head layer: batch x seq_q past int64 is an Error, not an empty output") {
    MultiHeadAttention layer(context(), constant_mha_weights());
    MhaInputs in;
    in.batch = in.seq_q = in.seq_k = int64_t{1} << 32;
    CHECK(contains(error_message([&] { layer.forward(in); }), "query: 4294967296 x 4294967296 x 8 exceeds 2^60 values"));
    expect_no_validation_messages();
  }
}
