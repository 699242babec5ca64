#include "run_paged.hpp"

#include "run_dropout.hpp"
#include "run_gradients.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "conform/compare.hpp"
#include "dtype_overflow.hpp"
#include "cli_numbers.hpp"
#include "npy.hpp"
#include "output_files.hpp"
#include "run_call.hpp"
#include "run_varlen.hpp"
#include "vkattn/error.hpp"
#include "vkattn/kv_cache.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/paged_attention.hpp"
#include "vkattn/q8_0.hpp"
#include "vkattn/serving_reference.hpp"

namespace vkattn::cli {
namespace {

constexpr const char* kPagedSet = "--k-cache, --v-cache, --block-table and --cache-lens";

// Everything the paged call needs, read and checked; the float values already rounded to the dtype
// (what the device and the reference see).
struct PagedInputs {
  PagedAttentionLayouts layouts;
  PagedProblem problem;
  std::vector<float> q, k_cache, v_cache, k_new, v_new;
  // --kv-dtype q8_0: the caches as uploaded, quantize_q8_0 of the values given (k_cache and v_cache
  // then hold what they stand for, dequantized).
  std::vector<uint8_t> k_cache_q8_0, v_cache_q8_0;
  std::vector<int32_t> block_table, cache_lens;
  PerHeadInputs per_head;
  bool out_f16 = false;  // O and the caches written as '<f2' (Q was '<f2' and the dtype is not bf16)
};

// The values of a float tensor in `dtype`, refusing overflow like the dense run.
std::vector<float> rounded_values(const npy::Array& array, const std::string& option, const std::string& path,
                                  DType dtype) {
  std::vector<float> values = npy::to_floats(array, path);
  check_fits_dtype(values, dtype, option + " (" + path + ")");
  for (float& x : values) x = round_to(dtype, x);
  return values;
}

// --block-table (batch, max_pages) or --cache-lens (batch,): '<i4' or '<i8', values within int32.
std::vector<int32_t> read_int32(const std::string& path, const char* option, int64_t batch, bool table,
                                int64_t* columns) {
  const std::string what = std::string(option) + " (" + path + ")";
  const npy::Array array = npy::read(path);
  if (array.kind != npy::Kind::i32 && array.kind != npy::Kind::i64)
    throw Error(what + ": dtype '" + array.descr + "' is not supported; use int32 ('<i4') or int64 ('<i8')");
  const auto& s = array.shape;
  if (table ? s.size() != 2 || s[0] != batch : s.size() != 1 || s[0] != batch)
    throw Error(what + ": shape " + array.shape_string() + " must be " +
                (table ? "(batch, max_pages) with batch = " + std::to_string(batch) + " (Q's)"
                       : "(batch,) = (" + std::to_string(batch) + ",)"));
  if (columns) *columns = s[1];
  const std::vector<int64_t> wide = npy::to_ints(array, path);
  std::vector<int32_t> values(wide.size());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < INT32_MIN || wide[i] > INT32_MAX)
      throw Error(what + ": value " + std::to_string(i) + " (" + std::to_string(wide[i]) + ") does not fit int32");
    values[i] = static_cast<int32_t>(wide[i]);
  }
  return values;
}

