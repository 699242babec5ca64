// Head dims past 256 (up to 576 / 512): which path and kernel the plan picks, and that a paged call
// takes them. On CPU devices prefill runs on the three-stage path when the path is left to the plan
// (its GEMMs are faster there), decode on the fused kernels' decode form; a call asking for the fused
// path gets it; the backward runs in three stages whatever the forward's path. The answers themselves
// are the catalog's "wide" and "wide-backward" sections and the serving sections' wide cases.
#include <doctest/doctest.h>

#include <string>

#include "support.hpp"
#include "vkattn/vkattn.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

AttentionSpec wide_spec(int64_t dim_qk, int64_t dim_v, AttentionPath path, int64_t seq_q = 3, int64_t heads = 4,
                        int64_t kv_heads = 1, int64_t seq_k = 70) {
  AttentionSpec spec;
  spec.q = TensorLayout::bhsd(DType::f32, 1, heads, seq_q, dim_qk);
  spec.kv = DenseKv{TensorLayout::bhsd(DType::f32, 1, kv_heads, seq_k, dim_qk),
                    TensorLayout::bhsd(DType::f32, 1, kv_heads, seq_k, dim_v)};
  spec.out = TensorLayout::bhsd(DType::f32, 1, heads, seq_q, dim_v);
  spec.lse = true;
  spec.path = path;
  return spec;
}

}  // namespace

TEST_SUITE("prepared") {
  TEST_CASE("head dims past 256: the path and kernel the plan picks, forward and backward") {
    Context& ctx = context();
    const bool cpu = ctx.device_info().is_cpu();
    // Decode of a GQA/MQA group: on a CPU device three stages where the group's packed rows are 4 or
    // more (4 query heads x 3 rows, or MLA's 16 heads x 1 row, against one KV head), fused below
    // that (one row a head, or 2 heads x 1 row a group); fused on a GPU.
    const PreparedAttention decode(ctx, wide_spec(576, 512, AttentionPath::automatic));
    CHECK(decode.plan().path == std::string(cpu ? "unfused" : "fused"));
    CHECK(PreparedAttention(ctx, wide_spec(576, 512, AttentionPath::automatic, 1, 16)).plan().path ==
          std::string(cpu ? "unfused" : "fused"));
    CHECK(PreparedAttention(ctx, wide_spec(512, 512, AttentionPath::automatic, 1, 4, 4)).plan().path == std::string("fused"));
    CHECK(PreparedAttention(ctx, wide_spec(320, 288, AttentionPath::automatic, 1, 4, 2)).plan().path == std::string("fused"));
    CHECK(PreparedAttention(ctx, wide_spec(576, 512, AttentionPath::fused)).plan().path == std::string("fused"));
    // Past what the three-stage path can take on lavapipe (4M keys: one row's K spans more than a
    // binding), the decode stays fused: the decode form's splits cover it (a forced rowwise kernel's
    // partials would not fit a binding, so only the plan's own kernel is asked).
    if (cpu && kernel_variant() == KernelVariant::automatic) {
      AttentionSpec long_decode = wide_spec(576, 512, AttentionPath::automatic, 1, 16, 1, 4'000'000);
      long_decode.q.dtype = long_decode.out.dtype = DType::f16;
      std::get<DenseKv>(long_decode.kv).k.dtype = std::get<DenseKv>(long_decode.kv).v.dtype = DType::f16;
      CHECK(PreparedAttention(ctx, long_decode).plan().path == std::string("fused"));
    }
    // Prefill: three stages on a CPU device when the plan chooses, fused when asked.
    const PreparedAttention prefill(ctx, wide_spec(512, 512, AttentionPath::automatic, 40));
    CHECK(prefill.plan().path == std::string(cpu ? "unfused" : "fused"));
    CHECK(PreparedAttention(ctx, wide_spec(256, 256, AttentionPath::automatic, 40)).plan().path == std::string("fused"));
    CHECK(PreparedAttention(ctx, wide_spec(512, 512, AttentionPath::fused, 40)).plan().path == std::string("fused"));
    CHECK(PreparedAttention(ctx, wide_spec(320, 192, AttentionPath::unfused, 40)).plan().path == std::string("unfused"));
    // The backward: three stages past 256 on every path; fused at 256.
    for (AttentionPath path : {AttentionPath::automatic, AttentionPath::fused})
      CHECK(PreparedAttentionBackward(ctx, wide_spec(576, 512, path)).plan().kernel == std::string("three-stage"));
    CHECK(PreparedAttentionBackward(ctx, wide_spec(256, 256, AttentionPath::automatic)).plan().kernel != std::string("three-stage"));
    // Past 576 / 512 nothing takes it.
    CHECK(contains(error_message([&] { (void)PreparedAttention(ctx, wide_spec(577, 512, AttentionPath::automatic)); }),
                   "577"));
  }

  TEST_CASE("a paged cache of 576-wide keys and 512-wide values: the path the plan chooses, or the one asked for") {
    Context& ctx = context();
    const bool cpu = ctx.device_info().is_cpu();
    PagedAttentionLayouts paged;
    paged.q = TensorLayout::bhsd(DType::f16, 1, 16, 1, 576);
    paged.k_cache = PagedKvLayout::dense(DType::f16, 8, 64, 1, 576);
    paged.v_cache = PagedKvLayout::dense(DType::f16, 8, 64, 1, 512);
    paged.max_pages = 4;
    paged.out = TensorLayout::bhsd(DType::f16, 1, 16, 1, 512);
    // MLA's 16 heads on one KV head: three stages on a CPU device (as a dense call's), fused on a GPU.
    CHECK(PreparedAttention(ctx, AttentionSpec::paged(paged)).plan().path == std::string(cpu ? "unfused" : "fused"));
    paged.path = AttentionPath::fused;
    CHECK(PreparedAttention(ctx, AttentionSpec::paged(paged)).plan().path == std::string("fused"));
    paged.path = AttentionPath::unfused;
    CHECK(PreparedAttention(ctx, AttentionSpec::paged(paged)).plan().path == std::string("unfused"));
    // Two heads on a KV head pack 2 rows, fewer than the rule's 4: fused on path auto.
    paged.path = AttentionPath::automatic;
    paged.q = TensorLayout::bhsd(DType::f16, 1, 2, 1, 576);
    paged.out = TensorLayout::bhsd(DType::f16, 1, 2, 1, 512);
    CHECK(PreparedAttention(ctx, AttentionSpec::paged(paged)).plan().path == std::string("fused"));
    // A cascade runs on the fused kernels: path unfused with a shared prefix is refused.
    paged.path = AttentionPath::unfused;
    paged.shared_prefix_pages = 1;
    paged.q = TensorLayout::bhsd(DType::f16, 2, 16, 1, 576);
    paged.out = TensorLayout::bhsd(DType::f16, 2, 16, 1, 512);
    CHECK(contains(error_message([&] { (void)PreparedAttention(ctx, AttentionSpec::paged(paged)); }),
                   "path: unfused, but shared_prefix_pages is 1"));
  }
}
