// Paged-KV-cache conformance cases (paged_case.hpp): built from the seed, run through
// the PreparedAttention of a PagedKv spec with poisoned, guarded outputs, compared with reference::paged_attention.
#include "conform/paged_case.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <tuple>

#include "conform/attention_case.hpp"
#include "conform/case_modifiers.hpp"
#include "conform/compare.hpp"
#include "conform/guarded_buffer.hpp"
#include "conform/host_bytes.hpp"
#include "conform/q8_0_blocks.hpp"

namespace vkattn::conform {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

std::string describe(const PagedCase& c) {
  std::ostringstream s;
  s << c.name << ": " << to_string(c.dtype);
  if (c.quant != KvQuant::none) s << " K/V " << to_string(c.quant);
  s << " H" << c.heads << "/KV" << c.kv_heads << " seq_q " << c.seq_q << " d"
    << c.dim_qk << "/" << c.dim_v << " page " << c.page_size << (c.order == PageOrder::hnd ? " hnd" : "")
    << " cache_lens {";
  for (std::size_t b = 0; b < c.cache_lens.size(); ++b) s << (b ? ", " : "") << c.cache_lens[b];
  s << "}";
  if (c.seq_new) s << " append " << c.seq_new;
  if (c.shared_pages) s << " shared " << c.shared_pages << " pages";
  s << " causal " << to_string(c.causal);
  s << serving_text(c.modifiers);
  s << " seed " << c.seed;
  return s.str();
}

namespace {

// The block table and the pool it hands pages out of.
struct BlockTable {
  std::vector<int32_t> table;  // (batch, max_pages), -1 past each sequence's pages
  int64_t num_pages = 0, max_pages = 0;
};

// Each sequence's pages (its tokens after the append), handed out from a shuffled pool; sequence 1
// reuses sequence 0's first shared_pages pages.
BlockTable draw_block_table(const PagedCase& c, std::mt19937_64& rng) {
  const int64_t batch = static_cast<int64_t>(c.cache_lens.size()), ps = c.page_size;
  std::vector<int64_t> need(static_cast<std::size_t>(batch));
  int64_t distinct = c.spare_pages, max_need = 1;
  for (int64_t b = 0; b < batch; ++b) {
    need[std::size_t(b)] = (c.cache_lens[std::size_t(b)] + c.seq_new + ps - 1) / ps;
    distinct += need[std::size_t(b)] - (b == 1 ? c.shared_pages : 0);
    max_need = std::max(max_need, need[std::size_t(b)]);
  }
  BlockTable t;
  t.num_pages = std::max<int64_t>(distinct, 1);
  t.max_pages = max_need + c.spare_columns;
  std::vector<int32_t> order(static_cast<std::size_t>(t.num_pages));
  std::iota(order.begin(), order.end(), 0);
  if (c.shuffle_pages) std::shuffle(order.begin(), order.end(), rng);
  t.table.assign(static_cast<std::size_t>(batch * t.max_pages), -1);
  std::size_t next = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < need[std::size_t(b)]; ++i)
      t.table[std::size_t(b * t.max_pages + i)] =
          b == 1 && i < c.shared_pages ? t.table[std::size_t(i)] : order[next++];
  return t;
}

// Everything a case draws from its seed, in the order it draws it, and the bytes the device reads.
struct PagedData {
  BlockTable pages;
  PagedAttentionLayouts layouts;
  std::vector<float> k_cache, v_cache, q, k_new, v_new;
  HeadValues head;
  double v_scale = 1e-30;  // the largest |V|: the outputs' error scale
  std::vector<uint8_t> k_bytes, v_bytes;  // the caches as the device holds them
};

// The caches: every token a sequence holds gets values; every other row (spare pages, the rows an
// append writes, past a sequence's end) NaN, which the kernels must never read (q8_0: blocks whose
// scale is NaN, in encode_caches).
void draw_caches(const PagedCase& c, const std::function<float()>& rounded, PagedData& d) {
  const int64_t batch = static_cast<int64_t>(c.cache_lens.size()), ps = c.page_size, g = c.kv_heads;
  const PagedKvLayout& kl = d.layouts.k_cache;
  const PagedKvLayout& vl = d.layouts.v_cache;
  d.k_cache.assign(std::size_t(kl.element_count()), kNaN);
  d.v_cache.assign(std::size_t(vl.element_count()), kNaN);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < c.cache_lens[std::size_t(b)]; ++t) {
      const int64_t page = d.pages.table[std::size_t(b * d.pages.max_pages + t / ps)], slot = t % ps;
      for (int64_t h = 0; h < g; ++h) {
        for (int64_t e = 0; e < c.dim_qk; ++e) d.k_cache[std::size_t(kl.index(page, slot, h, e))] = rounded();
        for (int64_t e = 0; e < c.dim_v; ++e) {
          float& x = d.v_cache[std::size_t(vl.index(page, slot, h, e))];
          x = rounded();
          d.v_scale = std::max(d.v_scale, double(std::fabs(x)));
        }
      }
    }
}

