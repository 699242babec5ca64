// Long key ranges. lavapipe stops an invocation's loops after 65535 iterations in total and says
// nothing (DESIGN.md §5), so a kernel that is right on a GPU can be silently wrong here from a few
// thousand keys on: these cases are the ones that catch it.
#include <doctest/doctest.h>

#include <vector>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

AttentionCase long_case(DType dtype, int64_t seq_q, int64_t seq_k, int64_t dim, uint64_t n) {
  AttentionCase c;
  c.dtype = dtype;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.dim_qk = c.dim_v = dim;
  c.seed = case_seed(9000 + n);
  return c;
}

}  // namespace

TEST_SUITE("long") {
  TEST_CASE("decode: one query row against 16384 keys") {
    std::vector<AttentionCase> cases;
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      cases.push_back(long_case(dtype, 1, 16384, 128, static_cast<uint64_t>(dtype)));
    }
    run_cases(context(), cases);
  }

  TEST_CASE("64 query rows against 16384 keys") {
    run_cases(context(), {long_case(DType::f32, 64, 16384, 128, 10)});
  }

  TEST_CASE("decode: one query row against 65536 keys (f32)") {
    run_cases(context(), {long_case(DType::f32, 1, 65536, 128, 11)});
  }

  TEST_CASE("decode with GQA: 8 heads over 2 KV heads, 20000 keys") {
    AttentionCase c = long_case(DType::f16, 1, 20000, 64, 12);
    c.batch = 2;
    c.heads = 8;
    c.kv_heads = 2;
    c.layout = LayoutKind::bshd;
    c.kv_lengths = {20000, 12345};
    run_cases(context(), {c});
  }

  TEST_CASE("K and V beyond one binding (128 MiB on lavapipe): dispatched in (batch, GQA group) chunks") {
    // K = 2 x 4 x 36000 x 128 f32 = 147 MB: one batch at a time, then head groups, must agree.
    AttentionCase c = long_case(DType::f32, 2, 36000, 128, 14);
    c.batch = 2;
    c.heads = 12;
    c.kv_heads = 4;
    c.causal = Causal::bottom_right;
    c.kv_lengths = {36000, 30001};
    run_cases(context(), {c});
  }

  TEST_CASE("one KV head larger than a binding: 600,000 keys x 64 f32 (154 MB) bound by key range") {
    AttentionCase c = long_case(DType::f32, 3, 600000, 64, 15);
    c.heads = 2;
    c.kv_heads = 1;
    c.causal = Causal::bottom_right;
    c.kv_lengths = {590001};
    c.mask = MaskKind::boolean;
    c.mask_drop = 0.1;
    if (attention_path() == AttentionPath::unfused) {
      // The three-stage path binds each KV head whole; it refuses, naming the path that works.
      INFO("case: " << describe(c));
      CHECK(contains(error_message([&] { run_case(context(), c); }), "use the fused path"));
      return;
    }
    run_cases(context(), {c});
  }

  TEST_CASE("grids beyond maxComputeWorkGroupCount (65535 on lavapipe): 70,000 heads, batch 66,000") {
    AttentionCase heads = long_case(DType::f16, 3, 5, 16, 16);
    heads.heads = 70000;
    heads.kv_heads = 35000;
    heads.causal = Causal::bottom_right;
    AttentionCase batch = long_case(DType::f32, 2, 7, 8, 17);
    batch.batch = 66000;
    batch.heads = 2;
    batch.kv_heads = 1;
    batch.layout = LayoutKind::bshd;
    run_cases(context(), {heads, batch});
  }

  TEST_CASE("causal bottom-right: a chunk of 128 queries at the end of 16384 keys") {
    AttentionCase c = long_case(DType::f32, 128, 16384, 64, 13);
    c.causal = Causal::bottom_right;
    c.reference_rows = {0, 1, 63, 64, 126, 127};  // the reference is the slow part here
    run_cases(context(), {c});
  }

  TEST_CASE("long key range with a boolean mask and LSE") {
    AttentionCase c = long_case(DType::bf16, 2, 16384, 64, 14);
    c.mask = MaskKind::boolean;
    c.mask_drop = 0.5;
    run_cases(context(), {c});
  }
}
