// libFuzzer target for the paged KV cache's checks (core/kv_cache.cpp): check_paged_attention on
// PagedAttentionLayouts (caches of any pages, page size, heads, dim, row stride, quant and order, enum
// values outside their range, max_pages, an append (k_new alone too), a shared prefix, sizes anywhere
// in int64, the score modifiers at their edges: fuzz_modifiers.hpp), then check_paged_values on block tables and cache lengths of bounded
// length (mostly valid, sometimes any int32). Each must return or throw vkattn::Error with a one-line
// message; never crash, overflow (UBSan) or accept what the contract (kv_cache.hpp) refuses. Only the
// checks run: nothing is allocated from the claimed sizes.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "fuzz_modifiers.hpp"
#include "fuzz_values.hpp"
#include "vkattn/error.hpp"
#include "vkattn/kv_cache.hpp"
#include "vkattn/q8_0.hpp"

namespace {

using vkattn::PagedKvLayout;
using vkattn::TensorLayout;

using vkattn::fuzz::any_enum;
using vkattn::fuzz::interesting;

int64_t same_or_any(FuzzedDataProvider& f, int64_t same) {
  return f.ConsumeIntegralInRange<int>(0, 3) != 0 ? same : interesting(f);
}

// A dense BHSD tensor, sometimes with fuzzed strides and offset.
TensorLayout tensor(FuzzedDataProvider& f, vkattn::DType dtype, int64_t b, int64_t h, int64_t s, int64_t d) {
  TensorLayout t = TensorLayout::bhsd(f.ConsumeIntegralInRange<int>(0, 7) ? dtype : any_enum<vkattn::DType>(f, 3),
                                      same_or_any(f, b), same_or_any(f, h), same_or_any(f, s), same_or_any(f, d));
  if (f.ConsumeIntegralInRange<int>(0, 7) == 0) {
    t.stride_batch = interesting(f);
    t.stride_head = interesting(f);
    t.stride_seq = interesting(f);
    t.offset = interesting(f);
  }
  return t;
}

PagedKvLayout cache(FuzzedDataProvider& f, vkattn::DType dtype, int64_t pages, int64_t page_size, int64_t kv_heads,
                    int64_t dim, vkattn::KvQuant quant, vkattn::PageOrder order) {
  return PagedKvLayout::dense(f.ConsumeIntegralInRange<int>(0, 7) ? dtype : any_enum<vkattn::DType>(f, 3),
                              same_or_any(f, pages), same_or_any(f, page_size), same_or_any(f, kv_heads),
                              same_or_any(f, dim), f.ConsumeIntegralInRange<int>(0, 7) ? quant : any_enum<vkattn::KvQuant>(f, 2),
                              f.ConsumeIntegralInRange<int>(0, 7) ? order : any_enum<vkattn::PageOrder>(f, 2));
}

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_paged_args: accepted arguments break the contract: %s\n", what);
  std::abort();
}

void one_line(const vkattn::Error& e) {
  const std::string message = e.what();
  if (message.empty() || message.find('\n') != std::string::npos) {
    std::fprintf(stderr, "fuzz_paged_args: an error message that is not one line: '%s'\n", message.c_str());
    std::abort();
  }
}