// Q, and the rows an append writes.
void draw_queries_and_appends(const PagedCase& c, const std::function<float()>& rounded, PagedData& d) {
  const int64_t batch = static_cast<int64_t>(c.cache_lens.size()), g = c.kv_heads;
  PagedAttentionLayouts& layouts = d.layouts;
  d.q.resize(std::size_t(layouts.q.element_count()));
  for (float& x : d.q) x = rounded();
  if (!c.seq_new) return;
  layouts.k_new = TensorLayout::bhsd(c.dtype, batch, g, c.seq_new, c.dim_qk);
  layouts.v_new = TensorLayout::bhsd(c.dtype, batch, g, c.seq_new, c.dim_v);
  d.k_new.resize(std::size_t(layouts.k_new->element_count()));
  d.v_new.resize(std::size_t(layouts.v_new->element_count()));
  for (float& x : d.k_new) x = rounded();
  for (float& x : d.v_new) {
    x = rounded();
    d.v_scale = std::max(d.v_scale, double(std::fabs(x)));
  }
}

PagedData draw_paged_data(const PagedCase& c) {
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::function<float()> rounded = [&]() { return round_to(c.dtype, uniform(rng)); };
  const int64_t batch = static_cast<int64_t>(c.cache_lens.size());
  PagedData d;
  d.pages = draw_block_table(c, rng);
  PagedAttentionLayouts& layouts = d.layouts;
  layouts.q = TensorLayout::bhsd(c.dtype, batch, c.heads, c.seq_q, c.dim_qk);
  layouts.k_cache = PagedKvLayout::dense(c.dtype, d.pages.num_pages, c.page_size, c.kv_heads, c.dim_qk, c.quant, c.order);
  layouts.v_cache = PagedKvLayout::dense(c.dtype, d.pages.num_pages, c.page_size, c.kv_heads, c.dim_v, c.quant, c.order);
  layouts.max_pages = d.pages.max_pages;
  layouts.out = TensorLayout::bhsd(c.dtype, batch, c.heads, c.seq_q, c.dim_v);
  layouts.has_lse = c.lse;
  layouts.options.causal = c.causal;
  apply_options(c.modifiers, layouts.options);
  draw_caches(c, rounded, d);
  draw_queries_and_appends(c, rounded, d);
  int64_t longest = 1;
  for (int32_t len : c.cache_lens) longest = std::max<int64_t>(longest, len + c.seq_new);
  d.head = draw_head_values(c.modifiers, rng, c.heads, longest);
  set_layouts(d.head, layouts);
  return d;
}

// The caches' bytes for the device: the dtype's encoding, or q8_0 blocks (rows no sequence holds are
// NaN: blocks of NaN scale, as unreadable as before).
void encode_caches(const PagedCase& c, PagedData& d) {
  if (c.quant == KvQuant::q8_0) {
    std::vector<float> k_values(d.k_cache), v_values(d.v_cache);
    d.k_bytes = to_q8_0_blocks(k_values);
    d.v_bytes = to_q8_0_blocks(v_values);
  } else {
    d.k_bytes = encoded(c.dtype, d.k_cache);
    d.v_bytes = encoded(c.dtype, d.v_cache);
  }
}

// The reference's inputs: the same values (a q8_0 cache as its blocks).
reference::PagedOutputs paged_reference(const PagedCase& c, const PagedData& d) {
  reference::PagedInputs in;
  in.q_layout = d.layouts.q;
  in.q = d.q;
  in.k_cache_layout = d.layouts.k_cache;
  in.v_cache_layout = d.layouts.v_cache;
  in.k_cache.values = d.k_cache;
  in.v_cache.values = d.v_cache;
  in.max_pages = d.pages.max_pages;
  in.block_table = d.pages.table;
  in.cache_lens = c.cache_lens;
  in.k_new_layout = d.layouts.k_new;
  in.v_new_layout = d.layouts.v_new;
  in.k_new = d.k_new;
  in.v_new = d.v_new;
  in.options = d.layouts.options;
  set_reference_inputs(d.head, in);
  if (c.quant == KvQuant::q8_0) {
    in.k_cache = {{}, d.k_bytes};
    in.v_cache = {{}, d.v_bytes};
  }
  return reference::paged_attention(in);
}

