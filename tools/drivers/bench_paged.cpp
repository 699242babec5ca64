#include "bench_paged.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "bench_metrics.hpp"
#include "bench_serving.hpp"
#include "conform/q8_0_blocks.hpp"
#include "vkattn/kv_cache.hpp"
#include "vkattn/paged_attention.hpp"

namespace vkattn::cli {
namespace {

// The sequences' pages handed out from a shuffled pool of `num_pages`: table (batch, max_pages),
// -1 past each sequence's last page; the first `shared` entries of every row are row 0's.
std::vector<int32_t> block_table(const std::vector<int64_t>& pages, int64_t shared, int64_t num_pages, int64_t max_pages,
                                 std::mt19937_64& rng) {
  std::vector<int32_t> order(static_cast<std::size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> table(pages.size() * static_cast<std::size_t>(max_pages), -1);
  std::size_t next = 0;
  for (std::size_t b = 0; b < pages.size(); ++b)
    for (int64_t i = 0; i < pages[b]; ++i)
      table[b * static_cast<std::size_t>(max_pages) + static_cast<std::size_t>(i)] =
          b > 0 && i < shared ? table[static_cast<std::size_t>(i)] : order[next++];
  return table;
}

// Random values for every row of the cache, then NaN in the rows no sequence holds (past each
// sequence's last token in its last page; the whole pool when every sequence is empty).
std::vector<float> cache_values(const PagedKvLayout& layout, const std::vector<int32_t>& table,
                                const std::vector<int64_t>& lengths, int64_t max_pages, DType dtype,
                                std::mt19937_64& rng) {
  std::vector<float> values = random_values(static_cast<std::size_t>(layout.element_count()), dtype, rng);
  std::vector<int64_t> rows_used(static_cast<std::size_t>(layout.num_pages), 0);
  for (std::size_t b = 0; b < lengths.size(); ++b)
    for (int64_t t = 0; t < lengths[b]; t += layout.page_size) {
      const int32_t page = table[b * static_cast<std::size_t>(max_pages) + static_cast<std::size_t>(t / layout.page_size)];
      rows_used[static_cast<std::size_t>(page)] = std::min(layout.page_size, lengths[b] - t);
    }
  for (int64_t p = 0; p < layout.num_pages; ++p)
    for (int64_t s = rows_used[static_cast<std::size_t>(p)]; s < layout.page_size; ++s)
      for (int64_t g = 0; g < layout.kv_heads; ++g)
        std::fill_n(values.begin() + layout.index(p, s, g, 0), layout.dim, std::numeric_limits<float>::quiet_NaN());
  return values;
}

}  // namespace

BenchResult bench_paged(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype) {
  const int64_t batch = shape.batch, page_size = shape.page_size;
  const std::vector<int64_t> lengths = sequence_lengths(shape);
  std::vector<int64_t> pages(lengths.size());
  const int64_t shared = shape.shared_prefix / page_size;  // pages every sequence starts with
  for (const int64_t len : lengths)
    if (len < shape.shared_prefix)
      throw Error("--shared-prefix " + std::to_string(shape.shared_prefix) + " exceeds a sequence's length (" +
                  std::to_string(len) + ")");
  int64_t total_pages = 0, max_pages = 1;
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    pages[b] = (lengths[b] + page_size - 1) / page_size;
    total_pages += pages[b] - (b > 0 ? shared : 0);
    max_pages = std::max(max_pages, pages[b]);
  }
  if (shared > 0) max_pages += 1;  // a column past the longest: the cascade's prefix is below max_pages
  const int64_t num_pages = std::max<int64_t>(total_pages, 1);  // just big enough