PagedInputs load_paged_inputs(const RunOptions& o) {
  PagedInputs in;
  const bool hnd = o.page_order == "hnd";
  const char* cache_dims = hnd ? "(num_pages, kv_heads, page_size, dim) (--page-order hnd)" : "(num_pages, page_size, kv_heads, dim)";
  const char* new_dims = "(batch, kv_heads, seq_new, dim)";
  const npy::Array q = read_4d(o.q, "Q");
  const npy::Array kc = read_4d(o.k_cache, "the K cache", cache_dims);
  const npy::Array vc = read_4d(o.v_cache, "the V cache", cache_dims);
  std::optional<npy::Array> kn, vn;
  std::vector<std::pair<const npy::Array*, std::string>> others = {{&kc, o.k_cache}, {&vc, o.v_cache}};
  if (!o.k_new.empty()) {
    kn = read_4d(o.k_new, "the new K", new_dims);
    vn = read_4d(o.v_new, "the new V", new_dims);
    others.insert(others.end(), {{&*kn, o.k_new}, {&*vn, o.v_new}});
  }
  const DType dtype = compute_dtype(o, q, others, "Q, the caches and the new K/V");
  in.out_f16 = q.kind == npy::Kind::f16 && dtype != DType::bf16;
  in.q = rounded_values(q, "--q", o.q, dtype);
  if (o.kv_dtype.empty()) {
    in.k_cache = rounded_values(kc, "--k-cache", o.k_cache, dtype);
    in.v_cache = rounded_values(vc, "--v-cache", o.v_cache, dtype);
  }
  if (kn) {
    in.k_new = rounded_values(*kn, "--k-new", o.k_new, dtype);
    in.v_new = rounded_values(*vn, "--v-new", o.v_new, dtype);
  }
  const int64_t batch = q.shape[0], heads = q.shape[1];
  int64_t max_pages = 0;
  in.block_table = read_int32(o.block_table, "--block-table", batch, true, &max_pages);
  in.cache_lens = read_int32(o.cache_lens, "--cache-lens", batch, false, nullptr);

  PagedAttentionLayouts& l = in.layouts;
  const KvQuant quant = o.kv_dtype == "q8_0" ? KvQuant::q8_0 : KvQuant::none;
  const auto cache = [&](const npy::Array& a) {
    const PageOrder order = hnd ? PageOrder::hnd : PageOrder::nhd;
    return PagedKvLayout::dense(dtype, a.shape[0], a.shape[hnd ? 2 : 1], a.shape[hnd ? 1 : 2], a.shape[3], quant, order);
  };
  const auto dense = [&](const std::vector<int64_t>& s) { return TensorLayout::bhsd(dtype, s[0], s[1], s[2], s[3]); };
  l.q = dense(q.shape);
  l.k_cache = cache(kc);
  l.v_cache = cache(vc);
  l.max_pages = max_pages;
  if (kn) l.k_new = dense(kn->shape), l.v_new = dense(vn->shape);
  l.out = TensorLayout::bhsd(dtype, batch, heads, q.shape[2], vc.shape[3]);
  l.has_lse = !o.lse.empty() || o.check;
  l.options.causal = parse_causal(o.causal);
  if (!o.scale.empty()) l.options.scale = parse_float32(o.scale, "--scale");
  apply_modifier_options(o.modifiers, l.options);
  l.path = parse_attention_path(o.path);
  in.per_head = PerHeadInputs::load(o.per_head_files, batch, heads, l.per_head());
  // The library's checks, with its messages: the layouts, then the table and lengths' values.
  in.problem = check_paged_attention(l);
  check_paged_values(in.problem, in.block_table, in.cache_lens);
  if (in.problem.quant == KvQuant::q8_0) {  // after the layouts' checks (dims of whole blocks)
    in.k_cache_q8_0 = quantize_kv(npy::to_floats(kc, o.k_cache), kc.shape[3], "--k-cache", o.k_cache);
    in.v_cache_q8_0 = quantize_kv(npy::to_floats(vc, o.v_cache), vc.shape[3], "--v-cache", o.v_cache);
    in.k_cache = dequantize_q8_0(in.k_cache_q8_0);
    in.v_cache = dequantize_q8_0(in.v_cache_q8_0);
    check_q8_0_v_fits_output(in.v_cache, l.out.dtype, "--v-cache (" + o.v_cache + ")");
    if (vn) {  // the device quantizes --v-new as it appends: its blocks' values reach O as well
      std::vector<float> finite = in.v_new;  // NaN and infinities are data (they propagate); not refused here
      for (float& x : finite)
        if (!std::isfinite(x)) x = 0.0f;
      check_q8_0_v_fits_output(dequantize_q8_0(quantize_q8_0(finite, vn->shape[3])), l.out.dtype,
                               "--v-new (" + o.v_new + ")");
    }
  }
  return in;
}

// max|V| over the rows the sequences hold and the appended ones: the scale of O's error.
double v_scale(const PagedInputs& in) {
  double scale = 0.0;
  const auto see = [&](float x) {
    if (std::isfinite(x)) scale = std::max(scale, double(std::fabs(x)));
  };
  const PagedKvLayout& vl = in.layouts.v_cache;
  const int64_t max_pages = in.problem.max_pages;
  for (std::size_t b = 0; b < in.cache_lens.size(); ++b)
    for (int64_t t = 0; t < in.cache_lens[b]; ++t) {
      const int64_t page = in.block_table[b * std::size_t(max_pages) + std::size_t(t / vl.page_size)];
      for (int64_t g = 0; g < vl.kv_heads; ++g)
        for (int64_t d = 0; d < vl.dim; ++d) see(in.v_cache[std::size_t(vl.index(page, t % vl.page_size, g, d))]);
    }
  for (float x : in.v_new) see(x);
  return scale;
}

