// Targeted conformance cases for the promises of DESIGN.md §1 that a random sweep rarely hits:
// fully masked rows (exactly 0, LSE -inf), masked keys holding NaN / Inf, NaN propagation confined
// to its row, the split-KV path under every mask, extreme scales and strided layouts.
#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

AttentionCase base(DType dtype, int64_t seq_q, int64_t seq_k, int64_t dim, uint64_t n) {
  AttentionCase c;
  c.dtype = dtype;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.dim_qk = c.dim_v = dim;
  c.seed = case_seed(5000 + n * 3 + static_cast<uint64_t>(dtype));
  return c;
}

}  // namespace

TEST_SUITE("conformance-masks") {
  TEST_CASE("fully masked rows give exactly 0 and LSE -inf") {
    std::vector<AttentionCase> cases;
    uint64_t n = 0;
    for (const DType dtype : kDTypes) {
      // Bottom-right with seq_q > seq_k: rows 0..4 see no key.
      AttentionCase c = base(dtype, 9, 4, 64, n++);
      c.causal = Causal::bottom_right;
      cases.push_back(c);
      c = base(dtype, 70, 5, 40, n++);  // more empty rows than one row tile
      c.causal = Causal::bottom_right;
      c.heads = 3;
      c.layout = LayoutKind::bshd;
      cases.push_back(c);
      // Key padding 0 for one batch.
      c = base(dtype, 17, 33, 21, n++);
      c.batch = 3;
      c.heads = 2;
      c.kv_lengths = {0, 5, 33};
      c.poison_hidden_kv = true;
      cases.push_back(c);
      // A boolean mask row of all false, and a float mask row of all -inf.
      c = base(dtype, 33, 65, 64, n++);
      c.mask = MaskKind::boolean;
      c.mask_blank_rows = {0, 5, 32};
      cases.push_back(c);
      c.mask = MaskKind::f32;
      c.mask_heads = c.heads = 2;
      c.seed = case_seed(5100 + n++);
      cases.push_back(c);
      c.mask = MaskKind::f16;
      c.seed = case_seed(5100 + n++);
      cases.push_back(c);
    }
    run_cases(context(), cases);
  }

  TEST_CASE("NaN and Inf in masked-out keys never reach the output") {
    std::vector<AttentionCase> cases;
    uint64_t n = 100;
    for (const DType dtype : kDTypes) {
      AttentionCase c = base(dtype, 20, 50, 64, n++);  // beyond kv_length
      c.batch = 2;
      c.kv_lengths = {13, 49};
      c.poison_hidden_kv = true;
      cases.push_back(c);
      c = base(dtype, 20, 50, 32, n++);  // beyond the top-left causal limit (keys 20..49)
      c.causal = Causal::top_left;
      c.poison_hidden_kv = true;
      cases.push_back(c);
      c = base(dtype, 24, 40, 72, n++);  // whole key columns masked out by the mask
      c.heads = 4;
      c.kv_heads = 2;
      c.mask = MaskKind::boolean;
      c.mask_blank_keys = {0, 7, 8, 39};
      c.poison_hidden_kv = true;
      cases.push_back(c);
      c.mask = MaskKind::f32;  // -inf columns
      c.seed = case_seed(5200 + n++);
      cases.push_back(c);
    }
    run_cases(context(), cases);
  }

  TEST_CASE("key lengths outside [0, seq_k] are clamped on the device") {
    std::vector<AttentionCase> cases;
    uint64_t n = 150;
    for (const DType dtype : kDTypes) {
      AttentionCase c = base(dtype, 5, 70, 32, n++);
      c.batch = 4;
      c.kv_lengths = {0, 70, 0, 70};
      c.gpu_kv_lengths = {-5, 71, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
      cases.push_back(c);
    }
    run_cases(context(), cases);
  }

  TEST_CASE("NaN in one query row stays in that row") {
    std::vector<AttentionCase> cases;
    uint64_t n = 200;
    for (const DType dtype : kDTypes) {
      AttentionCase c = base(dtype, 40, 70, 64, n++);
      c.batch = 2;
      c.heads = 4;
      c.kv_heads = 2;  // head 1 shares its KV head with the poisoned head 0
      c.nan_q_rows = {3, 39};
      cases.push_back(c);
    }
    run_cases(context(), cases);
  }

  TEST_CASE("split-KV under every mask") {
    // seq_k in the thousands with few query rows: the plan splits the key range, and some splits
    // are entirely masked (their partial LSE is -inf) — the combine must ignore them.
    std::vector<AttentionCase> cases;
    uint64_t n = 300;
    for (const DType dtype : kDTypes) {
      AttentionCase c = base(dtype, 1, 3000, 64, n++);
      c.batch = 4;
      c.heads = 2;
      c.kv_lengths = {3, 2999, 0, 1500};
      c.poison_hidden_kv = true;
      cases.push_back(c);
      c = base(dtype, 4, 3001, 128, n++);
      c.heads = 4;
      c.kv_heads = 1;
      c.causal = Causal::bottom_right;
      c.layout = LayoutKind::bshd;
      cases.push_back(c);
      c = base(dtype, 2, 2500, 40, n++);
      c.mask = MaskKind::boolean;
      c.mask_drop = 0.9;
      c.mask_blank_rows = {1};
      c.poison_hidden_kv = true;
      cases.push_back(c);
      c = base(dtype, 3, 2048, 72, n++);
      c.mask = MaskKind::f32;
      c.mask_heads = c.heads = 2;
      c.mask_blank_keys = {0, 1, 2, 1000, 2047};
      c.causal = Causal::top_left;  // rows see 1..3 keys: almost every split is empty
      c.poison_hidden_kv = true;
      cases.push_back(c);
    }
    run_cases(context(), cases);
  }

  TEST_CASE("scales: zero, negative, large; default equals 1/sqrt(dim)") {
    std::vector<AttentionCase> cases;
    uint64_t n = 400;
    for (const DType dtype : kDTypes) {
      for (const float scale : {0.0f, -1.3f, 4.0f, 0.125f}) {
        AttentionCase c = base(dtype, 19, 37, 64, n++);
        c.scale = scale;
        c.mask = MaskKind::f16;
        cases.push_back(c);
      }
    }
    run_cases(context(), cases);
  }

  TEST_CASE("strided layouts and offsets with masks") {
    std::vector<AttentionCase> cases;
    uint64_t n = 500;
    for (const DType dtype : kDTypes) {
      for (const LayoutKind layout : {LayoutKind::bshd, LayoutKind::padded}) {
        AttentionCase c = base(dtype, 31, 47, 40, n++);
        c.dim_v = 24;
        c.batch = 2;
        c.heads = 6;
        c.kv_heads = 3;
        c.layout = layout;
        c.offset = 5;
        c.mask = MaskKind::boolean;
        c.mask_batch = 2;
        c.kv_lengths = {47, 30};
        c.causal = Causal::bottom_right;
        c.poison_hidden_kv = true;
        cases.push_back(c);
      }
    }
    run_cases(context(), cases);
  }
}
