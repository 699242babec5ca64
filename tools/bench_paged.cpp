#include "bench_paged.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "bench_check.hpp"
#include "bench_copy.hpp"
#include "conform/q8_0_blocks.hpp"
#include "bench_metrics.hpp"
#include "bench_timing.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/kv_cache.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/paged_attention.hpp"

namespace vkattn::cli {
namespace {

// One set of device tensors; several are rotated through so the inputs are not cache-resident. The
// block table and the lengths are shared (a few bytes).
struct PagedSet {
  Buffer q, k_cache, v_cache, out;
};

// The sequences' pages handed out from a shuffled pool of `num_pages`: table (batch, max_pages),
// -1 past each sequence's last page.
std::vector<int32_t> block_table(const std::vector<int64_t>& pages, int64_t num_pages, int64_t max_pages,
                                 std::mt19937_64& rng) {
  std::vector<int32_t> order(static_cast<std::size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> table(pages.size() * static_cast<std::size_t>(max_pages), -1);
  std::size_t next = 0;
  for (std::size_t b = 0; b < pages.size(); ++b)
    for (int64_t i = 0; i < pages[b]; ++i) table[b * static_cast<std::size_t>(max_pages) + static_cast<std::size_t>(i)] = order[next++];
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
      std::fill_n(values.begin() + layout.index(p, s, 0, 0), layout.kv_heads * layout.dim,
                  std::numeric_limits<float>::quiet_NaN());
  return values;
}

}  // namespace

BenchResult bench_paged(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype) {
  const int64_t batch = shape.batch, page_size = shape.page_size;
  const std::vector<int64_t> lengths = sequence_lengths(shape);
  std::vector<int64_t> pages(lengths.size());
  int64_t total_pages = 0, max_pages = 1;
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    pages[b] = (lengths[b] + page_size - 1) / page_size;
    total_pages += pages[b];
    max_pages = std::max(max_pages, pages[b]);
  }
  const int64_t num_pages = std::max<int64_t>(total_pages, 1);  // just big enough

  PagedAttentionLayouts layouts;
  layouts.q = TensorLayout::bhsd(dtype, batch, shape.heads, shape.seq_q, shape.dim_qk);
  layouts.k_cache = PagedKvLayout::dense(dtype, num_pages, page_size, shape.kv_heads, shape.dim_qk, shape.kv_quant);
  layouts.v_cache = PagedKvLayout::dense(dtype, num_pages, page_size, shape.kv_heads, shape.dim_v, shape.kv_quant);
  layouts.max_pages = max_pages;
  layouts.out = TensorLayout::bhsd(dtype, batch, shape.heads, shape.seq_q, shape.dim_v);
  layouts.options.causal = shape.causal;
  layouts.options.window = shape.window;
  layouts.options.align = shape.align;
  layouts.options.softcap = shape.softcap;
  layouts.options.num_splits = shape.num_splits;
  if (shape.alibi) layouts.alibi = HeadValuesLayout{1, shape.heads, 0};
  if (shape.sinks) layouts.sinks = HeadValuesLayout{1, shape.heads, 0};
  BenchResult result;
  result.shape = shape;
  result.dtype = dtype;
  const PagedProblem problem = check_paged_attention(layouts);  // before generating the values
  const uint64_t esize = dtype_size(dtype);
  const uint64_t q_bytes = static_cast<uint64_t>(layouts.q.element_count()) * esize;
  const uint64_t out_bytes = static_cast<uint64_t>(layouts.out.element_count()) * esize;
  const uint64_t k_bytes = static_cast<uint64_t>(layouts.k_cache.required_bytes());
  const uint64_t v_bytes = static_cast<uint64_t>(layouts.v_cache.required_bytes());
  const uint64_t table_bytes = static_cast<uint64_t>(batch * max_pages) * 4, lens_bytes = static_cast<uint64_t>(batch) * 4;
  check_shape_fits(o, context.device_info(), {q_bytes, k_bytes, v_bytes, out_bytes, table_bytes, lens_bytes});

  std::mt19937_64 rng(o.seed);
  const std::vector<float> q = random_values(static_cast<std::size_t>(layouts.q.element_count()), dtype, rng);
  const std::vector<int32_t> table = block_table(pages, num_pages, max_pages, rng);
  std::vector<float> k = cache_values(layouts.k_cache, table, lengths, max_pages, dtype, rng);
  std::vector<float> v = cache_values(layouts.v_cache, table, lengths, max_pages, dtype, rng);
  // --kv-dtype q8_0: the caches uploaded as blocks (a NaN row no sequence holds: blocks of NaN
  // scale); k and v become the values the blocks hold.
  std::vector<uint8_t> k_blocks, v_blocks;
  if (shape.kv_quant == KvQuant::q8_0) k_blocks = conform::to_q8_0_blocks(k), v_blocks = conform::to_q8_0_blocks(v);
  const std::vector<int32_t> lens(lengths.begin(), lengths.end());

