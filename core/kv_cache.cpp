// check_paged_attention and check_paged_values: the paged cache's own rules, then the dense rules
// (check_attention) for Q, O and the options, so that both layouts word a bad option the same way.
#include "vkattn/kv_cache.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_map>

#include "layout_check.hpp"
#include "size_check.hpp"
#include "vkattn/error.hpp"
#include "vkattn/q8_0.hpp"

namespace vkattn {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

void check_equal(const std::string& a_name, int64_t a, const std::string& b_name, int64_t b) {
  if (a != b) fail(a_name + " (" + str(a) + ") must equal " + b_name + " (" + str(b) + ")");
}

void check_cache(const char* name, const PagedKvLayout& c, DType q_dtype) {
  const std::string n(name);
  const std::array<std::pair<const char*, int64_t>, 4> sizes = {
      {{"num_pages", c.num_pages}, {"page_size", c.page_size}, {"kv_heads", c.kv_heads}, {"dim", c.dim}}};
  for (const auto& [field, value] : sizes)
    if (value < 1) fail(n + "." + field + " (" + str(value) + ") must be at least 1");
  if (c.quant != KvQuant::none && c.quant != KvQuant::q8_0)
    fail(n + ".quant: invalid value " + str(static_cast<int>(c.quant)));
  if (c.order != PageOrder::nhd && c.order != PageOrder::hnd)
    fail(n + ".order: invalid value " + str(static_cast<int>(c.order)));
  if (c.dtype != q_dtype)
    fail(n + ".dtype (" + to_string(c.dtype) + ") must equal q.dtype (" + to_string(q_dtype) + ")");
  if (c.dim > kMaxHeadDim) fail(n + ".dim (" + str(c.dim) + ") exceeds the maximum head dim " + str(kMaxHeadDim));
  if (c.quant == KvQuant::q8_0 && c.dim % kQ8_0BlockElements != 0)
    fail(n + ".dim (" + str(c.dim) + ") must be a multiple of 32 for q8_0 (its blocks are 32 elements of a row)");
  if (c.row_stride != 0 && c.row_stride < c.dim)
    fail(n + ".row_stride (" + str(c.row_stride) + ") must be 0 (rows of dim elements) or at least " + n + ".dim (" +
         str(c.dim) + ")");
  if (c.quant == KvQuant::q8_0 && c.row_stride % kQ8_0BlockElements != 0)
    fail(n + ".row_stride (" + str(c.row_stride) + ") must be a multiple of 32 for q8_0 (rows of whole blocks)");
  detail::checked_product(n, {c.num_pages, c.page_size, c.kv_heads, c.row_elements()});
}

void check_appended(const char* name, const TensorLayout& t, const TensorLayout& q, const PagedKvLayout& cache,
                    const char* cache_name) {
  const std::string n(name);
  detail::check_tensor_layout(name, t);
  if (t.dtype != q.dtype) fail(n + ".dtype (" + to_string(t.dtype) + ") must equal q.dtype (" + to_string(q.dtype) + ")");
  check_equal(n + ".batch", t.batch, "q.batch", q.batch);
  check_equal(n + ".heads", t.heads, std::string(cache_name) + ".kv_heads", cache.kv_heads);
  check_equal(n + ".dim", t.dim, std::string(cache_name) + ".dim", cache.dim);
}

// shared_prefix_pages: the prefix must be visible, whole, to every query row of every sequence, and
// a GQA group's query rows of a sequence must be one run of Q (the prefix pass reads them as one
// head's rows).
void check_cascade(const PagedAttentionLayouts& l, int64_t seq_new) {
  const int64_t n = l.shared_prefix_pages;
  if (n == 0) return;
  const std::string name = "shared_prefix_pages (" + str(n) + ")";
  if (n < 0) fail(name + " must be >= 0");
  if (n >= l.max_pages)
    fail(name + " must be below max_pages (" + str(l.max_pages) + "): each sequence's own pages follow the prefix");
  const AttentionOptions& o = l.options;
  if (o.window) fail(name + ": a sliding window sees a prefix key or not by each row's position; cascade takes none");
  if (l.alibi) fail(name + ": ALiBi biases a prefix key by each row's position; cascade takes none");
  if (o.causal == Causal::top_left)
    fail(name + ": top-left causal hides prefix keys from the first rows; cascade takes bottom-right or none");
  if (o.causal == Causal::bottom_right && l.q.seq > seq_new + 1)
    fail(name + ": bottom-right causal with seq_q (" + str(l.q.seq) + ") > seq_new + 1 (" + str(seq_new + 1) +
         ") hides prefix keys from the first rows when a sequence holds no more than the prefix");
  if (o.dropout && o.dropout->p > 0.0f) fail(name + ": dropout is not taken with cascade");
  const bool grouped = l.k_cache.kv_heads > 0 && l.q.heads / l.k_cache.kv_heads > 1;
  if (grouped && l.q.seq > 1 && l.q.stride_head != l.q.seq * l.q.stride_seq)
    fail(name + ": the prefix pass reads a GQA group's query rows as one run, so q.stride_head (" + str(l.q.stride_head) +
         ") must equal seq_q * q.stride_seq (" + str(l.q.seq) + " * " + str(l.q.stride_seq) + ")");
}

}  // namespace

