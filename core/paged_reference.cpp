// reference::paged_attention: the append written into a copy of the caches, then each sequence's
// keys gathered page by page into a dense (1, kv_heads, len, dim) problem for reference::attention.
#include <algorithm>
#include <string>

#include "sequence_reference.hpp"
#include "vkattn/error.hpp"
#include "vkattn/q8_0.hpp"

namespace vkattn::reference {
namespace {

// Writes the appended rows of k_new (or v_new) into `cache` at tokens cache_lens[b] + s, quantized
// through q8_0 for a q8_0 cache (what it will hold).
void append(const char* name, const TensorLayout& layout, std::span<const float> values, const PagedKvLayout& cache_layout,
            const PagedProblem& p, std::span<const int32_t> block_table, std::span<const int32_t> cache_lens,
            std::vector<float>& cache) {
  std::vector<float> row(static_cast<std::size_t>(layout.dim));
  for (int64_t b = 0; b < layout.batch; ++b)
    for (int64_t g = 0; g < layout.heads; ++g)
      for (int64_t s = 0; s < layout.seq; ++s) {
        for (int64_t d = 0; d < layout.dim; ++d)
          row[static_cast<std::size_t>(d)] = values[static_cast<std::size_t>(layout.index(b, g, s, d))];
        if (p.quant == KvQuant::q8_0) {
          try {
            row = dequantize_q8_0(quantize_q8_0(row, layout.dim));
          } catch (const Error& e) {
            throw Error(std::string(name) + " row (" + std::to_string(b) + ", " + std::to_string(g) + ", " +
                        std::to_string(s) + ") into the q8_0 cache: " + e.what());
          }
        }
        const int64_t t = cache_lens[static_cast<std::size_t>(b)] + s;
        const int64_t page = block_table[static_cast<std::size_t>(b * p.max_pages + t / p.page_size)];
        const int64_t at = cache_layout.index(page, t % p.page_size, g, 0);
        std::copy(row.begin(), row.end(), cache.begin() + at);
      }
}

// Sequence b's first `len` tokens of a cache as a dense (1, kv_heads, len, dim) array.
std::vector<float> gather(const std::vector<float>& cache, const PagedKvLayout& c, const PagedProblem& p,
                          std::span<const int32_t> block_table, int64_t b, int64_t len) {
  std::vector<float> dense(static_cast<std::size_t>(c.kv_heads * len * c.dim));
  for (int64_t g = 0; g < c.kv_heads; ++g)
    for (int64_t t = 0; t < len; ++t) {
      const int64_t page = block_table[static_cast<std::size_t>(b * p.max_pages + t / p.page_size)];
      const auto from = cache.begin() + c.index(page, t % p.page_size, g, 0);
      std::copy(from, from + c.dim, dense.begin() + (g * len + t) * c.dim);
    }
  return dense;
}

}  // namespace

PagedOutputs paged_attention(const PagedInputs& in) {
  PagedAttentionLayouts l;
  l.q = in.q_layout;
  l.k_cache = in.k_cache_layout;
  l.v_cache = in.v_cache_layout;
  l.max_pages = in.max_pages;
  l.k_new = in.k_new_layout;
  l.v_new = in.v_new_layout;
  l.out = TensorLayout::bhsd(in.q_layout.dtype, in.q_layout.batch, in.q_layout.heads, in.q_layout.seq,
                             in.v_cache_layout.dim);
  l.has_lse = true;
  l.options = in.options;
  l.per_head() = in.layouts();
  const PagedProblem p = check_paged_attention(l);

  detail::check_span("q", in.q.size(), in.q_layout.required_elements());
  if (in.k_new_layout) detail::check_span("k_new", in.k_new.size(), in.k_new_layout->required_elements());
  if (in.v_new_layout) detail::check_span("v_new", in.v_new.size(), in.v_new_layout->required_elements());
  detail::check_head_value_spans(in);
  check_paged_values(p, in.block_table, in.cache_lens);

  PagedOutputs o;
  o.k_cache = detail::kv_values("k_cache", in.k_cache, p.quant, in.k_cache_layout.element_count());
  o.v_cache = detail::kv_values("v_cache", in.v_cache, p.quant, in.v_cache_layout.element_count());
  o.k_cache.resize(static_cast<std::size_t>(in.k_cache_layout.element_count()));
  o.v_cache.resize(static_cast<std::size_t>(in.v_cache_layout.element_count()));
  if (p.has_append()) {
    append("k_new", *in.k_new_layout, in.k_new, in.k_cache_layout, p, in.block_table, in.cache_lens, o.k_cache);
    if (p.appends_v)
      append("v_new", *in.v_new_layout, in.v_new, in.v_cache_layout, p, in.block_table, in.cache_lens, o.v_cache);
    else
      o.v_cache = o.k_cache;  // V is a view of K's rows (k_new alone): it reads what K's append wrote
  }

  const AttentionProblem& a = p.attention;
  o.batch = a.batch;
  o.heads = a.heads;
  o.seq_q = a.seq_q;
  o.dim_v = a.dim_v;
  o.out.resize(static_cast<std::size_t>(a.batch * a.heads * a.seq_q * a.dim_v));
  o.lse.resize(static_cast<std::size_t>(a.batch * a.heads * a.seq_q));
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t len = in.cache_lens[static_cast<std::size_t>(b)] + p.seq_new;
    const std::vector<float> k = gather(o.k_cache, in.k_cache_layout, p, in.block_table, b, len);
    const std::vector<float> v = gather(o.v_cache, in.v_cache_layout, p, in.block_table, b, len);
    detail::Sequence s;
    s.q_layout = in.q_layout;
    s.q_layout.batch = 1;
    s.q_layout.offset += b * in.q_layout.stride_batch;
    s.q = in.q;
    s.k_layout = TensorLayout::bhsd(a.dtype, 1, a.kv_heads, len, a.dim_qk);
    s.v_layout = TensorLayout::bhsd(a.dtype, 1, a.kv_heads, len, a.dim_v);
    s.k = k;
    s.v = v;
    s.seq_k = len;
    const Outputs r = detail::attend(s, in.options, in, b);
    // r is (1, heads, seq_q, ...): batch element b of the outputs, contiguous.
    std::copy(r.out.begin(), r.out.end(), o.out.begin() + b * a.heads * a.seq_q * a.dim_v);
    std::copy(r.lse.begin(), r.lse.end(), o.lse.begin() + b * a.heads * a.seq_q);
  }
  return o;
}

}  // namespace vkattn::reference