  // The peak is measured from here, as for a dense shape (cmd_bench.cpp).
  context.release_scratch();
  context.reset_peak_memory();
  const uint64_t baseline = context.memory_stats().current_bytes;
  const std::vector<float> slopes = shape.alibi ? alibi_slopes(shape.heads) : std::vector<float>{};
  const std::vector<float> sinks = shape.sinks ? sink_logits(shape.heads) : std::vector<float>{};
  std::optional<Buffer> slopes_buffer, sinks_buffer;
  if (shape.alibi) slopes_buffer.emplace(upload(context, DType::f32, slopes));
  if (shape.sinks) sinks_buffer.emplace(upload(context, DType::f32, sinks));
  const Buffer table_buffer = upload_bytes(context, table.data(), table_bytes);
  const Buffer lens_buffer = upload_bytes(context, lens.data(), lens_bytes);

  // Rotated sets as the dense bench's, counted from the bytes a call touches (the K/V it reads).
  result.kv_bytes = kv_read_bytes(shape, dtype);
  const double touched_bytes = static_cast<double>(q_bytes + out_bytes + result.kv_bytes);
  const int wanted = rotation_count(touched_bytes);
  std::vector<PagedSet> sets;
  result.rotated_input_bytes = make_rotated_sets(context, wanted, sets, [&] {
    return PagedSet{upload(context, dtype, q), upload_kv(context, dtype, k, k_blocks), upload_kv(context, dtype, v, v_blocks),
                    Buffer::allocate(context, std::max<uint64_t>(out_bytes, 16))};
  });
  result.rotations = static_cast<int>(sets.size());
  std::vector<PagedAttentionBuffers> buffers(sets.size());
  for (std::size_t r = 0; r < sets.size(); ++r) {
    PagedAttentionBuffers& b = buffers[r];
    b.q = &sets[r].q;
    b.k_cache = &sets[r].k_cache;
    b.v_cache = &sets[r].v_cache;
    b.out = &sets[r].out;
    b.block_table = {&table_buffer, 0};
    b.cache_lens = {&lens_buffer, 0};
    if (slopes_buffer) b.alibi = &*slopes_buffer;
    if (sinks_buffer) b.sinks = &*sinks_buffer;
  }
  // Poisoned outputs: the check reads set 0's output from the timed runs.
  if (o.check)
    for (PagedSet& set : sets) set.out.fill(0xFF);

  // Planned (and its pipelines built) inside the first run, as time_attention plans a dense call.
  std::optional<PreparedPagedAttention> prepared;
  std::optional<Buffer> workspace;
  const RunTimer timer = [&](int warmup, int iters) {
    if (!prepared) {
      prepared.emplace(context, layouts);
      if (prepared->workspace_bytes() > 0) workspace.emplace(Buffer::allocate(context, prepared->workspace_bytes()));
    }
    const BufferSlice slice{workspace ? &*workspace : nullptr, 0};
    return time_recorded(
        context, [&](VkCommandBuffer cmd, int run) { prepared->record(cmd, buffers[static_cast<std::size_t>(run) % buffers.size()], slice); },
        warmup, iters);
  };
  time_runs(context, o, timer, result);
  result.plan = prepared->plan();
  result.device_bytes = q_bytes + k_bytes + v_bytes + out_bytes + table_bytes + lens_bytes + prepared->workspace_bytes();
  result.peak_device_bytes = context.memory_stats().peak_bytes - baseline - result.rotated_input_bytes;
  const double seconds = result.ms_median * 1e-3;
  result.tflops = seconds > 0 ? credited_flops(problem.attention, lengths, true) / seconds * 1e-12 : 0.0;
  result.gbps = seconds > 0 ? touched_bytes / seconds * 1e-9 : 0.0;
  if (o.copy) result.copy = time_copies(context, result.kv_bytes, std::max(o.warmup, 1), result.iters);

  if (o.check) {
    std::vector<std::byte> raw(out_bytes);
    if (out_bytes) sets[0].out.download(raw.data(), out_bytes);
    std::vector<float> out(static_cast<std::size_t>(layouts.out.element_count()));
    decode(dtype, raw.data(), out.data(), out.size());
    PagedCheckInputs in;
    // (q8_0: the reference reads the values the blocks hold, k and v.)
    PagedAttentionLayouts as_values = layouts;
    as_values.k_cache.quant = as_values.v_cache.quant = KvQuant::none;
    in.layouts = &as_values;
    in.q = q;
    in.k_cache = k;
    in.v_cache = v;
    in.block_table = table;
    in.cache_lens = lens;
    in.alibi = slopes;
    in.sinks = sinks;
    result.check = check_paged_against_reference(in, out);
  }
  return result;
}

}  // namespace vkattn::cli
