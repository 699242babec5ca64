// Decode steps of multi-head latent attention (DeepSeek's MLA) on a paged latent cache: each token
// keeps one 576-wide row (one KV head), its keys are the whole row and its values the row's first
// 512 columns. V is therefore described as a view of K's rows (k_cache.prefix_view(512)) and given
// the K cache's Buffer: the cache is stored once, and each step appends one row per sequence (k_new
// alone) and attends 16 query heads against it (MQA: one KV head), in one call planned once.
// Every step is checked against the fp64 reference; at the end the device's cache is compared with
// the host's copy.
//
//   mla_decode [--steps N]
#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

// 16 query heads against one latent KV head, rows of 576 (keys) of which values are the first 512;
// f16 as models serve it; pages of 64 tokens, 16 in the pool, at most 6 per sequence.
constexpr int64_t kBatch = 2, kHeads = 16, kDimQk = 576, kDimV = 512, kPageSize = 64, kNumPages = 16, kMaxPages = 6;
constexpr vkattn::DType kDtype = vkattn::DType::f16;

vkattn::AttentionSpec mla_spec() {
  vkattn::PagedKv cache;
  cache.k_cache = vkattn::PagedKvLayout::dense(kDtype, kNumPages, kPageSize, 1, kDimQk);
  cache.v_cache = cache.k_cache.prefix_view(kDimV);  // V: the first 512 columns of the same rows
  cache.max_pages = kMaxPages;
  cache.k_new = vkattn::TensorLayout::bhsd(kDtype, kBatch, 1, 1, kDimQk);  // the new latent row; no v_new
  vkattn::AttentionSpec spec;
  spec.q = vkattn::TensorLayout::bhsd(kDtype, kBatch, kHeads, 1, kDimQk);
  spec.kv = cache;
  spec.out = vkattn::TensorLayout::bhsd(kDtype, kBatch, kHeads, 1, kDimV);
  spec.options.causal = vkattn::Causal::bottom_right;
  spec.options.scale = 1.0f / std::sqrt(192.0f);  // MLA's softmax scale is 1/sqrt(qk_nope + qk_rope dims), not 1/sqrt(576)
  return spec;
}

// Values rounded to f16, as the host keeps them, and their bytes for the device.
std::vector<float> random_f16(std::mt19937& rng, int64_t count) {
  std::normal_distribution<float> normal;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& x : values) x = vkattn::round_to(kDtype, normal(rng));
  return values;
}

void upload(vkattn::Buffer& buffer, const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  vkattn::encode(kDtype, values.data(), bits.data(), values.size());
  buffer.upload(bits.data(), bits.size() * 2);
}

std::vector<float> download(const vkattn::Buffer& buffer, std::size_t count) {
  std::vector<uint16_t> bits(count);
  buffer.download(bits.data(), count * 2);
  std::vector<float> values(count);
  vkattn::decode(kDtype, bits.data(), values.data(), count);
  return values;
}

}  // namespace

int main(int argc, char** argv) try {
  int steps = 8;
  if (argc == 3 && std::strcmp(argv[1], "--steps") == 0) steps = std::atoi(argv[2]);
  if (steps < 1 || (argc != 1 && argc != 3)) {
    std::fprintf(stderr, "usage: mla_decode [--steps N]  (N >= 1)\n");
    return 2;
  }
  const vkattn::AttentionSpec spec = mla_spec();
  const vkattn::PagedAttentionLayouts layouts = spec.paged_layouts();
  vkattn::Context context;  // the best device, or the one VKATTN_DEVICE names
  std::printf("device: %s\n", context.device_info().name.c_str());
  const vkattn::PreparedAttention call(context, spec);
  std::printf("plan: %s; the cache %s is %lld bytes, read once for K and V\n", call.plan().kernel,
              layouts.k_cache.describe().c_str(), static_cast<long long>(layouts.k_cache.required_bytes()));

  std::mt19937 rng(11);
  // Sequence b's pages are rows b, b + 2, ... of the pool: pages interleave between sequences.
  std::vector<int32_t> table(std::size_t(kBatch * kMaxPages));
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < kMaxPages; ++i) table[std::size_t(b * kMaxPages + i)] = int32_t(i * kBatch + b);
  std::vector<int32_t> lens = {100, 250};
  std::vector<float> cache = random_f16(rng, layouts.k_cache.element_count());

  vkattn::Buffer cache_buf = vkattn::Buffer::allocate(context, uint64_t(layouts.k_cache.required_bytes()));
  vkattn::Buffer q_buf = vkattn::Buffer::allocate(context, uint64_t(layouts.q.element_count()) * 2);
  vkattn::Buffer new_buf = vkattn::Buffer::allocate(context, uint64_t(layouts.k_new->element_count()) * 2);
  vkattn::Buffer out_buf = vkattn::Buffer::allocate(context, uint64_t(layouts.out.element_count()) * 2);
  vkattn::Buffer table_buf = vkattn::Buffer::allocate(context, table.size() * 4);
  vkattn::Buffer lens_buf = vkattn::Buffer::allocate(context, lens.size() * 4);
  upload(cache_buf, cache);
  table_buf.upload(table.data(), table.size() * 4);
  vkattn::AttentionBuffers bufs;
  bufs.q = &q_buf;
  bufs.k = &cache_buf;
  bufs.v = &cache_buf;  // the same Buffer: V is a view of K's rows
  bufs.k_new = &new_buf;
  bufs.out = &out_buf;
  bufs.block_table = {&table_buf, 0};
  bufs.cache_lens = {&lens_buf, 0};

  double worst = 0.0;
  for (int s = 0; s < steps; ++s) {
    const std::vector<float> q = random_f16(rng, layouts.q.element_count());
    const std::vector<float> k_new = random_f16(rng, layouts.k_new->element_count());
    upload(q_buf, q);
    upload(new_buf, k_new);
    lens_buf.upload(lens.data(), lens.size() * 4);
    call.run(bufs);  // the append of each sequence's row, then its 16 heads over its lens[b] + 1 tokens

    vkattn::reference::PagedInputs in;
    in.q_layout = layouts.q;
    in.q = q;
    in.k_cache_layout = layouts.k_cache;
    in.v_cache_layout = layouts.v_cache;
    in.k_cache.values = cache;
    in.v_cache.values = cache;  // one cache, seen twice
    in.max_pages = kMaxPages;
    in.block_table = table;
    in.cache_lens = lens;
    in.k_new_layout = layouts.k_new;
    in.k_new = k_new;
    in.options = layouts.options;
    const vkattn::reference::PagedOutputs expected = vkattn::reference::paged_attention(in);
    const std::vector<float> out = download(out_buf, std::size_t(layouts.out.element_count()));
    double max_v = 0.0;
    for (float x : expected.v_cache) max_v = std::max(max_v, double(std::fabs(x)));
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double err = std::fabs(out[i] - expected.out[i]) / max_v;
      worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
    cache = expected.k_cache;
    for (int32_t& len : lens) ++len;
  }

  const bool cache_agrees = download(cache_buf, cache.size()) == cache;  // f16 rows copied, bit for bit
  std::printf("%d steps, sequences now %d and %d tokens; O's max error (normalised by max|V|): %.3g; cache %s\n",
              steps, lens[0], lens[1], worst, cache_agrees ? "agrees" : "DIFFERS");
  // f16 outputs: one rounding of O is 2^-11 of its magnitude; allow a few.
  if (!(worst <= 4e-3) || !cache_agrees) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
} catch (const vkattn::Error& e) {
  std::fprintf(stderr, "mla_decode: %s\n", e.what());
  return 1;
}
