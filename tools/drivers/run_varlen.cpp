#include "run_varlen.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include "cli_numbers.hpp"
#include "conform/compare.hpp"
#include "conform/serving_case.hpp"
#include "dtype_overflow.hpp"
#include "npy.hpp"
#include "output_files.hpp"
#include "run_call.hpp"
#include "run_dropout.hpp"
#include "run_gradients.hpp"
#include "weights_budget.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/q8_0.hpp"
#include "vkattn/serving_reference.hpp"
#include "vkattn/varlen_attention.hpp"

namespace vkattn::cli {
namespace {

constexpr const char* kVarlenSet = "packed sequences (--cu-seqlens-q and --cu-seqlens-k)";

// Everything the varlen call needs, read and checked; the float values already rounded to the dtype
// (what the device and the reference see).
struct VarlenInputs {
  VarlenAttentionLayouts layouts;
  std::vector<float> q, k, v;  // q8_0: k and v hold what the blocks stand for, dequantized
  // --kv-dtype q8_0 (layouts.kv_quant): K and V as uploaded, quantize_q8_0 of the values read.
  std::vector<uint8_t> k_q8_0, v_q8_0;
  std::vector<int32_t> cu_q, cu_k;
  PerHeadInputs per_head;
  bool out_f16 = false;  // O written as '<f2' (Q was '<f2' and the dtype is not bf16)
};

npy::Array read_3d(const std::string& path, const char* role, const char* dims) {
  npy::Array array = npy::read(path);
  if (array.shape.size() != 3)
    throw Error(path + ": " + role + " must be a 3-D array " + dims + " with " + kVarlenSet + ", got shape " +
                array.shape_string());
  return array;
}

std::vector<float> rounded_values(const npy::Array& array, const std::string& option, const std::string& path,
                                  DType dtype) {
  std::vector<float> values = npy::to_floats(array, path);
  check_fits_dtype(values, dtype, option + " (" + path + ")");
  for (float& x : values) x = round_to(dtype, x);
  return values;
}

// --cu-seqlens-q or --cu-seqlens-k: (batch + 1,) '<i4' or '<i8', values within int32 (their order and
// ends are check_cu_seqlens's, in check_varlen_values).
std::vector<int32_t> read_offsets(const std::string& path, const char* option) {
  const std::string what = std::string(option) + " (" + path + ")";
  const npy::Array array = npy::read(path);
  if (array.kind != npy::Kind::i32 && array.kind != npy::Kind::i64)
    throw Error(what + ": dtype '" + array.descr + "' is not supported; use int32 ('<i4') or int64 ('<i8')");
  if (array.shape.size() != 1 || array.shape[0] < 2)
    throw Error(what + ": shape " + array.shape_string() + " must be (batch + 1,) with batch >= 1");
  const std::vector<int64_t> wide = npy::to_ints(array, path);
  std::vector<int32_t> values(wide.size());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < INT32_MIN || wide[i] > INT32_MAX)
      throw Error(what + ": value " + std::to_string(i) + " (" + std::to_string(wide[i]) + ") does not fit int32");
    values[i] = static_cast<int32_t>(wide[i]);
  }
  return values;
}

// The longest sequence of `cu` (ordered offsets): the call's max_seqlen, 0 (the total) when all are empty.
int64_t longest(const std::vector<int32_t>& cu) {
  int64_t most = 0;
  for (std::size_t b = 0; b + 1 < cu.size(); ++b) most = std::max<int64_t>(most, int64_t(cu[b + 1]) - cu[b]);
  return most;
}

