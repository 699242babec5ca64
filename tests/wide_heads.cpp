// Head dims past the fused kernels' 256 (up to 576 / 512): the plan takes the three-stage path when
// the path is left to it, and the backward follows; a call that asks for the fused path, and a paged
// call (which runs on the fused kernels), is refused naming the limit. The answers themselves are the
// catalog's "wide" and "wide-backward" sections (conform/catalog_wide.cpp).
#include <doctest/doctest.h>

#include <string>

#include "support.hpp"
#include "vkattn/vkattn.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

AttentionSpec wide_spec(int64_t dim_qk, int64_t dim_v, AttentionPath path) {
  AttentionSpec spec;
  spec.q = TensorLayout::bhsd(DType::f32, 1, 4, 3, dim_qk);
  spec.kv = DenseKv{TensorLayout::bhsd(DType::f32, 1, 1, 70, dim_qk), TensorLayout::bhsd(DType::f32, 1, 1, 70, dim_v)};
  spec.out = TensorLayout::bhsd(DType::f32, 1, 4, 3, dim_v);
  spec.lse = true;
  spec.path = path;
  return spec;
}

}  // namespace

TEST_SUITE("prepared") {
  TEST_CASE("head dims past 256: the three-stage path, forward and backward; the fused kernels refuse them") {
    Context& ctx = context();
    const PreparedAttention wide(ctx, wide_spec(576, 512, AttentionPath::automatic));
    CHECK(wide.plan().path == std::string("unfused"));
    CHECK(PreparedAttentionBackward(ctx, wide_spec(576, 512, AttentionPath::automatic)).plan().kernel == std::string("three-stage"));
    CHECK(PreparedAttention(ctx, wide_spec(256, 256, AttentionPath::automatic)).plan().path == std::string("fused"));
    CHECK(PreparedAttention(ctx, wide_spec(192, 320, AttentionPath::automatic)).plan().path == std::string("unfused"));
    const std::string fused = error_message([&] { (void)PreparedAttention(ctx, wide_spec(512, 512, AttentionPath::fused)); });
    CHECK(contains(fused, "dim: head dim 512; the fused kernels take head dims up to 256; the three-stage path"));
    CHECK(contains(error_message([&] { (void)PreparedAttentionBackward(ctx, wide_spec(320, 288, AttentionPath::fused)); }),
                   "the fused kernels take head dims up to 256"));

    PagedAttentionLayouts paged;
    paged.q = TensorLayout::bhsd(DType::f32, 1, 4, 1, 576);
    paged.k_cache = PagedKvLayout::dense(DType::f32, 8, 16, 1, 576);
    paged.v_cache = PagedKvLayout::dense(DType::f32, 8, 16, 1, 512);
    paged.max_pages = 4;
    paged.out = TensorLayout::bhsd(DType::f32, 1, 4, 1, 512);
    CHECK(contains(error_message([&] { (void)PreparedAttention(ctx, AttentionSpec::paged(paged)); }),
                   "the fused kernels take head dims up to 256, and a paged call runs on them"));
  }
}