const char* to_string(PageOrder order) {
  switch (order) {
    case PageOrder::nhd:
      return "nhd";
    case PageOrder::hnd:
      return "hnd";
  }
  return "invalid";
}

PagedKvLayout PagedKvLayout::dense(DType dtype, int64_t num_pages, int64_t page_size, int64_t kv_heads, int64_t dim,
                                   KvQuant quant, PageOrder order) {
  return PagedKvLayout{dtype, quant, num_pages, page_size, kv_heads, dim, order};
}

int64_t PagedKvLayout::required_bytes() const {
  const int64_t elements = element_count();
  return quant == KvQuant::q8_0 ? q8_0_bytes(elements) : elements * static_cast<int64_t>(dtype_size(dtype));
}

std::string PagedKvLayout::describe() const {
  std::ostringstream s;
  const std::array<int64_t, 4> shape = storage_shape();
  s << (quant == KvQuant::q8_0 ? "q8_0" : to_string(dtype)) << (order == PageOrder::hnd ? " hnd" : "") << " ("
    << shape[0] << ", " << shape[1] << ", " << shape[2] << ", " << shape[3] << ")";
  if (row_stride != 0 && row_stride != dim) s << " of rows " << row_stride;
  return s.str();
}

PagedProblem check_paged_attention(const PagedAttentionLayouts& l) {
  detail::check_tensor_layout("q", l.q);
  detail::check_tensor_layout("out", l.out);
  check_cache("k_cache", l.k_cache, l.q.dtype);
  check_cache("v_cache", l.v_cache, l.q.dtype);
  check_equal("v_cache.num_pages", l.v_cache.num_pages, "k_cache.num_pages", l.k_cache.num_pages);
  check_equal("v_cache.page_size", l.v_cache.page_size, "k_cache.page_size", l.k_cache.page_size);
  check_equal("v_cache.kv_heads", l.v_cache.kv_heads, "k_cache.kv_heads", l.k_cache.kv_heads);
  if (l.v_cache.quant != l.k_cache.quant)
    fail(std::string("v_cache.quant (") + to_string(l.v_cache.quant) + ") must equal k_cache.quant (" +
         to_string(l.k_cache.quant) + ")");
  if (l.v_cache.order != l.k_cache.order)
    fail(std::string("v_cache.order (") + to_string(l.v_cache.order) + ") must equal k_cache.order (" +
         to_string(l.k_cache.order) + ")");
  check_equal("k_cache.dim", l.k_cache.dim, "q.dim", l.q.dim);
  if (l.q.heads % l.k_cache.kv_heads != 0)
    fail("k_cache.kv_heads (" + str(l.k_cache.kv_heads) + ") must divide q.heads (" + str(l.q.heads) +
         ") (GQA requires heads % kv_heads == 0)");

  if (l.max_pages < 1) fail("max_pages (" + str(l.max_pages) + ") must be at least 1");
  // The device indexes the table with 32 bits (b * max_pages + page), and check_paged_values sizes it
  // as batch * max_pages: both must be exact.
  int64_t table_entries = 0;
  if (l.q.batch >= 1 && (__builtin_mul_overflow(l.q.batch, l.max_pages, &table_entries) ||
                         table_entries > std::numeric_limits<int32_t>::max()))
    fail("the block table's entries batch * max_pages (" + str(l.q.batch) + " * " + str(l.max_pages) +
         ") exceed 2^31 - 1");
  // Token positions and cache_lens are int32 on the device.
  int64_t capacity = 0;
  if (__builtin_mul_overflow(l.max_pages, l.k_cache.page_size, &capacity) ||
      capacity > std::numeric_limits<int32_t>::max())
    fail("the block table's capacity max_pages * page_size (" + str(l.max_pages) + " * " + str(l.k_cache.page_size) +
         ") exceeds 2^31 - 1 tokens (cache_lens are int32)");

  int64_t seq_new = 0;
  if (l.v_new && !l.k_new) fail("v_new alone was given: give k_new and v_new, or k_new alone (v_cache a view of k_cache)");
  if (l.k_new && !l.v_new && !l.v_views_k())
    fail("k_new alone was given, but v_cache (" + l.v_cache.describe() + ") is not a view of k_cache's rows (" +
         l.k_cache.describe() + "): give v_new too, or describe v_cache as k_cache.prefix_view(dim_v)");
  if (l.k_new) {
    check_appended("k_new", *l.k_new, l.q, l.k_cache, "k_cache");
    if (l.v_new) {
      check_appended("v_new", *l.v_new, l.q, l.v_cache, "v_cache");
      check_equal("v_new.seq", l.v_new->seq, "k_new.seq", l.k_new->seq);
    }
    seq_new = l.k_new->seq;
    if (seq_new > capacity)
      fail("k_new.seq (" + str(seq_new) + ") exceeds the block table's capacity max_pages * page_size = " +
           str(l.max_pages) + " * " + str(l.k_cache.page_size) + " = " + str(capacity));
  }

  check_cascade(l, seq_new);

  // The dense rules for Q, O, the options and the modifiers: K and V stand in as one key per
  // sequence (the key count is per sequence; nothing below depends on it).
  AttentionLayouts dense;
  dense.q = l.q;
  dense.k = TensorLayout::bhsd(l.q.dtype, l.q.batch, l.k_cache.kv_heads, 1, l.k_cache.dim);
  dense.v = TensorLayout::bhsd(l.q.dtype, l.q.batch, l.v_cache.kv_heads, 1, l.v_cache.dim);
  dense.out = l.out;
  dense.has_lse = l.has_lse;
  dense.options = l.options;
  dense.per_head() = l.per_head();

  PagedProblem p;
  p.attention = check_attention(dense);
  p.attention.seq_k = capacity;
  p.num_pages = l.k_cache.num_pages;
  p.page_size = l.k_cache.page_size;
  p.max_pages = l.max_pages;
  p.seq_new = seq_new;
  p.appends_v = l.v_new.has_value();
  p.shared_prefix_pages = l.shared_prefix_pages;
  p.quant = l.k_cache.quant;
  return p;
}