VarlenInputs load_varlen_inputs(const RunOptions& o) {
  VarlenInputs in;
  const npy::Array q = read_3d(o.q, "Q", "(total_q, heads, dim_qk)");
  const npy::Array k = read_3d(o.k, "K", "(total_k, kv_heads, dim_qk)");
  const npy::Array v = read_3d(o.v, "V", "(total_k, kv_heads, dim_v)");
  const DType dtype = compute_dtype(o, q, {{&k, o.k}, {&v, o.v}}, "Q, K and V");
  in.out_f16 = q.kind == npy::Kind::f16 && dtype != DType::bf16;
  in.q = rounded_values(q, "--q", o.q, dtype);
  // q8_0 K and V are quantized from the values read (below, after the layouts' checks), never stored in
  // the dtype.
  const bool q8_0 = o.kv_dtype == "q8_0";
  if (!q8_0) {
    in.k = rounded_values(k, "--k", o.k, dtype);
    in.v = rounded_values(v, "--v", o.v, dtype);
  }
  in.cu_q = read_offsets(o.cu_seqlens_q, "--cu-seqlens-q");
  in.cu_k = read_offsets(o.cu_seqlens_k, "--cu-seqlens-k");
  if (in.cu_k.size() != in.cu_q.size())
    throw Error("--cu-seqlens-k (" + o.cu_seqlens_k + "): " + std::to_string(in.cu_k.size()) +
                " values, but --cu-seqlens-q has " + std::to_string(in.cu_q.size()) + ": both hold batch + 1");
  const int64_t batch = int64_t(in.cu_q.size()) - 1, heads = q.shape[1];

  VarlenAttentionLayouts& l = in.layouts;
  l.q = packed_layout(dtype, q.shape[0], q.shape[1], q.shape[2]);
  l.k = packed_layout(dtype, k.shape[0], k.shape[1], k.shape[2]);
  l.v = packed_layout(dtype, v.shape[0], v.shape[1], v.shape[2]);
  l.out = packed_layout(dtype, q.shape[0], q.shape[1], v.shape[2]);
  l.kv_quant = q8_0 ? KvQuant::q8_0 : KvQuant::none;
  l.batch = batch;
  l.has_lse = !o.lse.empty() || o.check;
  l.weights = !o.weights.empty();  // P (heads, total_q, total_k): the three-stage path
  l.path = parse_attention_path(o.path);
  l.options.causal = parse_causal(o.causal);
  if (!o.scale.empty()) l.options.scale = parse_float32(o.scale, "--scale");
  apply_modifier_options(o.modifiers, l.options);
  in.per_head = PerHeadInputs::load(o.per_head_files, batch, heads, l.per_head());
  // The library's checks, with its messages: the layouts, then the offsets (ordered, ending at the
  // totals). The bounds are the longest sequences, known here from the offsets.
  (void)check_varlen_attention(l);
  check_cu_seqlens("--cu-seqlens-q", in.cu_q, batch, l.q.seq, "total_q (Q's rows)");
  check_cu_seqlens("--cu-seqlens-k", in.cu_k, batch, l.k.seq, "total_k (K's rows)");
  l.max_seqlen_q = longest(in.cu_q);
  l.max_seqlen_k = longest(in.cu_k);
  check_varlen_values(l, in.cu_q, in.cu_k);
  if (q8_0) {  // packed (total, kv_heads, dim) rows: the file's order
    in.k_q8_0 = quantize_kv(npy::to_floats(k, o.k), k.shape[2], "--k", o.k);
    in.v_q8_0 = quantize_kv(npy::to_floats(v, o.v), v.shape[2], "--v", o.v);
    in.k = dequantize_q8_0(in.k_q8_0);
    in.v = dequantize_q8_0(in.v_q8_0);
    check_q8_0_v_fits_output(in.v, l.out.dtype, "--v (" + o.v + ")");
  }
  return in;
}

// --check: O and LSE (and P with --weights) against reference::varlen_attention. One line on stdout
// when they agree; an Error naming the first difference when not.
void check_varlen(const VarlenInputs& in, std::span<const std::byte> out_raw, std::span<const float> lse,
                  std::span<const float> weights) {
  const VarlenAttentionLayouts& l = in.layouts;
  reference::VarlenInputs r;
  r.q_layout = l.q;
  r.k_layout = l.k;
  r.v_layout = l.v;
  r.q = in.q;
  r.kv_quant = l.kv_quant;
  if (l.kv_quant == KvQuant::q8_0) {
    r.k.q8_0 = in.k_q8_0;
    r.v.q8_0 = in.v_q8_0;
  } else {
    r.k.values = in.k;
    r.v.values = in.v;
  }
  r.cu_seqlens_q = in.cu_q;
  r.cu_seqlens_k = in.cu_k;
  r.options = l.options;
  r.per_head_values() = in.per_head.reference();
  r.weights = l.weights;
  const reference::VarlenOutputs packed_ref = reference::varlen_attention(r);
  const reference::Outputs ref = conform::as_batch_one(packed_ref);

  const DType dtype = l.q.dtype;
  const int64_t total = l.out.seq, heads = l.out.heads, dim = l.out.dim;
  std::vector<float> packed(out_raw.size() / dtype_size(dtype));
  decode(dtype, out_raw.data(), packed.data(), packed.size());
  std::vector<float> out(packed.size());  // (heads, total_q, dim_v), the comparison's order
  for (int64_t i = 0; i < total; ++i)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < dim; ++d)
        out[std::size_t((h * total + i) * dim + d)] = packed[std::size_t((i * heads + h) * dim + d)];
  double v_scale = 0.0;
  for (float x : in.v)
    if (std::isfinite(x)) v_scale = std::max(v_scale, double(std::fabs(x)));
  const conform::Comparison cmp = conform::compare_outputs(ref, out, lse, v_scale, dtype);
  if (!cmp.ok())
    throw Error("--check: O/LSE differ from the fp64 reference (at batch 0, head, packed row, dim): " + first_lines(cmp.text));
  double worst = cmp.worst;
  if (l.weights) {
    const conform::Comparison w = conform::compare_weights(
        packed_ref.weights, conform::WeightsShape{1, heads, total, l.k.seq}, weights, dtype);
    if (!w.ok())
      throw Error("--check: P differs from the fp64 reference (at batch 0, head, packed row, packed key): " +
                  first_lines(w.text));
    worst = std::max(worst, w.worst);
  }
  std::printf("check: passed: O, LSE%s within the %s tolerances of the fp64 reference (worst %.3g of the "
              "tolerance)\n",
              l.weights ? " and P" : "", to_string(dtype), worst);
}

}  // namespace

