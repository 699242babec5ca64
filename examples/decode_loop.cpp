// What an inference runtime does at every decode step, on a paged KV cache: three sequences of
// different lengths share one pool of 16-token pages through a block table; each step appends every
// sequence's new token (its K and V) to the cache and attends its query to everything cached, in one
// call planned once (a PreparedAttention whose keys and values come from a PagedKv) and run per
// step. Between steps the host only moves cache_lens on and, when a sequence starts a new page,
// hands it one from the pool. Every step is checked against the fp64 reference
// (reference::paged_attention), whose cache after the append is the host's copy of the cache for the
// next step; at the end the device's cache is compared with it.
#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

// Query heads 8 sharing 2 KV heads (GQA), head dim 64, f32; pages of 16 tokens, 32 in the pool,
// at most 8 per sequence (128 tokens).
constexpr int64_t kBatch = 3, kHeads = 8, kKvHeads = 2, kDim = 64, kPageSize = 16, kNumPages = 32, kMaxPages = 8;
constexpr int kSteps = 20;
constexpr vkattn::DType kDtype = vkattn::DType::f32;

// The call every step makes: one new query per sequence over its pages, its new K and V appended
// first. The keys and values come from a paged cache: the spec's source is a PagedKv.
vkattn::AttentionSpec decode_spec() {
  vkattn::PagedKv cache;
  cache.k_cache = vkattn::PagedKvLayout::dense(kDtype, kNumPages, kPageSize, kKvHeads, kDim);
  cache.v_cache = cache.k_cache;
  cache.max_pages = kMaxPages;
  cache.k_new = vkattn::TensorLayout::bhsd(kDtype, kBatch, kKvHeads, 1, kDim);  // appended first
  cache.v_new = cache.k_new;
  vkattn::AttentionSpec spec;
  spec.q = vkattn::TensorLayout::bhsd(kDtype, kBatch, kHeads, 1, kDim);  // one new query per sequence
  spec.kv = cache;
  spec.out = spec.q;
  // Bottom-right: the new query sits after every cached token (and its own), so it sees them all.
  spec.options.causal = vkattn::Causal::bottom_right;
  return spec;
}

// The pool, handed out in order; sequence b's pages fill row b of the block table.
class PagePool {
 public:
  // Gives sequence b pages until they hold `tokens` tokens.
  void hold_pages_for(int64_t b, int64_t tokens) {
    while (pages_held_[std::size_t(b)] * kPageSize < tokens) {
      if (next_free_page_ == kNumPages || pages_held_[std::size_t(b)] == kMaxPages) throw vkattn::Error("the pool is full");
      block_table_[std::size_t(b * kMaxPages + pages_held_[std::size_t(b)]++)] = next_free_page_++;
    }
  }
  const std::vector<int32_t>& block_table() const { return block_table_; }
  int32_t pages_used() const { return next_free_page_; }

 private:
  std::vector<int32_t> block_table_ = std::vector<int32_t>(std::size_t(kBatch * kMaxPages), 0);
  std::vector<int64_t> pages_held_ = std::vector<int64_t>(std::size_t(kBatch), 0);
  int32_t next_free_page_ = 0;
};

vkattn::Buffer allocate(vkattn::Context& context, int64_t elements) {
  return vkattn::Buffer::allocate(context, uint64_t(elements) * 4);
}

template <typename Values>
void upload(vkattn::Buffer& buffer, const Values& values) {
  buffer.upload(values.data(), values.size() * 4);
}

// The device's buffers of the call, and the call's view of them. Built in place: `bufs` points into it.
struct DecodeBuffers {
  vkattn::Buffer k_cache, v_cache, q, out, k_new, v_new, table, lens;
  vkattn::AttentionBuffers bufs;

  DecodeBuffers(vkattn::Context& context, const vkattn::PagedAttentionLayouts& layouts)
      : k_cache(allocate(context, layouts.k_cache.element_count())),
        v_cache(allocate(context, layouts.v_cache.element_count())),
        q(allocate(context, layouts.q.element_count())),
        out(allocate(context, layouts.out.element_count())),
        k_new(allocate(context, layouts.k_new->element_count())),
        v_new(allocate(context, layouts.v_new->element_count())),
        table(allocate(context, kBatch * kMaxPages)),
        lens(allocate(context, kBatch)) {
    bufs.q = &q;
    bufs.k = &k_cache;  // a paged source's k and v are its caches
    bufs.v = &v_cache;
    bufs.k_new = &k_new;
    bufs.v_new = &v_new;
    bufs.out = &out;
    bufs.block_table = {&table, 0};
    bufs.cache_lens = {&lens, 0};
  }
};