// --check: O, LSE and (after an append) both caches against reference::paged_attention. One line on
// stdout when they agree; an Error naming the first difference when not.
void check_paged(const PagedInputs& in, std::span<const std::byte> out_raw, std::span<const float> lse,
                 std::span<const std::byte> k_after, std::span<const std::byte> v_after) {
  const PagedAttentionLayouts& l = in.layouts;
  reference::PagedInputs r;
  r.q_layout = l.q;
  r.q = in.q;
  r.k_cache_layout = l.k_cache;
  r.v_cache_layout = l.v_cache;
  if (in.problem.quant == KvQuant::q8_0) {
    r.k_cache.q8_0 = in.k_cache_q8_0;
    r.v_cache.q8_0 = in.v_cache_q8_0;
  } else {
    r.k_cache.values = in.k_cache;
    r.v_cache.values = in.v_cache;
  }
  r.max_pages = l.max_pages;
  r.block_table = in.block_table;
  r.cache_lens = in.cache_lens;
  r.k_new_layout = l.k_new;
  r.v_new_layout = l.v_new;
  r.k_new = in.k_new;
  r.v_new = in.v_new;
  r.options = l.options;
  r.per_head_values() = in.per_head.reference();
  const reference::PagedOutputs ref = reference::paged_attention(r);

  const DType dtype = l.q.dtype;
  std::vector<float> out(out_raw.size() / dtype_size(dtype));
  decode(dtype, out_raw.data(), out.data(), out.size());
  const conform::Comparison cmp = conform::compare_outputs(ref, out, lse, v_scale(in), dtype);
  if (!cmp.ok()) throw Error("--check: O/LSE differ from the fp64 reference: " + first_lines(cmp.text));
  std::string caches;
  if (in.problem.has_append()) {
    for (const auto& [option, got, want, layout] : {std::tuple{"--k-cache", k_after, &ref.k_cache, &l.k_cache},
                                                    std::tuple{"--v-cache", v_after, &ref.v_cache, &l.v_cache}}) {
      // Each element as stored (q8_0: the value its block stands for), bit for bit.
      const bool q8_0 = in.problem.quant == KvQuant::q8_0;
      const std::size_t esize = q8_0 ? 4 : dtype_size(dtype);
      std::vector<std::byte> bytes(want->size() * esize), have(bytes.size());
      if (q8_0) {
        const std::vector<float> values = dequantize_q8_0({reinterpret_cast<const uint8_t*>(got.data()), got.size()});
        std::memcpy(have.data(), values.data(), have.size());
        std::memcpy(bytes.data(), want->data(), bytes.size());
      } else {
        encode(dtype, want->data(), bytes.data(), want->size());
        std::memcpy(have.data(), got.data(), have.size());
      }
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] == have[i]) continue;
        // The element's (page, slot, kv head, dim), whichever order the page has.
        const int64_t e = int64_t(i / esize), row = e / layout->dim, rows_per_page = layout->page_size * layout->kv_heads;
        const int64_t page = row / rows_per_page, in_page = row % rows_per_page;
        const bool hnd = layout->order == PageOrder::hnd;
        const int64_t slot = hnd ? in_page % layout->page_size : in_page / layout->kv_heads;
        const int64_t head = hnd ? in_page / layout->page_size : in_page % layout->kv_heads;
        throw Error(std::string("--check: ") + option + " after the append differs from the reference's at page " +
                    std::to_string(page) + ", slot " + std::to_string(slot) + ", kv head " + std::to_string(head) +
                    ", dim " + std::to_string(e % layout->dim));
      }
    }
    caches = "; both caches after the append equal the reference's";
  }
  std::printf("check: passed: O and LSE within the %s tolerances of the fp64 reference (worst %.3g of the "
              "tolerance)%s\n",
              to_string(dtype), cmp.worst, caches.c_str());
}

}  // namespace

