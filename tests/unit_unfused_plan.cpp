// The three-stage path's plan (make_unfused_plan): when it runs a GQA group's query heads as the rows
// of one product with their shared K and V (pack_group_rows), and when it must not. The answers of
// packed calls are the conformance suite's (unfused GQA/MQA cases); this pins the rule.
#include <doctest/doctest.h>

#include "attention_unfused.hpp"
#include "planner_presets.hpp"

using namespace vkattn;
using vkattn::conform::device_profiles;

namespace {

AttentionLayouts gqa(TensorLayout q, int64_t kv_heads, int64_t seq_k) {
  AttentionLayouts l;
  l.q = q;
  l.out = q;
  l.k = l.v = TensorLayout::bhsd(q.dtype, q.batch, kv_heads, seq_k, q.dim);
  return l;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("three-stage plan: a GQA group's heads are packed as rows only where their rows are evenly spaced") {
    for (const auto& preset : device_profiles()) {
      INFO("device: " << preset.info.name);
      if (!preset.info.storage_16bit) continue;
      const auto packs = [&](const AttentionLayouts& l) { return detail::make_unfused_plan(preset.info, l, false).pack_group_rows; };
      // Decode: one row a head, so any layout's rows are one head apart (MLA's 16 heads on one KV head too).
      CHECK(packs(gqa(TensorLayout::bhsd(DType::f16, 2, 8, 1, 64), 2, 300)));
      CHECK(packs(gqa(TensorLayout::bshd(DType::f16, 2, 1, 8, 64), 2, 300)));
      CHECK(packs(gqa(TensorLayout::bhsd(DType::f16, 1, 16, 1, 576), 1, 8192)));
      // Prefill: whole heads stored head after head (BHSD) pack; BSHD's rows interleave the heads.
      CHECK(packs(gqa(TensorLayout::bhsd(DType::f16, 2, 8, 33, 64), 2, 300)));
      CHECK_FALSE(packs(gqa(TensorLayout::bshd(DType::f16, 2, 33, 8, 64), 2, 300)));
      // Without GQA there is nothing to pack.
      CHECK_FALSE(packs(gqa(TensorLayout::bhsd(DType::f16, 2, 8, 1, 64), 8, 300)));
    }
  }
}
