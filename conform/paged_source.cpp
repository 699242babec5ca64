// A serving case's paged KV cache (serving_case.hpp, PagedSource): the block table, the caches and
// the appended rows drawn from the seed, run through the PreparedAttention of a PagedKv spec with
// poisoned, guarded outputs, compared with reference::paged_attention (and, after an append, both
// caches with the reference's).
#include "conform/serving_sources.hpp"

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

std::string describe(const ServingCase& c, const PagedSource& p) {
  std::ostringstream s;
  s << c.name << ": " << to_string(c.dtype);
  if (c.quant != KvQuant::none) s << " K/V " << to_string(c.quant);
  s << " H" << c.heads << "/KV" << c.kv_heads << " seq_q " << p.seq_q << " d"
    << c.dim_qk << "/" << c.dim_v << " page " << p.page_size << (p.order == PageOrder::hnd ? " hnd" : "")
    << " cache_lens {";
  for (std::size_t b = 0; b < p.cache_lens.size(); ++b) s << (b ? ", " : "") << p.cache_lens[b];
  s << "}";
  if (p.seq_new) s << " append " << p.seq_new;
  if (p.shared_pages) s << " shared " << p.shared_pages << " pages";
  if (p.v_view) s << " V a view of K's rows";
  if (p.cascade) s << " cascade";
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
BlockTable draw_block_table(const PagedSource& p, std::mt19937_64& rng) {
  const int64_t batch = static_cast<int64_t>(p.cache_lens.size()), ps = p.page_size;
  std::vector<int64_t> need(static_cast<std::size_t>(batch));
  int64_t distinct = p.spare_pages, max_need = 1;
  // Whether sequence b starts with sequence 0's shared pages: sequence 1, or every one for a cascade.
  const auto shares = [&](int64_t b) { return b == 1 || (p.cascade && b > 1); };
  for (int64_t b = 0; b < batch; ++b) {
    need[std::size_t(b)] = (p.cache_lens[std::size_t(b)] + p.seq_new + ps - 1) / ps;
    distinct += need[std::size_t(b)] - (shares(b) ? p.shared_pages : 0);
    max_need = std::max(max_need, need[std::size_t(b)]);
  }
  BlockTable t;
  t.num_pages = std::max<int64_t>(distinct, 1);
  t.max_pages = max_need + p.spare_columns;
  std::vector<int32_t> order(static_cast<std::size_t>(t.num_pages));
  std::iota(order.begin(), order.end(), 0);
  if (p.shuffle_pages) std::shuffle(order.begin(), order.end(), rng);
  t.table.assign(static_cast<std::size_t>(batch * t.max_pages), -1);
  std::size_t next = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < need[std::size_t(b)]; ++i)
      t.table[std::size_t(b * t.max_pages + i)] =
          shares(b) && i < p.shared_pages ? t.table[std::size_t(i)] : order[next++];
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
void draw_caches(const ServingCase& c, const PagedSource& p, const std::function<float()>& rounded, PagedData& d) {
  const int64_t batch = static_cast<int64_t>(p.cache_lens.size()), ps = p.page_size, g = c.kv_heads;
  const PagedKvLayout& kl = d.layouts.k_cache;
  const PagedKvLayout& vl = d.layouts.v_cache;
  d.k_cache.assign(std::size_t(kl.element_count()), kNaN);
  d.v_cache.assign(std::size_t(vl.element_count()), kNaN);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < p.cache_lens[std::size_t(b)]; ++t) {
      const int64_t page = d.pages.table[std::size_t(b * d.pages.max_pages + t / ps)], slot = t % ps;
      for (int64_t h = 0; h < g; ++h) {
        for (int64_t e = 0; e < c.dim_qk; ++e) {
          float& x = d.k_cache[std::size_t(kl.index(page, slot, h, e))];
          x = rounded();
          if (p.v_view && e < c.dim_v) d.v_scale = std::max(d.v_scale, double(std::fabs(x)));
        }
        if (p.v_view) continue;  // V's values are K's (below)
        for (int64_t e = 0; e < c.dim_v; ++e) {
          float& x = d.v_cache[std::size_t(vl.index(page, slot, h, e))];
          x = rounded();
          d.v_scale = std::max(d.v_scale, double(std::fabs(x)));
        }
      }
    }
  if (p.v_view) d.v_cache = d.k_cache;
}