// The case's buffers on the device, and the call's view of them. Built in place: bufs points into it.
struct PagedDevice {
  Buffer q, k_cache, v_cache, table, lens;
  std::optional<Buffer> k_new, v_new;
  HeadValueBuffers head;
  uint64_t rows;  // of O and LSE
  GuardedBuffer out, lse;
  AttentionBuffers bufs;  // k and v: the caches

  PagedDevice(Context& ctx, const PagedCase& c, const PagedData& d)
      : q(upload_bytes(ctx, encoded(c.dtype, d.q).data(), d.q.size() * dtype_size(c.dtype))),
        k_cache(upload_bytes(ctx, d.k_bytes.data(), d.k_bytes.size())),
        v_cache(upload_bytes(ctx, d.v_bytes.data(), d.v_bytes.size())),
        table(upload_bytes(ctx, d.pages.table.data(), d.pages.table.size() * 4)),
        lens(upload_bytes(ctx, c.cache_lens.data(), c.cache_lens.size() * 4)),
        rows(uint64_t(int64_t(c.cache_lens.size()) * c.heads * c.seq_q)),
        out(ctx, rows * uint64_t(c.dim_v) * dtype_size(c.dtype)),
        lse(ctx, std::max<uint64_t>(rows, 1) * 4) {
    if (c.seq_new) {
      k_new.emplace(upload_bytes(ctx, encoded(c.dtype, d.k_new).data(), d.k_new.size() * dtype_size(c.dtype)));
      v_new.emplace(upload_bytes(ctx, encoded(c.dtype, d.v_new).data(), d.v_new.size() * dtype_size(c.dtype)));
    }
    head = upload(ctx, d.head);
    bufs.q = &q;
    bufs.k = &k_cache;
    bufs.v = &v_cache;
    bufs.out = &out.buffer();
    bufs.block_table = {&table, 0};
    bufs.cache_lens = {&lens, 0};
    if (c.seq_new) bufs.k_new = &*k_new, bufs.v_new = &*v_new;
    if (c.lse) bufs.lse = {&lse.buffer(), 0};
    bind_head_values(head, bufs);
  }
};

// After an append both caches hold exactly the reference's values (bit for bit: a copy, or the
// blocks quantize_q8_0 makes, compared as the values they stand for), the untouched rows (NaN
// included) unchanged. Returns a line per cache that differs.
std::string appended_cache_mismatches(const PagedCase& c, const PagedDevice& dev, const reference::PagedOutputs& ref) {
  std::string text;
  for (const auto& [name, buf, values] :
       {std::tuple{"k_cache", &dev.k_cache, &ref.k_cache}, std::tuple{"v_cache", &dev.v_cache, &ref.v_cache}}) {
    if (c.quant == KvQuant::q8_0) {
      std::vector<uint8_t> got(std::size_t(q8_0_bytes(int64_t(values->size()))));
      buf->download(got.data(), got.size());
      const std::vector<float> got_values = dequantize_q8_0(got);
      for (std::size_t e = 0; e < got_values.size(); ++e) {
        const float a = got_values[e], b = (*values)[e];
        if (!(a == b || (std::isnan(a) && std::isnan(b)))) {
          text += std::string(name) + " after the append differs from the reference at element " +
                  std::to_string(e) + ": " + std::to_string(a) + " vs " + std::to_string(b) + "\n";
          break;
        }
      }
      continue;
    }
    std::vector<uint8_t> got(values->size() * dtype_size(c.dtype));
    buf->download(got.data(), got.size());
    const std::vector<uint8_t> want = encoded(c.dtype, *values);
    const auto diff = std::mismatch(got.begin(), got.end(), want.begin());
    if (diff.first != got.end())
      text += std::string(name) + " after the append differs from the reference at byte " +
              std::to_string(diff.first - got.begin()) + "\n";
  }
  return text;
}