std::string varlen_usage_error(const RunOptions& o) {
  if (o.cu_seqlens_q.empty() || o.cu_seqlens_k.empty())
    return std::string(o.cu_seqlens_q.empty() ? "--cu-seqlens-k needs --cu-seqlens-q" : "--cu-seqlens-q needs --cu-seqlens-k") +
           " (" + kVarlenSet + " come together)";
  const std::pair<const char*, bool> paged[] = {
      {"--k-cache", !o.k_cache.empty()},         {"--v-cache", !o.v_cache.empty()},
      {"--block-table", !o.block_table.empty()}, {"--cache-lens", !o.cache_lens.empty()},
      {"--k-new", !o.k_new.empty()},             {"--v-new", !o.v_new.empty()},
      {"--k-cache-out", !o.k_cache_out.empty()}, {"--v-cache-out", !o.v_cache_out.empty()}};
  for (const auto& [flag, given] : paged)
    if (given) return std::string(flag) + " cannot be used with " + kVarlenSet + ": it belongs to a paged cache";
  if (o.k.empty()) return std::string("--k is required with ") + kVarlenSet;
  if (o.v.empty()) return std::string("--v is required with ") + kVarlenSet;
  for (const auto& [flag, path] : {std::pair{"--mask", &o.mask}, std::pair{"--kv-lens", &o.kv_lens}})
    if (!path->empty())
      return std::string(flag) + " cannot be used with " + kVarlenSet +
             ": --cu-seqlens-k gives each sequence its keys";
  if (!o.heatmap.empty())
    return std::string("--heatmap cannot be used with ") + kVarlenSet +
           ": it draws a dense call's (seq_q, seq_k) blocks (write P with --weights)";
  if (!o.weights.empty() && o.path == "fused")
    return "--path fused cannot give --weights: the fused path never stores the attention weights (use --path unfused or auto)";
  return "";
}

int run_varlen(const RunOptions& o) {
  FlagPaths inputs = {{"--q", o.q}, {"--k", o.k}, {"--v", o.v}, {"--cu-seqlens-q", o.cu_seqlens_q},
                      {"--cu-seqlens-k", o.cu_seqlens_k}};
  append_per_head_files(o.per_head_files, inputs);
  inputs.push_back({"--grad-out", o.grad_out});
  FlagPaths outputs = {{"--out", o.out}, {"--lse", o.lse}, {"--weights", o.weights}, {"--dropout-mask", o.dropout_mask}};
  append_gradient_outputs(o, outputs);
  OutputFiles::check_destinations(outputs, inputs);
  VarlenInputs in = load_varlen_inputs(o);
  // The backward pass and dropout's output pass read the forward's LSE.
  if (apply_dropout_option(o, in.layouts.options) || o.backward()) in.layouts.has_lse = true;
  const VarlenAttentionLayouts& l = in.layouts;
  const DType dtype = l.q.dtype;
  const std::vector<float> grad_out = load_grad_out(o, dtype, {l.out.seq, l.out.heads, l.out.dim});

  ContextOptions context_options;
  context_options.device = o.device;
  Context context(context_options);
  // Before anything is allocated: P grows with total_q·total_k and is the one buffer that may not fit.
  if (l.weights) check_weights_fit(1, l.q.heads, l.q.seq, l.k.seq, context.device_info(), "--weights");
  const CallValues values{.q = in.q, .k = in.k, .v = in.v, .k_q8_0 = in.k_q8_0, .v_q8_0 = in.v_q8_0,
                          .source_a = in.cu_q, .source_b = in.cu_k, .per_head = &in.per_head, .grad_out = grad_out};
  const uint64_t weight_count = l.weights ? uint64_t(l.out.heads * l.out.seq * l.k.seq) : 0;
  const CallResults r = run_call(context, AttentionSpec::packed(l), values, weight_count);
  const std::vector<std::byte>& out_raw = r.out;
  const std::vector<float>&lse_values = r.lse, &weight_values = r.weights;
  if (o.check) check_varlen(in, out_raw, lse_values, weight_values);

  OutputFiles files;
  files.stage(o.out, output_npy(out_raw, dtype, {l.out.seq, l.out.heads, l.out.dim}, in.out_f16));
  const auto shape_of = [](const TensorLayout& t) { return std::vector<int64_t>{t.seq, t.heads, t.dim}; };
  stage_gradients(files, o, r, dtype, in.out_f16, shape_of(l.q), shape_of(l.k), shape_of(l.v));
  stage_packed_dropout_mask(files, o, l.options, l.out.heads, in.cu_q, in.cu_k);
  if (!o.lse.empty()) {
    const std::vector<int64_t> shape = {l.out.heads, l.out.seq};
    files.stage(o.lse, npy::serialize_floats(shape, lse_values, false));
  }
  if (l.weights) {
    const std::vector<int64_t> shape = {l.out.heads, l.out.seq, l.k.seq};
    files.stage(o.weights, npy::serialize_floats(shape, weight_values, false));
  }
  files.commit();
  return 0;
}

}  // namespace vkattn::cli
