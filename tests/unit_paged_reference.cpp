// reference::paged_attention against the dense reference on the equivalent dense problem (the main
// check), and on cases small enough to check by hand: page sizes 1, 16 and larger than a sequence,
// shuffled and shared pages, empty sequences and lengths on a page edge, an append across a page
// boundary, q8_0 caches.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "support.hpp"

using namespace vkattn;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_values(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A batch of sequences stored in a paged cache. Dense K (batch, kv_heads, max_len, dim) holds each
// sequence's keys at 0 .. len_b - 1; scatter() copies them into pages through the block table, and
// every cache row no sequence holds is NaN, so a row read by mistake shows.
struct PagedCase {
  int64_t batch, heads, kv_heads, seq_q, dim, dim_v, page_size, num_pages, max_pages, max_len;
  PageOrder order = PageOrder::nhd;  // of both caches
  std::vector<int32_t> block_table, cache_lens;
  std::vector<float> q, k, v;  // dense: q (B, H, Sq, D), k (B, G, max_len, D), v (B, G, max_len, Dv)
  std::vector<float> k_cache, v_cache;
  AttentionOptions options;
  std::optional<HeadValuesLayout> alibi_layout, sinks_layout;
  std::vector<float> alibi, sinks;

  PagedCase(std::mt19937& rng, int64_t b, int64_t h, int64_t g, int64_t sq, int64_t d, int64_t dv, int64_t ps,
            int64_t pages, int64_t max_pages_, int64_t max_len_)
      : batch(b), heads(h), kv_heads(g), seq_q(sq), dim(d), dim_v(dv), page_size(ps), num_pages(pages),
        max_pages(max_pages_), max_len(max_len_) {
    q = random_values(rng, static_cast<std::size_t>(b * h * sq * d));
    k = random_values(rng, static_cast<std::size_t>(b * g * max_len * d));
    v = random_values(rng, static_cast<std::size_t>(b * g * max_len * dv));
    block_table.assign(static_cast<std::size_t>(b * max_pages), -1);
    cache_lens.assign(static_cast<std::size_t>(b), static_cast<int32_t>(max_len));
  }

  // Each sequence's pages, shuffled over the whole cache (no sharing).
  void shuffled_table(std::mt19937& rng) {
    std::vector<int32_t> pages(static_cast<std::size_t>(num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    std::size_t next = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < (cache_lens[static_cast<std::size_t>(b)] + page_size - 1) / page_size; ++i)
        block_table[static_cast<std::size_t>(b * max_pages + i)] = pages.at(next++);
  }

  void scatter() {
    k_cache.assign(static_cast<std::size_t>(num_pages * page_size * kv_heads * dim), kNaN);
    v_cache.assign(static_cast<std::size_t>(num_pages * page_size * kv_heads * dim_v), kNaN);
    const PagedKvLayout kl = PagedKvLayout::dense(DType::f32, num_pages, page_size, kv_heads, dim, KvQuant::none, order);
    const PagedKvLayout vl = PagedKvLayout::dense(DType::f32, num_pages, page_size, kv_heads, dim_v, KvQuant::none, order);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < cache_lens[static_cast<std::size_t>(b)]; ++t) {
        const int64_t page = block_table[static_cast<std::size_t>(b * max_pages + t / page_size)];
        for (int64_t g = 0; g < kv_heads; ++g) {
          for (int64_t d = 0; d < dim; ++d)
            k_cache[static_cast<std::size_t>(kl.index(page, t % page_size, g, d))] =
                k[static_cast<std::size_t>(((b * kv_heads + g) * max_len + t) * dim + d)];
          for (int64_t d = 0; d < dim_v; ++d)
            v_cache[static_cast<std::size_t>(vl.index(page, t % page_size, g, d))] =
                v[static_cast<std::size_t>(((b * kv_heads + g) * max_len + t) * dim_v + d)];
        }
      }
  }

  reference::PagedInputs paged() const {
    reference::PagedInputs in;
    in.q_layout = TensorLayout::bhsd(DType::f32, batch, heads, seq_q, dim);
    in.q = q;
    in.k_cache_layout = PagedKvLayout::dense(DType::f32, num_pages, page_size, kv_heads, dim, KvQuant::none, order);
    in.v_cache_layout = PagedKvLayout::dense(DType::f32, num_pages, page_size, kv_heads, dim_v, KvQuant::none, order);
    in.k_cache.values = k_cache;
    in.v_cache.values = v_cache;
    in.max_pages = max_pages;
    in.block_table = block_table;
    in.cache_lens = cache_lens;
    in.options = options;
    in.alibi_layout = alibi_layout;
    in.sinks_layout = sinks_layout;
    in.alibi = alibi;
    in.sinks = sinks;
    return in;
  }

  // The equivalent dense problem: the whole batch, keys max_len long. Exactly equivalent when every
  // sequence is max_len long; else `kv_lengths` pads (right only for rules that do not depend on
  // seq_k: no bottom-right alignment).
  reference::Inputs dense(bool kv_lengths) const {
    reference::Inputs in;
    in.q_layout = TensorLayout::bhsd(DType::f32, batch, heads, seq_q, dim);
    in.k_layout = TensorLayout::bhsd(DType::f32, batch, kv_heads, max_len, dim);
    in.v_layout = TensorLayout::bhsd(DType::f32, batch, kv_heads, max_len, dim_v);
    in.q = q;
    in.k = k;
    in.v = v;
    if (kv_lengths) in.kv_lengths = cache_lens;
    in.options = options;
    in.alibi_layout = alibi_layout;
    in.sinks_layout = sinks_layout;
    in.alibi = alibi;
    in.sinks = sinks;
    return in;
  }

  // Sequence b alone as a dense batch-1 problem of its own length (at least one key: see callers).
  reference::Outputs dense_sequence(int64_t b) const {
    const int64_t len = cache_lens[static_cast<std::size_t>(b)];
    std::vector<float> kb, vb;
    for (int64_t g = 0; g < kv_heads; ++g) {
      const auto k0 = k.begin() + (b * kv_heads + g) * max_len * dim;
      const auto v0 = v.begin() + (b * kv_heads + g) * max_len * dim_v;
      kb.insert(kb.end(), k0, k0 + len * dim);
      vb.insert(vb.end(), v0, v0 + len * dim_v);
    }
    reference::Inputs in = dense(false);
    in.q_layout = TensorLayout::bhsd(DType::f32, 1, heads, seq_q, dim);
    in.q_layout.offset = b * heads * seq_q * dim;
    in.k_layout = TensorLayout::bhsd(DType::f32, 1, kv_heads, len, dim);
    in.v_layout = TensorLayout::bhsd(DType::f32, 1, kv_heads, len, dim_v);
    in.k = kb;
    in.v = vb;
    std::vector<float> alibi_b;
    if (alibi_layout && alibi_layout->batch != 1) {
      in.alibi_layout = HeadValuesLayout{1, heads, 0};
      in.alibi = std::span<const float>(alibi).subspan(static_cast<std::size_t>(b * heads),
                                                       static_cast<std::size_t>(heads));
    }
    return reference::attention(in);
  }

  void add_modifiers(std::mt19937& rng) {
    alibi_layout = HeadValuesLayout{batch, heads, 0};
    alibi = random_values(rng, static_cast<std::size_t>(batch * heads));
    for (float& s : alibi) s = std::fabs(s);
    sinks_layout = HeadValuesLayout{1, heads, 0};
    sinks = random_values(rng, static_cast<std::size_t>(heads));
  }
};

// max |a - b| over O and LSE; infinities must match exactly (a fully masked row's LSE).
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::fabs(a[i] - b[i]));
  }
  return m;
}