// One step of the plan, from the original caches, on fresh poison: what differs from the reference.
std::string run_step(const PagedCase& c, const PagedData& d, const reference::PagedOutputs& ref,
                     const PreparedAttention& prepared, PagedDevice& dev, double& worst) {
  dev.k_cache.upload(d.k_bytes.data(), d.k_bytes.size());
  dev.v_cache.upload(d.v_bytes.data(), d.v_bytes.size());
  dev.out.reset();
  dev.lse.reset();
  prepared.run(dev.bufs);
  std::string guard;
  const std::vector<float> gpu_out = decoded(c.dtype, dev.out.download("out", guard));
  std::vector<float> gpu_lse;
  if (c.lse) gpu_lse = dev.lse.download_f32("lse", dev.rows, guard);
  const Comparison cmp = compare_outputs(ref, gpu_out, gpu_lse, d.v_scale, c.dtype);
  worst = std::max(worst, cmp.worst);
  std::string text = guard + cmp.text;
  if (c.seq_new) text += appended_cache_mismatches(c, dev, ref);
  return text;
}

}  // namespace

PagedResult run_paged_case(Context& ctx, const PagedCase& c) {
  PagedData d = draw_paged_data(c);
  encode_caches(c, d);
  const reference::PagedOutputs ref = paged_reference(c, d);
  PagedDevice dev(ctx, c, d);

  const PreparedAttention prepared(ctx, AttentionSpec::paged(d.layouts));
  PagedResult result;
  result.plan = std::string(prepared.plan().kernel) + " " + std::to_string(prepared.plan().splits) + " splits";
  // Two steps of one plan, each from the original caches, on fresh poison.
  for (int step = 0; step < 2; ++step) {
    const std::string text = run_step(c, d, ref, prepared, dev, result.worst);
    if (!text.empty()) {
      result.text = "step " + std::to_string(step + 1) + ": " + text;
      return result;
    }
  }
  result.ok = true;
  return result;
}

std::vector<std::pair<std::string, std::string>> features(const PagedCase& c) {
  std::vector<std::pair<std::string, std::string>> f = {{"dtype", to_string(c.dtype)},
                                                        {"layout", "paged " + std::to_string(c.page_size)}};
  if (c.order == PageOrder::hnd) f.emplace_back("layout", "paged hnd");
  if (c.seq_new) f.emplace_back("layout", "append");
  add_serving_features(c, f);
  return f;
}

CaseResult run_paged_case(Context& context, const PagedCase& c, const RunOptions& options) {
  return run_serving_case(context, c.dtype, options, "paged KV cache", [&] { return run_paged_case(context, c); });
}

