// The FLOP count of `vkattn bench` (tools/drivers/bench_metrics.hpp): the visible (query, key) pairs of a
// causal mask in either alignment, checked against counting them one by one.
#include <doctest/doctest.h>

#include "bench_metrics.hpp"

namespace {

using vkattn::Causal;

// Row by row, the mask's own rule: key j is visible to query i iff j < keys and j <= i + off.
double count_one_by_one(int64_t seq_q, int64_t seq_k, Causal causal, int64_t keys) {
  const int64_t off = causal == Causal::bottom_right ? seq_k - seq_q : 0;
  double pairs = 0;
  for (int64_t i = 0; i < seq_q; ++i)
    for (int64_t j = 0; j < seq_k; ++j)
      if (j < keys && (causal == Causal::none || j <= i + off)) pairs += 1;
  return pairs;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("bench counts the visible (query, key) pairs exactly") {
    for (int64_t seq_q : {1, 2, 7, 63, 64, 65, 128})
      for (int64_t seq_k : {1, 3, 64, 113, 512})
        for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right})
          for (int64_t keys : {int64_t(0), int64_t(1), seq_k / 2, seq_k, seq_k + 5}) {
            CAPTURE(seq_q);
            CAPTURE(seq_k);
            CAPTURE(keys);
            CHECK(vkattn::cli::visible_pairs(seq_q, seq_k, causal, keys) ==
                  count_one_by_one(seq_q, seq_k, causal, std::min(keys, seq_k)));
          }
  }

  TEST_CASE("bench FLOPs: causal rectangles are not credited with half a square") {
    vkattn::AttentionProblem p;
    p.batch = 2;
    p.heads = 3;
    p.kv_heads = 3;
    p.dim_qk = 64;
    p.dim_v = 64;
    p.seq_q = 128;
    p.seq_k = 512;
    p.causal = Causal::top_left;
    // 128 rows seeing 1..128 keys: 12.6% of the 128 x 512 rectangle, not 50%.
    CHECK(vkattn::cli::attention_flops(p) == 2.0 * 2 * 3 * (128.0 * 129 / 2) * 128);
    p.causal = Causal::bottom_right;  // row i sees i + 385 keys
    CHECK(vkattn::cli::attention_flops(p) == 2.0 * 2 * 3 * (128 * 385 + 127.0 * 128 / 2) * 128);
    p.causal = Causal::none;
    CHECK(vkattn::cli::attention_flops(p) == 4.0 * 2 * 3 * 128 * 512 * 64);
    // Key lengths per batch: batch 0 sees 100 keys, batch 1 none.
    CHECK(vkattn::cli::attention_flops(p, {100, 0}) == 2.0 * 3 * 128 * 100 * 128);
    p.seq_k = 128;
    p.causal = Causal::top_left;
    CHECK(vkattn::cli::attention_flops(p) == 2.0 * 2 * 3 * (128.0 * 129 / 2) * 128);
  }
}