void check_accepted(const vkattn::PagedAttentionLayouts& l, const vkattn::PagedProblem& p) {
  for (const PagedKvLayout* c : {&l.k_cache, &l.v_cache}) {
    if (c->num_pages < 1 || c->page_size < 1 || c->kv_heads < 1 || c->dim < 1 || c->dim > vkattn::kMaxHeadDim)
      violated("a cache size outside its range");
    if (c->dtype != l.q.dtype) violated("a cache dtype other than q's");
    if (c->quant == vkattn::KvQuant::q8_0 && c->dim % vkattn::kQ8_0BlockElements != 0) violated("q8_0 of a partial block");
    if (c->quant != vkattn::KvQuant::none && c->quant != vkattn::KvQuant::q8_0) violated("an invalid quant");
    if (c->order != vkattn::PageOrder::nhd && c->order != vkattn::PageOrder::hnd) violated("an invalid page order");
    if (c->row_stride != 0 && c->row_stride < c->dim) violated("rows narrower than the dim");
    if (c->quant == vkattn::KvQuant::q8_0 && c->row_stride % vkattn::kQ8_0BlockElements != 0) violated("q8_0 rows of a partial block");
  }
  if (l.k_cache.num_pages != l.v_cache.num_pages || l.k_cache.page_size != l.v_cache.page_size ||
      l.k_cache.kv_heads != l.v_cache.kv_heads || l.k_cache.quant != l.v_cache.quant || l.k_cache.order != l.v_cache.order)
    violated("caches that disagree");
  if (l.max_pages < 1 || p.capacity() > std::numeric_limits<int32_t>::max() || p.capacity() < 1)
    violated("a capacity outside 1..2^31-1");
  if (p.num_pages != l.k_cache.num_pages || p.page_size != l.k_cache.page_size || p.max_pages != l.max_pages)
    violated("a problem other than the layouts");
  if (l.v_new && !l.k_new) violated("v_new without k_new");
  if (l.k_new && !l.v_new && !l.v_views_k()) violated("k_new alone where V is not a view of K's rows");
  if (p.appends_v != l.v_new.has_value()) violated("appends_v other than the layouts'");
  if (p.shared_prefix_pages != l.shared_prefix_pages) violated("a shared prefix other than the layouts'");
  if (l.shared_prefix_pages != 0) {
    if (l.shared_prefix_pages < 0 || l.shared_prefix_pages >= l.max_pages) violated("a shared prefix out of range");
    if (l.options.window || l.alibi || l.options.causal == vkattn::Causal::top_left ||
        (l.options.causal == vkattn::Causal::bottom_right && l.q.seq > p.seq_new + 1))
      violated("a shared prefix some row cannot see whole");
  }
  if (p.seq_new < 0 || p.seq_new > p.capacity() || (l.k_new && p.seq_new != l.k_new->seq)) violated("a bad seq_new");
  const vkattn::AttentionProblem& a = p.attention;
  if (a.kv_heads != l.k_cache.kv_heads || a.kv_heads < 1 || a.heads % a.kv_heads != 0) violated("heads not divisible");
  if (a.seq_k != p.capacity()) violated("seq_k other than the capacity");
  if (const char* what = vkattn::fuzz::modifiers_violation(l.options, l.alibi, l.sinks, a, a.batch)) violated(what);
}

