// The backward of a call that asked for the weights runs in three stages (GEMMs and the softmax
// backward, runtime/backward_three_stage.hpp): its plan says so, and where one chunk's scores do not
// fit one binding it cuts them by batch and KV head, then by query rows, whose split partials of dK
// and dV are summed after; every cut matches the fp64 reference. The catalog's backward section runs
// the same form over every mask and modifier (`vkattn conform --path unfused`).
#include <doctest/doctest.h>

#include <string>

#include "conform/backward_case.hpp"
#include "support.hpp"
#include "vkattn/attention_backward.hpp"
#include "vkattn/testing.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

AttentionSpec spec_of(const conform::BackwardCase& c, bool weights, AttentionPath path = AttentionPath::automatic) {
  AttentionSpec spec;
  spec.q = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq_q, c.dim_qk);
  spec.kv = DenseKv{TensorLayout::bhsd(c.dtype, c.batch, c.kv_heads, c.seq_k, c.dim_qk),
                    TensorLayout::bhsd(c.dtype, c.batch, c.kv_heads, c.seq_k, c.dim_v)};
  spec.out = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq_q, c.dim_v);
  spec.lse = true;
  spec.weights = weights;
  spec.path = path;
  return spec;
}

// This device, described with storage-buffer bindings of `range` bytes: plans made for it cut the
// scores where this device's own plans would not.
DeviceInfo with_range(const DeviceInfo& here, uint64_t range) {
  DeviceInfo small = here;
  small.max_storage_buffer_range = range;
  small.name = here.name + " (bindings of " + std::to_string(range) + " bytes)";
  return small;
}

void check_passes(Context& ctx, const conform::BackwardCase& c, const DeviceInfo* plan_for) {
  conform::RunOptions options;
  options.path = AttentionPath::unfused;
  options.profile = plan_for;
  options.take_validation_messages = [] { return take_validation_messages(); };
  const conform::CaseResult result = conform::run_backward_case(ctx, c, options);
  for (const std::string& p : result.problems) FAIL_CHECK(p);
  CHECK(result.skip_reason.empty());
  CHECK(result.outcome == conform::Outcome::passed);
}

}  // namespace

TEST_SUITE("backward") {
  TEST_CASE("three-stage backward: chosen with the weights or the unfused path, the fused kernels otherwise") {
    Context& ctx = context();
    conform::BackwardCase c;
    c.heads = 4, c.kv_heads = 2, c.seq_q = 13, c.seq_k = 21;
    const PreparedAttentionBackward with_weights(ctx, spec_of(c, true));
    CHECK(with_weights.plan().kernel == std::string("three-stage"));
    CHECK(with_weights.plan().chunks == 1);
    CHECK(with_weights.plan().query_splits == 1);
    // S and dP of the one chunk, f32, after D.
    CHECK(with_weights.workspace_bytes() >= uint64_t(2 * 4 * 13 * 21 * 4 + 4 * 13 * 4));
    CHECK(PreparedAttentionBackward(ctx, spec_of(c, false, AttentionPath::unfused)).plan().kernel == std::string("three-stage"));
    CHECK(PreparedAttentionBackward(ctx, spec_of(c, false)).plan().kernel != std::string("three-stage"));
    CHECK(PreparedAttentionBackward(ctx, spec_of(c, false, AttentionPath::fused)).plan().kernel != std::string("three-stage"));
  }

  TEST_CASE("three-stage backward: scores cut by batch and KV head where they do not fit one binding") {
    Context& ctx = context();
    conform::BackwardCase c;
    c.batch = 2, c.heads = 4, c.kv_heads = 2, c.seq_q = 16, c.seq_k = 40, c.dim_qk = c.dim_v = 8;
    c.causal = Causal::bottom_right;
    c.modifiers.sinks = true;
    c.seed = case_seed(3100);
    // The whole call's scores are 20480 bytes; one batch element's KV head (2 query heads) 5120.
    const DeviceInfo small = with_range(ctx.device_info(), 8192);
    const PreparedAttentionBackward planned(ctx, spec_of(c, true), small);
    CHECK(planned.plan().kernel == std::string("three-stage"));
    CHECK(planned.plan().chunks == 4);
    CHECK(planned.plan().query_splits == 1);
    check_passes(ctx, c, &small);
  }

  TEST_CASE("three-stage backward: a GQA group's rows cut into splits whose dK and dV partials are summed") {
    Context& ctx = context();
    conform::BackwardCase c;
    c.heads = 2, c.kv_heads = 1, c.seq_q = 64, c.seq_k = 40, c.dim_qk = c.dim_v = 8;
    c.modifiers.options.softcap = 3.0f;
    c.dropout = 0.25f;
    c.dropout_seed = 77;
    c.seed = case_seed(3101);
    // The group's scores are 20480 bytes: 16 rows of its two heads (5120) fit 8192, 32 (10240) do not.
    const DeviceInfo small = with_range(ctx.device_info(), 8192);
    const PreparedAttentionBackward planned(ctx, spec_of(c, true), small);
    CHECK(planned.plan().chunks == 4);
    CHECK(planned.plan().query_splits == 4);
    check_passes(ctx, c, &small);
    // f16, causal top-left, odd rows: the last split is short.
    c.dtype = DType::f16;
    c.seq_q = 61;
    c.causal = Causal::top_left;
    c.seed = case_seed(3102);
    check_passes(ctx, c, &small);
  }
}