// Q, and the rows an append writes.
void draw_queries_and_appends(const ServingCase& c, const PagedSource& p, const std::function<float()>& rounded,
                              PagedData& d) {
  const int64_t batch = static_cast<int64_t>(p.cache_lens.size()), g = c.kv_heads;
  PagedAttentionLayouts& layouts = d.layouts;
  d.q.resize(std::size_t(layouts.q.element_count()));
  for (float& x : d.q) x = rounded();
  if (!p.seq_new) return;
  layouts.k_new = TensorLayout::bhsd(c.dtype, batch, g, p.seq_new, c.dim_qk);
  d.k_new.resize(std::size_t(layouts.k_new->element_count()));
  for (float& x : d.k_new) x = rounded();
  if (p.v_view) {  // k_new alone: V reads the first dim_v columns of the rows it writes
    for (const float x : d.k_new) d.v_scale = std::max(d.v_scale, double(std::fabs(x)));
    return;
  }
  layouts.v_new = TensorLayout::bhsd(c.dtype, batch, g, p.seq_new, c.dim_v);
  d.v_new.resize(std::size_t(layouts.v_new->element_count()));
  for (float& x : d.v_new) {
    x = rounded();
    d.v_scale = std::max(d.v_scale, double(std::fabs(x)));
  }
}

PagedData draw_paged_data(const ServingCase& c, const PagedSource& p) {
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::function<float()> rounded = [&]() { return round_to(c.dtype, uniform(rng)); };
  const int64_t batch = static_cast<int64_t>(p.cache_lens.size());
  PagedData d;
  d.pages = draw_block_table(p, rng);
  PagedAttentionLayouts& layouts = d.layouts;
  layouts.q = TensorLayout::bhsd(c.dtype, batch, c.heads, p.seq_q, c.dim_qk);
  layouts.k_cache = PagedKvLayout::dense(c.dtype, d.pages.num_pages, p.page_size, c.kv_heads, c.dim_qk, c.quant, p.order);
  layouts.v_cache = p.v_view ? layouts.k_cache.prefix_view(c.dim_v)
                             : PagedKvLayout::dense(c.dtype, d.pages.num_pages, p.page_size, c.kv_heads, c.dim_v,
                                                    c.quant, p.order);
  layouts.max_pages = d.pages.max_pages;
  layouts.out = TensorLayout::bhsd(c.dtype, batch, c.heads, p.seq_q, c.dim_v);
  layouts.has_lse = c.lse;
  layouts.shared_prefix_pages = p.cascade ? p.shared_pages : 0;
  layouts.options.causal = c.causal;
  apply_options(c.modifiers, layouts.options);
  draw_caches(c, p, rounded, d);
  draw_queries_and_appends(c, p, rounded, d);
  int64_t longest = 1;
  for (int32_t len : p.cache_lens) longest = std::max<int64_t>(longest, len + p.seq_new);
  d.head = draw_head_values(c.modifiers, rng, c.heads, longest);
  set_layouts(d.head, layouts);
  return d;
}