void check_agree(const reference::Outputs& paged, const reference::Outputs& dense) {
  CHECK(max_diff(paged.out, dense.out) <= 1e-12);
  CHECK(max_diff(paged.lse, dense.lse) <= 1e-12);
}

std::vector<AttentionOptions> option_sets() {
  std::vector<AttentionOptions> sets(5);
  sets[1].causal = Causal::bottom_right;
  sets[2].causal = Causal::top_left;
  sets[3].window = Window{4, 1};
  sets[3].softcap = 2.0f;
  sets[4].causal = Causal::bottom_right;
  sets[4].window = Window{3, -1};
  sets[4].align = Align::bottom_right;
  return sets;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("paged reference: by hand, one head of dim 1 over shuffled pages of 2") {
    // q = 0: equal scores, so O is the mean of the sequence's V. Sequence 0 has tokens 0..2 in pages
    // 3 then 1; sequence 1 has token 0 in page 0. Page 2 and the unused row hold NaN.
    reference::PagedInputs in;
    const std::vector<float> q = {0.0f, 0.0f};
    const std::vector<float> k = {0.5f, kNaN, 3, kNaN, kNaN, kNaN, 7, 8};  // page p row r at 2p + r
    const std::vector<float> v = {10, kNaN, 1, kNaN, kNaN, kNaN, 4, 6};
    const std::vector<int32_t> table = {3, 1, 0, -1};
    const std::vector<int32_t> lens = {3, 1};
    in.q_layout = TensorLayout::bhsd(DType::f32, 2, 1, 1, 1);
    in.q = q;
    in.k_cache_layout = in.v_cache_layout = PagedKvLayout::dense(DType::f32, 4, 2, 1, 1);
    in.k_cache.values = k;
    in.v_cache.values = v;
    in.max_pages = 2;
    in.block_table = table;
    in.cache_lens = lens;
    const reference::PagedOutputs o = reference::paged_attention(in);
    // Sequence 0: tokens 0, 1 = page 3 rows 0, 1 (V 4, 6); token 2 = page 1 row 0 (V 1).
    CHECK(o.at(0, 0, 0, 0) == doctest::Approx((4.0 + 6.0 + 1.0) / 3.0));
    CHECK(o.lse[0] == doctest::Approx(std::log(3.0)));
    CHECK(o.at(1, 0, 0, 0) == 10.0);
    CHECK(o.lse[1] == 0.0);
  }

  TEST_CASE("paged reference: page sizes 1, 3, 16 and 64 (larger than the sequence) agree with the dense reference") {
    std::mt19937 rng(1401);
    for (const int64_t page_size : {1, 3, 16, 64}) {
      const int64_t len = 20;
      const int64_t pages_per_seq = (len + page_size - 1) / page_size;
      PagedCase c(rng, 3, 4, 2, 5, 32, 16, page_size, 3 * pages_per_seq + 2, pages_per_seq + 1, len);
      c.shuffled_table(rng);
      c.scatter();
      for (const AttentionOptions& options : option_sets()) {
        for (const bool modifiers : {false, true}) {
          INFO("page_size " << page_size << " causal " << to_string(options.causal) << " modifiers " << modifiers);
          c.options = options;
          c.alibi_layout.reset();
          c.sinks_layout.reset();
          if (modifiers) c.add_modifiers(rng);
          check_agree(reference::paged_attention(c.paged()), reference::attention(c.dense(false)));
        }
      }
    }
  }

  TEST_CASE("paged reference: hnd pages hold each head's tokens side by side, and agree with the dense reference") {
    // (num_pages 4, kv_heads 2, page_size 4, dim 8): element (page 1, slot 2, head 1, d 3) is
    // ((1 * 2 + 1) * 4 + 2) * 8 + 3; in nhd pages ((1 * 4 + 2) * 2 + 1) * 8 + 3.
    CHECK(PagedKvLayout::dense(DType::f32, 4, 4, 2, 8, KvQuant::none, PageOrder::hnd).index(1, 2, 1, 3) == 115);
    CHECK(PagedKvLayout::dense(DType::f32, 4, 4, 2, 8).index(1, 2, 1, 3) == 107);
    CHECK(PagedKvLayout::dense(DType::f16, 4, 4, 2, 8, KvQuant::none, PageOrder::hnd).describe() == "f16 hnd (4, 2, 4, 8)");
    std::mt19937 rng(1403);
    for (const int64_t page_size : {1, 3, 16}) {
      const int64_t len = 20;
      const int64_t pages_per_seq = (len + page_size - 1) / page_size;
      PagedCase c(rng, 3, 4, 2, 5, 32, 16, page_size, 3 * pages_per_seq + 2, pages_per_seq + 1, len);
      c.order = PageOrder::hnd;
      c.shuffled_table(rng);
      c.scatter();
      for (const AttentionOptions& options : option_sets()) {
        INFO("page_size " << page_size << " causal " << to_string(options.causal));
        c.options = options;
        check_agree(reference::paged_attention(c.paged()), reference::attention(c.dense(false)));
      }
    }
  }

  TEST_CASE("paged reference: per-sequence lengths 0, on a page edge and between, with shared pages") {
    std::mt19937 rng(1402);
    // Page size 16: lengths 0, 16 (a page edge), 17 (one into the next page), 5; sequence 3 shares
    // sequence 1's first page (the same prefix), read by both.
    PagedCase c(rng, 4, 2, 1, 3, 8, 8, 16, 8, 3, 17);
    c.cache_lens = {0, 16, 17, 5};
    c.block_table = {-1, -1, -1, /**/ 6, -1, -1, /**/ 2, 0, -1, /**/ 6, -1, -1};
    // Sequence 3's first 5 keys and values are sequence 1's (its prefix lives in page 6).
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t d = 0; d < 8; ++d) {
        c.k[static_cast<std::size_t>((3 * 17 + t) * 8 + d)] = c.k[static_cast<std::size_t>((1 * 17 + t) * 8 + d)];
        c.v[static_cast<std::size_t>((3 * 17 + t) * 8 + d)] = c.v[static_cast<std::size_t>((1 * 17 + t) * 8 + d)];
      }
    c.scatter();
    for (const AttentionOptions& options : option_sets()) {
      for (const bool modifiers : {false, true}) {
        INFO("causal " << to_string(options.causal) << " modifiers " << modifiers);
        c.options = options;
        c.alibi_layout.reset();
        c.sinks_layout.reset();
        if (modifiers) c.add_modifiers(rng);
        const reference::PagedOutputs o = reference::paged_attention(c.paged());
        // Each sequence against the dense reference of its own length (bottom-right: its own diagonal).
        for (int64_t b = 1; b < 4; ++b) {
          const reference::Outputs d = c.dense_sequence(b);
          const std::size_t rows = static_cast<std::size_t>(c.heads * c.seq_q);
          const std::vector<double> out(o.out.begin() + b * rows * 8, o.out.begin() + (b + 1) * rows * 8);
          const std::vector<double> lse(o.lse.begin() + b * rows, o.lse.begin() + (b + 1) * rows);
          CHECK(max_diff(out, d.out) <= 1e-12);
          CHECK(max_diff(lse, d.lse) <= 1e-12);
        }
        // No keys: O = 0, LSE = -inf, or the sink's logit.
        for (int64_t h = 0; h < c.heads; ++h)
          for (int64_t i = 0; i < c.seq_q; ++i) {
            for (int64_t d = 0; d < 8; ++d) CHECK(o.at(0, h, i, d) == 0.0);
            const double lse = o.lse[static_cast<std::size_t>(h * c.seq_q + i)];
            CHECK(lse == (modifiers ? static_cast<double>(c.sinks[static_cast<std::size_t>(h)])
                                    : -std::numeric_limits<double>::infinity()));
          }
        // When no rule measures from the bottom-right diagonal (which depends on seq_k), the padded
        // dense batch with kv_lengths is the same problem.
        const bool top_left_only = options.causal == Causal::top_left ||
                                   (options.causal == Causal::none && !options.window && !modifiers);
        if (top_left_only)
          check_agree(o, reference::attention(c.dense(true)));
      }
    }
  }

  TEST_CASE("paged reference: an append across a page boundary is written, then attended") {
    std::mt19937 rng(1403);
    // Page size 4: sequence 0 holds 3 tokens and appends 3 (tokens 3 | 4, 5: pages 0 then 5);
    // sequence 1 holds 6 and appends 3 (tokens 6, 7 | 8: pages 3 then 2). Dense K holds all 9 tokens.
    PagedCase c(rng, 2, 4, 2, 3, 8, 4, 4, 7, 3, 9);
    c.cache_lens = {3, 6};
    c.block_table = {0, 5, 1, /**/ 4, 3, 2};
    c.scatter();  // the cached tokens only (0 .. cache_lens - 1)
    const TensorLayout k_new_layout = TensorLayout::bhsd(DType::f32, 2, 2, 3, 8);
    const TensorLayout v_new_layout = TensorLayout::bhsd(DType::f32, 2, 2, 3, 4);
    std::vector<float> k_new(static_cast<std::size_t>(k_new_layout.element_count()));
    std::vector<float> v_new(static_cast<std::size_t>(v_new_layout.element_count()));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t g = 0; g < 2; ++g)
        for (int64_t s = 0; s < 3; ++s) {
          const int64_t t = c.cache_lens[static_cast<std::size_t>(b)] + s;
          for (int64_t d = 0; d < 8; ++d)
            k_new[static_cast<std::size_t>(k_new_layout.index(b, g, s, d))] =
                c.k[static_cast<std::size_t>(((b * 2 + g) * 9 + t) * 8 + d)];
          for (int64_t d = 0; d < 4; ++d)
            v_new[static_cast<std::size_t>(v_new_layout.index(b, g, s, d))] =
                c.v[static_cast<std::size_t>(((b * 2 + g) * 9 + t) * 4 + d)];
        }
    for (const Causal causal : {Causal::none, Causal::bottom_right}) {
      c.options.causal = causal;
      reference::PagedInputs in = c.paged();
      in.k_new_layout = k_new_layout;
      in.v_new_layout = v_new_layout;
      in.k_new = k_new;
      in.v_new = v_new;
      const reference::PagedOutputs o = reference::paged_attention(in);

      // The caches after: the appended rows where the table puts them, every other row unchanged.
      PagedCase after = c;
      after.cache_lens = {6, 9};
      after.scatter();
      for (std::size_t i = 0; i < o.k_cache.size(); ++i) {
        INFO("k_cache element " << i);
        CHECK((std::isnan(after.k_cache[i]) ? std::isnan(o.k_cache[i]) : o.k_cache[i] == after.k_cache[i]));
      }
      for (std::size_t i = 0; i < o.v_cache.size(); ++i)
        CHECK((std::isnan(after.v_cache[i]) ? std::isnan(o.v_cache[i]) : o.v_cache[i] == after.v_cache[i]));
      // Attention over 6 and 9 keys: each sequence as its dense problem.
      for (int64_t b = 0; b < 2; ++b) {
        const reference::Outputs d = after.dense_sequence(b);
        const std::size_t rows = static_cast<std::size_t>(c.heads * c.seq_q);
        CHECK(max_diff(std::vector<double>(o.out.begin() + b * rows * 4, o.out.begin() + (b + 1) * rows * 4), d.out) <=
              1e-12);
        CHECK(max_diff(std::vector<double>(o.lse.begin() + b * rows, o.lse.begin() + (b + 1) * rows), d.lse) <= 1e-12);
      }
    }
  }

  TEST_CASE("paged reference: q8_0 caches are the dense problem on their dequantized values") {
    std::mt19937 rng(1404);
    PagedCase c(rng, 2, 4, 2, 2, 64, 32, 16, 6, 3, 40);
    c.cache_lens = {40, 23};
    c.shuffled_table(rng);
    c.scatter();
    // Unused rows are zero here: q8_0 holds finite values only.
    for (float& x : c.k_cache) x = std::isnan(x) ? 0.0f : x;
    for (float& x : c.v_cache) x = std::isnan(x) ? 0.0f : x;
    const std::vector<uint8_t> k_bytes = quantize_q8_0(c.k_cache, 64);
    const std::vector<uint8_t> v_bytes = quantize_q8_0(c.v_cache, 32);
    reference::PagedInputs in = c.paged();
    in.k_cache_layout.quant = in.v_cache_layout.quant = KvQuant::q8_0;
    in.k_cache = {{}, k_bytes};
    in.v_cache = {{}, v_bytes};
    c.options.causal = Causal::bottom_right;
    in.options = c.options;
    const reference::PagedOutputs o = reference::paged_attention(in);
    // The same pages holding the dequantized values, as f32.
    PagedCase f32 = c;
    f32.k_cache = dequantize_q8_0(k_bytes);
    f32.v_cache = dequantize_q8_0(v_bytes);
    check_agree(o, reference::paged_attention(f32.paged()));
    CHECK(o.k_cache == f32.k_cache);

    // An append into a q8_0 cache stores each row quantized: the caches after hold q(x) dequantized.
    const TensorLayout k_new_layout = TensorLayout::bhsd(DType::f32, 2, 2, 1, 64);
    const TensorLayout v_new_layout = TensorLayout::bhsd(DType::f32, 2, 2, 1, 32);
    const std::vector<float> k_new = random_values(rng, 2 * 2 * 64), v_new = random_values(rng, 2 * 2 * 32);
    c.cache_lens = {30, 23};  // sequence 0 rewrites token 30 of its own: fine, it is its own row
    in.cache_lens = c.cache_lens;
    in.k_new_layout = k_new_layout;
    in.v_new_layout = v_new_layout;
    in.k_new = k_new;
    in.v_new = v_new;
    const reference::PagedOutputs a = reference::paged_attention(in);
    const std::vector<float> k_row = dequantize_q8_0(quantize_q8_0(std::span<const float>(k_new).subspan(64, 64), 64));
    const int32_t page = c.block_table[static_cast<std::size_t>(1)];  // sequence 0, token 30: entry 1, row 14
    const int64_t at = in.k_cache_layout.index(page, 14, 1, 0);
    CHECK(std::equal(k_row.begin(), k_row.end(), a.k_cache.begin() + at));
  }
}