std::string run_usage_error(const RunOptions& o) {
  if (const std::string error = gradient_usage_error(o); !error.empty()) return error;
  if (const std::string error = dropout_usage_error(o); !error.empty()) return error;
  if (o.varlen()) return varlen_usage_error(o);
  const std::string paged = std::string("a paged cache (") + kPagedSet + ")";
  if (!o.paged()) {
    const std::pair<const char*, bool> paged_only[] = {
        {"--v-cache", !o.v_cache.empty()},         {"--block-table", !o.block_table.empty()},
        {"--cache-lens", !o.cache_lens.empty()},   {"--k-new", !o.k_new.empty()},
        {"--v-new", !o.v_new.empty()},             {"--k-cache-out", !o.k_cache_out.empty()},
        {"--v-cache-out", !o.v_cache_out.empty()}, {"--page-order", !o.page_order.empty()},
        {"--check", o.check}};
    for (const auto& [flag, given] : paged_only)
      if (given)
        return std::string(flag) + " needs " + paged +
               (std::string(flag) == "--check" ? " or packed sequences (--cu-seqlens-q, --cu-seqlens-k)" : "") +
               "; the dense run (--k, --v) does not take it";
    if (o.k.empty()) return std::string("--k is required, or a paged cache: ") + kPagedSet;
    if (o.v.empty()) return "--v is required";
    if (!o.kv_dtype.empty()) {  // q8_0 K/V: the fused kernels only (the three-stage path refuses them)
      for (const auto& [flag, path] : {std::pair{"--weights", &o.weights}, std::pair{"--heatmap", &o.heatmap}})
        if (!path->empty())
          return std::string(flag) + " cannot be used with --kv-dtype " + o.kv_dtype +
                 ": q8_0 K and V run on the fused kernels, which never store the attention weights";
      if (o.path == "unfused")
        return "--path unfused cannot run --kv-dtype " + o.kv_dtype +
               ": q8_0 K and V run on the fused kernels only (use --path fused or auto)";
    }
    return "";
  }
  if (!o.k.empty() || !o.v.empty())
    return std::string(o.k.empty() ? "--v" : "--k") + " with --k-cache: give dense K and V (--k, --v) or " + paged +
           ", not both";
  for (const auto& [flag, path] : {std::pair{"--v-cache", &o.v_cache}, std::pair{"--block-table", &o.block_table},
                                   std::pair{"--cache-lens", &o.cache_lens}})
    if (path->empty()) return std::string("--k-cache needs ") + flag + " (a paged cache is " + kPagedSet + " together)";
  if (o.k_new.empty() != o.v_new.empty())
    return std::string(o.k_new.empty() ? "--v-new needs --k-new" : "--k-new needs --v-new") +
           " (new keys and values are appended together)";
  for (const auto& [flag, path] : {std::pair{"--mask", &o.mask}, std::pair{"--kv-lens", &o.kv_lens}})
    if (!path->empty())
      return std::string(flag) +
             " cannot be used with a paged cache: the cache lengths (--cache-lens) are the key lengths";
  for (const auto& [flag, path] : {std::pair{"--weights", &o.weights}, std::pair{"--heatmap", &o.heatmap}})
    if (!path->empty())
      return std::string(flag) + " cannot be used with a paged cache: a paged call does not return the attention weights";
  return "";
}

int run_paged(const RunOptions& o) {
  FlagPaths inputs = {{"--q", o.q},           {"--k-cache", o.k_cache},       {"--v-cache", o.v_cache},
                      {"--block-table", o.block_table}, {"--cache-lens", o.cache_lens}, {"--k-new", o.k_new},
                      {"--v-new", o.v_new}};
  append_per_head_files(o.per_head_files, inputs);
  OutputFiles::check_destinations(
      {{"--out", o.out}, {"--lse", o.lse}, {"--k-cache-out", o.k_cache_out}, {"--v-cache-out", o.v_cache_out}}, inputs);
  const PagedInputs in = load_paged_inputs(o);
  const PagedAttentionLayouts& l = in.layouts;
  const DType dtype = l.q.dtype;

  ContextOptions context_options;
  context_options.device = o.device;
  Context context(context_options);
  const bool q8_0 = in.problem.quant == KvQuant::q8_0;
  CallValues values{.q = in.q, .k = in.k_cache, .v = in.v_cache, .k_q8_0 = in.k_cache_q8_0,
                    .v_q8_0 = in.v_cache_q8_0, .source_a = in.block_table, .source_b = in.cache_lens,
                    .k_new = in.k_new, .v_new = in.v_new, .per_head = &in.per_head};
  const bool caches_wanted = !o.k_cache_out.empty() || !o.v_cache_out.empty() || (o.check && in.problem.has_append());
  const CallResults r = run_call(context, AttentionSpec::paged(l), values, 0, caches_wanted);
  const std::vector<std::byte>&out_raw = r.out, &k_after = r.k_after, &v_after = r.v_after;
  const std::vector<float>& lse_values = r.lse;
  if (o.check) check_paged(in, out_raw, lse_values, k_after, v_after);

  OutputFiles files;
  files.stage(o.out, output_npy(out_raw, dtype, {l.out.batch, l.out.heads, l.out.seq, l.out.dim}, in.out_f16));
  if (!o.lse.empty()) {
    const std::vector<int64_t> shape = {l.out.batch, l.out.heads, l.out.seq};
    files.stage(o.lse, npy::serialize_floats(shape, lse_values, false));
  }
  const auto cache_shape = [](const PagedKvLayout& c) {
    const std::array<int64_t, 4> shape = c.storage_shape();
    return std::vector<int64_t>(shape.begin(), shape.end());
  };
  // (q8_0 caches are written as the f32 values their blocks stand for.)
  const auto cache_npy = [&](const std::vector<std::byte>& raw, const PagedKvLayout& c) {
    if (!q8_0) return output_npy(raw, dtype, cache_shape(c), in.out_f16);
    return npy::serialize_floats(cache_shape(c), dequantize_q8_0({reinterpret_cast<const uint8_t*>(raw.data()), raw.size()}), false);
  };
  if (!o.k_cache_out.empty()) files.stage(o.k_cache_out, cache_npy(k_after, l.k_cache));
  if (!o.v_cache_out.empty()) files.stage(o.v_cache_out, cache_npy(v_after, l.v_cache));
  files.commit();
  return 0;
}

}  // namespace vkattn::cli