// Brute force over the accepted values: lengths in range, used table entries pages, appended rows
// held by their own token alone.
void check_values_accepted(const vkattn::PagedProblem& p, const std::vector<int32_t>& table,
                           const std::vector<int32_t>& lens) {
  const int64_t batch = p.attention.batch;
  std::map<int64_t, int> holders;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[std::size_t(b)] + p.seq_new;
    if (lens[std::size_t(b)] < 0 || len > p.capacity()) violated("a cache length out of range");
    if (lens[std::size_t(b)] < p.prefix_tokens()) violated("a sequence shorter than the shared prefix");
    for (int64_t i = 0; i < p.shared_prefix_pages; ++i)
      if (table[std::size_t(b * p.max_pages + i)] != table[std::size_t(i)]) violated("a shared prefix that differs");
    for (int64_t i = 0; i < (len + p.page_size - 1) / p.page_size; ++i) {
      const int32_t page = table[std::size_t(b * p.max_pages + i)];
      if (page < 0 || page >= p.num_pages) violated("a used table entry that is not a page");
    }
    if (p.has_append() && len <= 65536)
      for (int64_t t = 0; t < len; ++t) ++holders[int64_t(table[std::size_t(b * p.max_pages + t / p.page_size)]) * p.page_size + t % p.page_size];
  }
  if (!p.has_append()) return;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = lens[std::size_t(b)]; t < lens[std::size_t(b)] + p.seq_new && t < 65536; ++t)
      if (holders[int64_t(table[std::size_t(b * p.max_pages + t / p.page_size)]) * p.page_size + t % p.page_size] != 1)
        violated("an appended row shared with another token");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  FuzzedDataProvider f(data, size);
  vkattn::PagedAttentionLayouts l;
  const vkattn::DType dtype = any_enum<vkattn::DType>(f, 3);
  const int64_t batch = f.ConsumeBool() ? f.ConsumeIntegralInRange<int64_t>(1, 4) : interesting(f);
  const int64_t heads = interesting(f), kv_heads = f.ConsumeBool() ? heads : interesting(f);
  const int64_t seq_q = interesting(f);
  const int64_t dim = f.ConsumeBool() ? 32 * f.ConsumeIntegralInRange<int64_t>(1, 8) : interesting(f);
  const int64_t dim_v = f.ConsumeBool() ? dim : interesting(f);
  const int64_t pages = f.ConsumeBool() ? f.ConsumeIntegralInRange<int64_t>(1, 16) : interesting(f);
  const int64_t page_size = f.ConsumeBool() ? f.ConsumeIntegralInRange<int64_t>(1, 32) : interesting(f);
  const auto quant = any_enum<vkattn::KvQuant>(f, 2);
  const auto order = any_enum<vkattn::PageOrder>(f, 2);
  l.q = tensor(f, dtype, batch, heads, seq_q, dim);
  l.k_cache = cache(f, dtype, pages, page_size, kv_heads, dim, quant, order);
  l.v_cache = cache(f, dtype, pages, page_size, kv_heads, dim_v, quant, order);
  if (f.ConsumeIntegralInRange<int>(0, 3) == 0) l.k_cache.row_stride = f.ConsumeBool() ? 32 * f.ConsumeIntegralInRange<int64_t>(0, 20) : interesting(f);
  if (f.ConsumeIntegralInRange<int>(0, 3) == 0) {  // V a view of K's rows, or rows of its own
    if (f.ConsumeBool())
      l.v_cache = l.k_cache.prefix_view(dim_v);
    else
      l.v_cache.row_stride = interesting(f);
  }
  l.max_pages = f.ConsumeBool() ? f.ConsumeIntegralInRange<int64_t>(1, 8) : interesting(f);
  if (f.ConsumeBool()) {
    const int64_t seq_new = f.ConsumeBool() ? f.ConsumeIntegralInRange<int64_t>(1, 4) : interesting(f);
    if (f.ConsumeIntegralInRange<int>(0, 7) != 0) l.k_new = tensor(f, dtype, batch, kv_heads, seq_new, dim);
    if (f.ConsumeIntegralInRange<int>(0, 7) != 0) l.v_new = tensor(f, dtype, batch, kv_heads, seq_new, dim_v);
  }
  l.out = tensor(f, dtype, batch, heads, seq_q, dim_v);
  l.has_lse = f.ConsumeBool();
  if (f.ConsumeIntegralInRange<int>(0, 3) == 0) l.shared_prefix_pages = f.ConsumeBool() ? f.ConsumeIntegralInRange<int64_t>(0, 8) : interesting(f);
  l.options.causal = any_enum<vkattn::Causal>(f, 3);
  if (f.ConsumeBool()) l.options.scale = f.ConsumeFloatingPoint<float>();
  vkattn::fuzz::draw_modifiers(f, l.options, l.alibi, l.sinks, batch, heads, interesting);

  try {
    const vkattn::PagedProblem p = vkattn::check_paged_attention(l);
    check_accepted(l, p);
    // check_paged_values visits every table entry and every token of an append (cache_lens[b] +
    // seq_new of each sequence): linear in what the call covers, so the sizes it is fuzzed at are
    // bounded, appends included (an append of 2^20 tokens to 64 sequences ran past the 10 s limit
    // under ASan). Each bound before the product, which could overflow.
    if (p.attention.batch > 64 || p.max_pages > 4096 || p.seq_new > 4096) return 0;
    const int64_t entries = p.attention.batch * p.max_pages;  // both checked >= 1
    if (entries > 4096) return 0;
    // Mostly the right lengths; a table of pages in range (sometimes any int32), lengths mostly
    // within the capacity (bounded with an append: check_paged_values visits every token then).
    std::vector<int32_t> table(f.ConsumeIntegralInRange<int>(0, 7) ? std::size_t(entries) : f.ConsumeIntegralInRange<std::size_t>(0, 64));
    std::vector<int32_t> lens(f.ConsumeIntegralInRange<int>(0, 7) ? std::size_t(p.attention.batch) : f.ConsumeIntegralInRange<std::size_t>(0, 8));
    for (int32_t& x : table)
      x = f.ConsumeIntegralInRange<int>(0, 7) ? f.ConsumeIntegralInRange<int32_t>(0, int32_t(std::min<int64_t>(p.num_pages, 1 << 30) - 1))
                                              : f.ConsumeIntegral<int32_t>();
    const int64_t room = p.capacity() - p.seq_new;
    for (int32_t& x : lens)
      x = f.ConsumeIntegralInRange<int>(0, 7) && room >= 0
              ? f.ConsumeIntegralInRange<int32_t>(0, int32_t(std::min<int64_t>(room, p.has_append() ? 4096 : room)))
              : (p.has_append() ? f.ConsumeIntegralInRange<int32_t>(-2, 4096) : f.ConsumeIntegral<int32_t>());
    try {
      vkattn::check_paged_values(p, table, lens);
      if (table.size() != std::size_t(entries) || lens.size() != std::size_t(p.attention.batch))
        violated("values of the wrong size");
      check_values_accepted(p, table, lens);
    } catch (const vkattn::Error& e) {
      one_line(e);
    }
  } catch (const vkattn::Error& e) {
    one_line(e);
  }
  return 0;
}
