// What an inference runtime does at every decode step, on a paged KV cache: three sequences of
// different lengths share one pool of 16-token pages through a block table; each step appends every
// sequence's new token (its K and V) to the cache and attends its query to everything cached, in one
// call planned once (PreparedPagedAttention) and run per step. Between steps the host only moves
// cache_lens on and, when a sequence starts a new page, hands it one from the pool. Every step is
// checked against the fp64 reference (reference::paged_attention), whose cache after the append is
// the host's copy of the cache for the next step; at the end the device's cache is compared with it.
#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() try {
  // Query heads 8 sharing 2 KV heads (GQA), head dim 64, f32; pages of 16 tokens, 32 in the pool,
  // at most 8 per sequence (128 tokens).
  const int64_t batch = 3, heads = 8, kv_heads = 2, dim = 64, page_size = 16, num_pages = 32, max_pages = 8;
  const int steps = 20;
  const vkattn::DType dtype = vkattn::DType::f32;
  std::vector<int32_t> cache_lens = {0, 13, 40};  // tokens each sequence already has in the cache

  vkattn::PagedAttentionLayouts layouts;
  layouts.q = vkattn::TensorLayout::bhsd(dtype, batch, heads, 1, dim);  // one new query per sequence
  layouts.k_cache = vkattn::PagedKvLayout::dense(dtype, num_pages, page_size, kv_heads, dim);
  layouts.v_cache = layouts.k_cache;
  layouts.max_pages = max_pages;
  layouts.k_new = vkattn::TensorLayout::bhsd(dtype, batch, kv_heads, 1, dim);  // appended first
  layouts.v_new = layouts.k_new;
  layouts.out = layouts.q;
  // Bottom-right: the new query sits after every cached token (and its own), so it sees them all.
  layouts.options.causal = vkattn::Causal::bottom_right;

  vkattn::Context context;  // the best device, or the one VKATTN_DEVICE names
  std::printf("device: %s\n", context.device_info().name.c_str());
  const vkattn::PreparedPagedAttention step(context, layouts);  // planned once, for every step below

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto random = [&](int64_t count) {
    std::vector<float> values(static_cast<std::size_t>(count));
    for (float& x : values) x = normal(rng);
    return values;
  };
  auto allocate = [&](int64_t elements) { return vkattn::Buffer::allocate(context, uint64_t(elements) * 4); };
  auto upload = [](vkattn::Buffer& buffer, const auto& values) { buffer.upload(values.data(), values.size() * 4); };

  // The pool, handed out in order; sequence b's pages fill row b of the block table.
  std::vector<int32_t> block_table(std::size_t(batch * max_pages), 0);
  std::vector<int64_t> pages_held(std::size_t(batch), 0);
  int32_t next_free_page = 0;
  auto hold_pages_for = [&](int64_t b, int64_t tokens) {
    while (pages_held[std::size_t(b)] * page_size < tokens) {
      if (next_free_page == num_pages || pages_held[std::size_t(b)] == max_pages) throw vkattn::Error("the pool is full");
      block_table[std::size_t(b * max_pages + pages_held[std::size_t(b)]++)] = next_free_page++;
    }
  };

  // The cache as the host keeps it (what the reference reads), with the tokens already there.
  std::vector<float> k_cache = random(layouts.k_cache.element_count());
  std::vector<float> v_cache = random(layouts.v_cache.element_count());
  for (int64_t b = 0; b < batch; ++b) hold_pages_for(b, cache_lens[std::size_t(b)]);
  vkattn::Buffer k_cache_buf = allocate(layouts.k_cache.element_count());
  vkattn::Buffer v_cache_buf = allocate(layouts.v_cache.element_count());
  upload(k_cache_buf, k_cache);
  upload(v_cache_buf, v_cache);
  vkattn::Buffer q_buf = allocate(layouts.q.element_count()), out_buf = allocate(layouts.out.element_count());
  vkattn::Buffer k_new_buf = allocate(layouts.k_new->element_count()), v_new_buf = allocate(layouts.v_new->element_count());
  vkattn::Buffer table_buf = allocate(batch * max_pages), lens_buf = allocate(batch);

  vkattn::PagedAttentionBuffers buffers;
  buffers.q = &q_buf;
  buffers.k_cache = &k_cache_buf;
  buffers.v_cache = &v_cache_buf;
  buffers.k_new = &k_new_buf;
  buffers.v_new = &v_new_buf;
  buffers.out = &out_buf;
  buffers.block_table = {&table_buf, 0};
  buffers.cache_lens = {&lens_buf, 0};

  double worst = 0.0;
  for (int s = 0; s < steps; ++s) {
    // This step's query and new token per sequence (a model's projections would write them on the
    // device); a sequence that is about to start a page gets one first.
    const std::vector<float> q = random(layouts.q.element_count());
    const std::vector<float> k_new = random(layouts.k_new->element_count()), v_new = random(layouts.v_new->element_count());
    for (int64_t b = 0; b < batch; ++b) hold_pages_for(b, cache_lens[std::size_t(b)] + 1);
    upload(q_buf, q);
    upload(k_new_buf, k_new);
    upload(v_new_buf, v_new);
    upload(table_buf, block_table);
    upload(lens_buf, cache_lens);
    step.run(buffers);  // the append, then attention over each sequence's cache_lens[b] + 1 tokens

    std::vector<float> out(std::size_t(layouts.out.element_count()));
    out_buf.download(out.data(), out.size() * 4);
    vkattn::reference::PagedInputs in;
    in.q_layout = layouts.q;
    in.q = q;
    in.k_cache_layout = layouts.k_cache;
    in.v_cache_layout = layouts.v_cache;
    in.k_cache.values = k_cache;
    in.v_cache.values = v_cache;
    in.max_pages = max_pages;
    in.block_table = block_table;
    in.cache_lens = cache_lens;
    in.k_new_layout = layouts.k_new;
    in.v_new_layout = layouts.v_new;
    in.k_new = k_new;
    in.v_new = v_new;
    in.options = layouts.options;
    const vkattn::reference::PagedOutputs expected = vkattn::reference::paged_attention(in);
    // Normalised by max|V| over the cache, as the test suite does: O is a convex combination of V's rows.
    double max_v = 0.0;
    for (float x : expected.v_cache) max_v = std::max(max_v, double(std::fabs(x)));
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double err = std::fabs(out[i] - expected.out[i]) / max_v;
      worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
    k_cache = expected.k_cache;  // the host's copy follows the append
    v_cache = expected.v_cache;
    for (int32_t& len : cache_lens) ++len;
  }

  // The device's cache after every append: bit for bit the host's (f32 values copied, not rounded).
  std::vector<float> k_device(k_cache.size()), v_device(v_cache.size());
  k_cache_buf.download(k_device.data(), k_device.size() * 4);
  v_cache_buf.download(v_device.data(), v_device.size() * 4);
  const bool caches_agree = k_device == k_cache && v_device == v_cache;

  std::printf("%d steps, sequences now %d, %d and %d tokens in %d pages; O's max error (normalised by max|V|): %.3g; "
              "caches %s\n",
              steps, cache_lens[0], cache_lens[1], cache_lens[2], next_free_page, worst,
              caches_agree ? "agree" : "DIFFER");
  if (!(worst <= 1e-5) || !caches_agree) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
} catch (const vkattn::Error& e) {
  std::fprintf(stderr, "decode_loop: %s\n", e.what());
  return 1;
}