// The cache as the host keeps it (what the reference reads), and the sequences' lengths in it.
struct HostCache {
  std::vector<float> k, v;
  std::vector<int32_t> lens;
};

// One step's inputs: a query and a new token per sequence (a model's projections would write them
// on the device).
struct StepInputs {
  std::vector<float> q, k_new, v_new;
};

// Checks one step's O against the fp64 reference, folding its error (normalised by max|V| over the
// cache, as the test suite does: O is a convex combination of V's rows) into `worst`; the host's
// copy of the cache then follows the append.
void check_step(const vkattn::PagedAttentionLayouts& layouts, const StepInputs& step, const std::vector<float>& out,
                const PagePool& pool, HostCache& cache, double& worst) {
  vkattn::reference::PagedInputs in;
  in.q_layout = layouts.q;
  in.q = step.q;
  in.k_cache_layout = layouts.k_cache;
  in.v_cache_layout = layouts.v_cache;
  in.k_cache.values = cache.k;
  in.v_cache.values = cache.v;
  in.max_pages = kMaxPages;
  in.block_table = pool.block_table();
  in.cache_lens = cache.lens;
  in.k_new_layout = layouts.k_new;
  in.v_new_layout = layouts.v_new;
  in.k_new = step.k_new;
  in.v_new = step.v_new;
  in.options = layouts.options;
  const vkattn::reference::PagedOutputs expected = vkattn::reference::paged_attention(in);
  double max_v = 0.0;
  for (float x : expected.v_cache) max_v = std::max(max_v, double(std::fabs(x)));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double err = std::fabs(out[i] - expected.out[i]) / max_v;
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  cache.k = expected.k_cache;
  cache.v = expected.v_cache;
}

}  // namespace

int main() try {
  const vkattn::AttentionSpec spec = decode_spec();
  const vkattn::PagedAttentionLayouts layouts = spec.paged_layouts();  // the same call, as the reference takes it
  vkattn::Context context;  // the best device, or the one VKATTN_DEVICE names
  std::printf("device: %s\n", context.device_info().name.c_str());
  const vkattn::PreparedAttention call(context, spec);  // planned once, for every step below

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto random = [&](int64_t count) {
    std::vector<float> values(static_cast<std::size_t>(count));
    for (float& x : values) x = normal(rng);
    return values;
  };

  // The cache with the tokens already there: each sequence's length, and pages to hold them.
  HostCache cache;
  cache.k = random(layouts.k_cache.element_count());
  cache.v = random(layouts.v_cache.element_count());
  cache.lens = {0, 13, 40};
  PagePool pool;
  for (int64_t b = 0; b < kBatch; ++b) pool.hold_pages_for(b, cache.lens[std::size_t(b)]);
  DecodeBuffers device(context, layouts);
  upload(device.k_cache, cache.k);
  upload(device.v_cache, cache.v);

  double worst = 0.0;
  for (int s = 0; s < kSteps; ++s) {
    StepInputs step;
    step.q = random(layouts.q.element_count());
    step.k_new = random(layouts.k_new->element_count());
    step.v_new = random(layouts.v_new->element_count());
    // A sequence that is about to start a page gets one first.
    for (int64_t b = 0; b < kBatch; ++b) pool.hold_pages_for(b, cache.lens[std::size_t(b)] + 1);
    upload(device.q, step.q);
    upload(device.k_new, step.k_new);
    upload(device.v_new, step.v_new);
    upload(device.table, pool.block_table());
    upload(device.lens, cache.lens);
    call.run(device.bufs);  // the append, then attention over each sequence's cache_lens[b] + 1 tokens

    std::vector<float> out(std::size_t(layouts.out.element_count()));
    device.out.download(out.data(), out.size() * 4);
    check_step(layouts, step, out, pool, cache, worst);
    for (int32_t& len : cache.lens) ++len;
  }

  // The device's cache after every append: bit for bit the host's (f32 values copied, not rounded).
  std::vector<float> k_device(cache.k.size()), v_device(cache.v.size());
  device.k_cache.download(k_device.data(), k_device.size() * 4);
  device.v_cache.download(v_device.data(), v_device.size() * 4);
  const bool caches_agree = k_device == cache.k && v_device == cache.v;

  std::printf("%d steps, sequences now %d, %d and %d tokens in %d pages; O's max error (normalised by max|V|): %.3g; "
              "caches %s\n",
              kSteps, cache.lens[0], cache.lens[1], cache.lens[2], pool.pages_used(), worst,
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