std::vector<PagedCase> paged_cases(uint64_t base_seed, bool long_cases) {
  std::vector<PagedCase> cases;
  const auto add = [&](PagedCase c) {
    c.seed = case_seed(base_seed, 9000 + (long_cases ? 100 : 0) + cases.size());
    cases.push_back(std::move(c));
  };
  if (long_cases) {
    PagedCase c{.name = "65,536 keys, page 16, decode with an append", .dtype = DType::f16, .heads = 8, .kv_heads = 2,
                .dim_qk = 64, .dim_v = 64, .page_size = 16, .cache_lens = {65535, 700}, .seq_new = 1};
    add(c);
    return cases;
  }
  add({.name = "decode, page 16, GQA 8:2, lengths 0/1/16/37", .dtype = DType::f16, .heads = 8, .kv_heads = 2,
       .cache_lens = {0, 1, 16, 37}});
  add({.name = "decode, page 1, dim_v != dim_qk", .dtype = DType::f32, .heads = 3, .kv_heads = 1, .dim_qk = 40,
       .dim_v = 24, .page_size = 1, .cache_lens = {5, 9, 2}});
  add({.name = "decode, page 256, d128", .dtype = DType::bf16, .heads = 4, .kv_heads = 4, .dim_qk = 128,
       .dim_v = 128, .page_size = 256, .cache_lens = {300, 1}});
  add({.name = "chunked prefill, shared prefix pages, seq_q > a sequence's keys", .dtype = DType::f32, .heads = 4,
       .kv_heads = 2, .seq_q = 20, .page_size = 16, .cache_lens = {40, 40, 17}, .shared_pages = 2});
  add({.name = "append across a page edge", .dtype = DType::f16, .heads = 4, .kv_heads = 2, .seq_q = 4,
       .page_size = 16, .cache_lens = {14, 30, 0}, .seq_new = 4});
  add({.name = "append one token, causal top-left", .dtype = DType::f32, .heads = 2, .kv_heads = 1, .dim_qk = 32,
       .dim_v = 32, .page_size = 16, .cache_lens = {15, 16}, .seq_new = 1, .causal = Causal::top_left});
  add({.name = "every modifier", .dtype = DType::f32, .heads = 4, .kv_heads = 2, .seq_q = 2,
       .page_size = 16, .cache_lens = {100, 0, 257}, .modifiers = every_modifier(Window{64, 0}, 30.0f, 3)});
  add({.name = "two-sided window top-left, ALiBi (H), sinks, no causal", .dtype = DType::f16, .heads = 4,
       .kv_heads = 1, .seq_q = 3, .page_size = 8, .cache_lens = {50, 3}, .causal = Causal::none,
       .modifiers = {.options = {.window = Window{20, 5}, .align = Align::top_left}, .alibi_batch = 1, .sinks = true}});
  // q8_0 caches: the decode form (GQA packed), the element-wise kernels' reads with modifiers, and
  // prefill rows.
  add({.name = "q8_0, decode with an append, page 16, GQA 8:2", .dtype = DType::f16, .quant = KvQuant::q8_0,
       .heads = 8, .kv_heads = 2, .dim_qk = 128, .dim_v = 128, .cache_lens = {0, 1, 15, 300}, .seq_new = 1});
  add({.name = "q8_0, page 1, every modifier", .dtype = DType::f32, .quant = KvQuant::q8_0,
       .heads = 3, .kv_heads = 1, .seq_q = 2, .dim_qk = 32, .dim_v = 64, .page_size = 1, .cache_lens = {45, 9},
       .modifiers = every_modifier(Window{30, 0}, 30.0f, 1)});
  add({.name = "q8_0, prefill 40 rows, shared prefix pages, append across a page edge", .dtype = DType::bf16,
       .quant = KvQuant::q8_0, .heads = 2, .kv_heads = 1, .seq_q = 40, .page_size = 16, .cache_lens = {78, 70},
       .seq_new = 3, .shared_pages = 2, .causal = Causal::none});
  add({.name = "prefill 64 rows, no causal", .dtype = DType::bf16, .heads = 2, .kv_heads = 1, .seq_q = 64,
       .page_size = 16, .cache_lens = {100, 64}, .causal = Causal::none});
  // hnd pages (each KV head's tokens of a page side by side): the decode form with an append across a
  // page edge, a page of 256 with prefill rows, modifiers, q8_0 (decode and prefill) with shared pages.
  add({.name = "hnd, decode with an append across a page edge, GQA 8:2, lengths 0/1/15/37", .dtype = DType::f16,
       .heads = 8, .kv_heads = 2, .page_size = 16, .order = PageOrder::hnd, .cache_lens = {0, 1, 15, 37},
       .seq_new = 1});
  add({.name = "hnd, page 256, d128, prefill 5 rows, shared prefix pages", .dtype = DType::bf16, .heads = 4,
       .kv_heads = 2, .seq_q = 5, .dim_qk = 128, .dim_v = 128, .page_size = 256, .order = PageOrder::hnd,
       .cache_lens = {600, 300}, .shared_pages = 1});
  add({.name = "hnd, page 8, every modifier, dim_v != dim_qk", .dtype = DType::f32,
       .heads = 6, .kv_heads = 3, .seq_q = 3, .dim_qk = 48, .dim_v = 24, .page_size = 8, .order = PageOrder::hnd,
       .cache_lens = {70, 0, 9}, .seq_new = 2, .modifiers = every_modifier(Window{32, 0}, 20.0f, 3)});
  add({.name = "hnd, q8_0, decode with an append, GQA 8:2, page 16", .dtype = DType::f16, .quant = KvQuant::q8_0,
       .heads = 8, .kv_heads = 2, .dim_qk = 128, .dim_v = 128, .page_size = 16, .order = PageOrder::hnd,
       .cache_lens = {0, 17, 300}, .seq_new = 1});
  add({.name = "hnd, q8_0, prefill 24 rows, shared prefix pages, append", .dtype = DType::f32,
       .quant = KvQuant::q8_0, .heads = 4, .kv_heads = 2, .seq_q = 24, .dim_qk = 64, .dim_v = 32, .page_size = 16,
       .order = PageOrder::hnd, .cache_lens = {50, 40}, .seq_new = 3, .shared_pages = 2, .causal = Causal::none});
  return cases;
}

}  // namespace vkattn::conform