  PagedAttentionLayouts layouts;
  layouts.q = TensorLayout::bhsd(dtype, batch, shape.heads, shape.seq_q, shape.dim_qk);
  layouts.k_cache =
      PagedKvLayout::dense(dtype, num_pages, page_size, shape.kv_heads, shape.dim_qk, shape.kv_quant, shape.page_order);
  layouts.v_cache = shape.v_views_k ? layouts.k_cache.prefix_view(shape.dim_v)
                                    : PagedKvLayout::dense(dtype, num_pages, page_size, shape.kv_heads, shape.dim_v,
                                                           shape.kv_quant, shape.page_order);
  layouts.max_pages = max_pages;
  layouts.out = TensorLayout::bhsd(dtype, batch, shape.heads, shape.seq_q, shape.dim_v);
  apply_shape_options(shape, layouts);
  layouts.path = shape.path;
  std::mt19937_64 rng(o.seed);
  const std::vector<int32_t> table = block_table(pages, shared, num_pages, max_pages, rng);
  const std::vector<int32_t> lens(lengths.begin(), lengths.end());
  // The cascade where the table shares a prefix (found from it, as a runtime would from its own).
  if (shape.cascade) layouts.shared_prefix_pages = shared_prefix_pages(table, lens, max_pages, page_size);
  BenchResult result;
  result.shape = shape;
  result.dtype = dtype;
  const PagedProblem problem = check_paged_attention(layouts);  // before generating the values
  const uint64_t esize = dtype_size(dtype);
  const uint64_t q_bytes = static_cast<uint64_t>(layouts.q.element_count()) * esize;
  const uint64_t out_bytes = static_cast<uint64_t>(layouts.out.element_count()) * esize;
  const uint64_t k_bytes = static_cast<uint64_t>(layouts.k_cache.required_bytes());
  const uint64_t v_bytes = shape.v_views_k ? 0 : static_cast<uint64_t>(layouts.v_cache.required_bytes());
  const uint64_t table_bytes = static_cast<uint64_t>(batch * max_pages) * 4, lens_bytes = static_cast<uint64_t>(batch) * 4;
  check_shape_fits(o, context.device_info(), {q_bytes, k_bytes, v_bytes, out_bytes, table_bytes, lens_bytes});

  const std::vector<float> q = random_values(static_cast<std::size_t>(layouts.q.element_count()), dtype, rng);
  std::vector<float> k = cache_values(layouts.k_cache, table, lengths, max_pages, dtype, rng);
  // --v-view: V's values are K's as the device holds them (one cache; its buffer is bound as both), below.
  std::vector<float> v;
  if (!shape.v_views_k) v = cache_values(layouts.v_cache, table, lengths, max_pages, dtype, rng);
  // --kv-dtype q8_0: the caches uploaded as blocks (a NaN row no sequence holds: blocks of NaN
  // scale); k and v become the values the blocks hold.
  std::vector<uint8_t> k_blocks, v_blocks;
  if (shape.kv_quant == KvQuant::q8_0) {
    k_blocks = conform::to_q8_0_blocks(k);
    if (!shape.v_views_k) v_blocks = conform::to_q8_0_blocks(v);
  }
  if (shape.v_views_k) v = k;

  const ServingValues values{.q = q, .k = k, .v = v, .k_blocks = k_blocks, .v_blocks = v_blocks, .ints_a = table,
                             .ints_b = lens, .q_bytes = q_bytes, .k_bytes = k_bytes, .v_bytes = v_bytes,
                             .out_bytes = out_bytes, .out_elements = layouts.out.element_count(),
                             .v_is_k = shape.v_views_k};
  const auto check = [&](std::span<const float> out, const PerHeadValues& per_head) {
    // (q8_0: the reference reads the values the blocks hold, k and v.)
    PagedAttentionLayouts as_values = layouts;
    as_values.k_cache.quant = as_values.v_cache.quant = KvQuant::none;
    PagedCheckInputs in;
    in.layouts = &as_values;
    in.q = q;
    in.k_cache = k;
    in.v_cache = v;
    in.block_table = table;
    in.cache_lens = lens;
    in.per_head = per_head;
    return check_paged_against_reference(in, out);
  };
  run_serving_bench(context, o, shape, dtype, AttentionSpec::paged(layouts), values,
                    credited_flops(problem.attention, lengths, true), check, result);
  return result;
}

}  // namespace vkattn::cli