void check_paged_values(const PagedProblem& p, std::span<const int32_t> block_table,
                        std::span<const int32_t> cache_lens) {
  const int64_t batch = p.attention.batch;
  detail::check_size("block_table", block_table.size(), batch * p.max_pages,
                     detail::shape_string({batch, p.max_pages}), " (batch, max_pages)");
  detail::check_size("cache_lens", cache_lens.size(), batch, detail::shape_string({batch}), " (one per sequence)");

  const auto entry_of = [&](int64_t b, int64_t i) { return block_table[static_cast<std::size_t>(b * p.max_pages + i)]; };
  const std::string capacity_text = "the block table's capacity max_pages * page_size = " + str(p.max_pages) +
                                    " * " + str(p.page_size) + " = " + str(p.capacity());
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = cache_lens[static_cast<std::size_t>(b)];
    const std::string entry = "cache_lens[" + str(b) + "] (" + str(len) + ")";
    if (len < 0) fail(entry + " must be >= 0");
    if (len + p.seq_new > p.capacity()) {
      if (p.has_append())
        fail(entry + " + k_new.seq (" + str(p.seq_new) + ") = " + str(len + p.seq_new) + " exceeds " + capacity_text);
      fail(entry + " exceeds " + capacity_text);
    }
    if (len < p.prefix_tokens())
      fail(entry + " is shorter than the shared prefix: shared_prefix_pages * page_size = " +
           str(p.shared_prefix_pages) + " * " + str(p.page_size) + " = " + str(p.prefix_tokens()));
    for (int64_t i = 0; i < p.shared_prefix_pages; ++i)
      if (entry_of(b, i) != entry_of(0, i))
        fail("block_table[" + str(b) + "][" + str(i) + "] (" + str(entry_of(b, i)) + ") differs from block_table[0][" +
             str(i) + "] (" + str(entry_of(0, i)) + "): the first shared_prefix_pages (" + str(p.shared_prefix_pages) +
             ") entries are every sequence's");
    const int64_t pages = (len + p.seq_new + p.page_size - 1) / p.page_size;
    for (int64_t i = 0; i < pages; ++i) {
      const int32_t page = entry_of(b, i);
      if (page < 0 || page >= p.num_pages)
        fail("block_table[" + str(b) + "][" + str(i) + "] (" + str(page) + ") is not a page: must be in [0, " +
             str(p.num_pages) + ") (k_cache.num_pages); sequence " + str(b) + " uses its first " + str(pages) +
             " entries");
    }
  }
  if (!p.has_append()) return;

  // Who holds each cache row: an appended row must be its own token's alone, or two writers (or a
  // writer and a reader) would race on it.
  struct Holders {
    int64_t count = 0, b = 0, t = 0, other_b = 0, other_t = 0;
  };
  std::unordered_map<int64_t, Holders> rows;
  const auto row_of = [&](int64_t b, int64_t t) {
    return static_cast<int64_t>(block_table[static_cast<std::size_t>(b * p.max_pages + t / p.page_size)]) *
               p.page_size + t % p.page_size;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < cache_lens[static_cast<std::size_t>(b)] + p.seq_new; ++t) {
      Holders& h = rows[row_of(b, t)];
      if (h.count == 0) h.b = b, h.t = t;
      if (h.count == 1) h.other_b = b, h.other_t = t;
      ++h.count;
    }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = cache_lens[static_cast<std::size_t>(b)];
    for (int64_t t = len; t < len + p.seq_new; ++t) {
      const int64_t row = row_of(b, t);
      const Holders& h = rows[row];
      if (h.count == 1) continue;
      const bool first_is_me = h.b == b && h.t == t;
      fail("block_table: sequence " + str(b) + " appends token " + str(t) + " at page " + str(row / p.page_size) +
           " row " + str(row % p.page_size) + ", which token " + str(first_is_me ? h.other_t : h.t) + " of sequence " +
           str(first_is_me ? h.other_b : h.b) + " also maps to: an appended row must belong to its own token alone");
    }
  }
}

int64_t shared_prefix_pages(std::span<const int32_t> block_table, std::span<const int32_t> cache_lens,
                            int64_t max_pages, int64_t page_size) {
  const int64_t batch = static_cast<int64_t>(cache_lens.size());
  if (batch < 2 || max_pages < 1 || page_size < 1) return 0;
  detail::check_size("block_table", block_table.size(), batch * max_pages, detail::shape_string({batch, max_pages}),
                     " (batch, max_pages)");
  int64_t pages = max_pages - 1;  // a sequence's own pages follow the prefix
  for (int64_t b = 0; b < batch; ++b) {
    pages = std::min<int64_t>(pages, std::max<int64_t>(cache_lens[static_cast<std::size_t>(b)], 0) / page_size);
    int64_t i = 0;
    while (i < pages && block_table[static_cast<std::size_t>(b * max_pages + i)] == block_table[static_cast<std::size_t>(i)]) ++i;
    pages = i;
  }
  return pages;
}

}  // namespace vkattn