// The caches' bytes for the device: the dtype's encoding, or q8_0 blocks (rows no sequence holds are
// NaN: blocks of NaN scale, as unreadable as before).
void encode_caches(const ServingCase& c, PagedData& d) {
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
reference::PagedOutputs paged_reference(const ServingCase& c, const PagedSource& p, const PagedData& d) {
  reference::PagedInputs in;
  in.q_layout = d.layouts.q;
  in.q = d.q;
  in.k_cache_layout = d.layouts.k_cache;
  in.v_cache_layout = d.layouts.v_cache;
  in.k_cache.values = d.k_cache;
  in.v_cache.values = d.v_cache;
  in.max_pages = d.pages.max_pages;
  in.block_table = d.pages.table;
  in.cache_lens = p.cache_lens;
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

  PagedDevice(Context& ctx, const ServingCase& c, const PagedSource& p, const PagedData& d)
      : q(upload_bytes(ctx, encoded(c.dtype, d.q).data(), d.q.size() * dtype_size(c.dtype))),
        k_cache(upload_bytes(ctx, d.k_bytes.data(), d.k_bytes.size())),
        v_cache(upload_bytes(ctx, d.v_bytes.data(), d.v_bytes.size())),
        table(upload_bytes(ctx, d.pages.table.data(), d.pages.table.size() * 4)),
        lens(upload_bytes(ctx, p.cache_lens.data(), p.cache_lens.size() * 4)),
        rows(uint64_t(int64_t(p.cache_lens.size()) * c.heads * p.seq_q)),
        out(ctx, rows * uint64_t(c.dim_v) * dtype_size(c.dtype)),
        lse(ctx, std::max<uint64_t>(rows, 1) * 4) {
    if (p.seq_new) {
      k_new.emplace(upload_bytes(ctx, encoded(c.dtype, d.k_new).data(), d.k_new.size() * dtype_size(c.dtype)));
      if (!p.v_view) v_new.emplace(upload_bytes(ctx, encoded(c.dtype, d.v_new).data(), d.v_new.size() * dtype_size(c.dtype)));
    }
    head = upload(ctx, d.head);
    bufs.q = &q;
    bufs.k = &k_cache;
    bufs.v = p.v_view ? &k_cache : &v_cache;  // a view of K's rows: K's Buffer
    bufs.out = &out.buffer();
    bufs.block_table = {&table, 0};
    bufs.cache_lens = {&lens, 0};
    if (p.seq_new) bufs.k_new = &*k_new, bufs.v_new = v_new ? &*v_new : nullptr;
    if (c.lse) bufs.lse = {&lse.buffer(), 0};
    bind_head_values(head, bufs);
  }
};

// After an append both caches hold exactly the reference's values (bit for bit: a copy, or the
// blocks quantize_q8_0 makes, compared as the values they stand for), the untouched rows (NaN
// included) unchanged. Returns a line per cache that differs.
std::string appended_cache_mismatches(const ServingCase& c, const PagedSource& p, const PagedDevice& dev,
                                      const reference::PagedOutputs& ref) {
  std::string text;
  for (const auto& [name, buf, values] :
       {std::tuple{"k_cache", &dev.k_cache, &ref.k_cache}, std::tuple{"v_cache", &dev.v_cache, &ref.v_cache}}) {
    if (p.v_view && buf == &dev.v_cache) continue;  // one cache: K's
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
std::string run_step(const ServingCase& c, const PagedSource& p, const PagedData& d, const reference::PagedOutputs& ref,
                     const PreparedAttention& prepared, PagedDevice& dev, double& worst) {
  dev.k_cache.upload(d.k_bytes.data(), d.k_bytes.size());
  if (!p.v_view) dev.v_cache.upload(d.v_bytes.data(), d.v_bytes.size());
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
  if (p.seq_new) text += appended_cache_mismatches(c, p, dev, ref);
  return text;
}

}  // namespace

ServingResult run_source(Context& ctx, const ServingCase& c, const PagedSource& p, AttentionPath path,
                         const DeviceInfo* plan_for) {
  PagedData d = draw_paged_data(c, p);
  d.layouts.path = path;
  encode_caches(c, d);
  ServingResult result;
  const std::optional<PreparedAttention> prepared_call =
      prepare_serving_call(ctx, AttentionSpec::paged(d.layouts), plan_for, result);
  if (!prepared_call) return result;
  const PreparedAttention& prepared = *prepared_call;
  result.plan = std::string(prepared.plan().kernel) + " " + std::to_string(prepared.plan().splits) + " splits" +
                (prepared.plan().cascade ? ", cascade" : "");
  if (prepared.plan().cascade != p.cascade) {  // the case is there for the cascade (or for its absence)
    const std::string what = std::string("the plan ") + (p.cascade ? "does not run" : "runs") + " the cascade";
    // Another device's plan may weigh the cascade otherwise: the case is not what it tests there.
    (plan_for ? result.skip_reason : result.text) = what;
    return result;
  }
  const reference::PagedOutputs ref = paged_reference(c, p, d);
  PagedDevice dev(ctx, c, p, d);
  if (path == AttentionPath::unfused && prepared.plan().path != std::string("unfused")) {
    result.text = std::string("--path unfused, but the plan runs the ") + prepared.plan().path + " path";
    return result;
  }
  // Two steps of one plan, each from the original caches, on fresh poison.
  for (int step = 0; step < 2; ++step) {
    const std::string text = run_step(c, p, d, ref, prepared, dev, result.worst);
    if (!text.empty()) {
      result.text = "step " + std::to_string(step + 1) + ": " + text;
      return result;
    }
  }
  result.ok = true;
  return result;
}

FeatureTags features(const ServingCase& c, const PagedSource& p) {
  FeatureTags f = {{"dtype", to_string(c.dtype)}, {"layout", "paged " + std::to_string(p.page_size)}};
  if (p.order == PageOrder::hnd) f.emplace_back("layout", "paged hnd");
  if (p.seq_new) f.emplace_back("layout", "append");
  if (p.v_view) f.emplace_back("layout", "V a view of K");
  if (p.cascade) f.emplace_back("layout", "cascade");
  add_serving_features(c, f);
  return f;
}

}  // namespace vkattn::conform
