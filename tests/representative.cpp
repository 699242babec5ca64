// A representative subset (every path: fused, split + combine, every mask kind, every dtype,
// strided layouts) small enough to run again under synchronization validation, which is slow and
// is the only thing that catches a missing barrier on lavapipe (DESIGN.md §5).
#include <doctest/doctest.h>

#include <vector>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

TEST_SUITE("representative") {
  TEST_CASE("representative subset") {
    std::vector<AttentionCase> cases;
    cases.reserve(16);  // `add` hands out references into the vector
    auto add = [&](DType dtype, int64_t sq, int64_t sk, int64_t d) -> AttentionCase& {
      AttentionCase c;
      c.dtype = dtype;
      c.seq_q = sq;
      c.seq_k = sk;
      c.dim_qk = c.dim_v = d;
      c.seed = case_seed(7000 + cases.size());
      cases.push_back(c);
      return cases.back();
    };
    add(DType::f32, 65, 63, 64);
    AttentionCase& a = add(DType::f16, 33, 70, 72);
    a.heads = 8;
    a.kv_heads = 2;
    a.causal = Causal::bottom_right;
    a.layout = LayoutKind::bshd;
    AttentionCase& b = add(DType::bf16, 20, 40, 40);
    b.batch = 2;
    b.heads = 2;
    b.mask = MaskKind::boolean;
    b.mask_batch = 2;
    b.mask_heads = 2;
    b.kv_lengths = {40, 0};
    AttentionCase& s = add(DType::f32, 1, 4096, 64);  // split + combine
    s.batch = 2;
    s.kv_lengths = {4000, 17};
    AttentionCase& f = add(DType::f16, 9, 4, 21);
    f.dim_v = 8;
    f.causal = Causal::bottom_right;  // fully masked rows
    f.mask = MaskKind::f32;
    f.layout = LayoutKind::padded;
    f.offset = 3;
    AttentionCase& h = add(DType::f32, 7, 30, 256);
    h.mask = MaskKind::f16;
    h.causal = Causal::top_left;
    h.scale = -0.5f;
    AttentionCase& l = add(DType::f16, 1, 16384, 128);  // many splits, one combine
    l.heads = 4;
    l.kv_heads = 2;
    l.layout = LayoutKind::bshd;
    run_cases(context(), cases);
  }
}
