// A serving case's packed variable-length sequences (serving_case.hpp, PackedSource): Q, K, V and O
// as packed rows drawn from the seed, run through the PreparedAttention of a PackedKv spec with
// poisoned, guarded outputs (twice: the sequences in order, then reversed), compared with
// reference::varlen_attention (and, on the three-stage path, the weights P).
#include "conform/serving_sources.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <limits>
#include <random>
#include <functional>
#include <sstream>

#include "conform/attention_case.hpp"
#include "conform/case_modifiers.hpp"
#include "conform/compare.hpp"
#include "conform/guarded_buffer.hpp"
#include "conform/host_bytes.hpp"
#include "conform/q8_0_blocks.hpp"

namespace vkattn::conform {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<int32_t> offsets(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> cu(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b) cu[b + 1] = cu[b] + lengths[b];
  return cu;
}

// Packed rows (total, heads, dim) with `pad` elements after each row and before the first.
TensorLayout padded_layout(DType dtype, int64_t total, int64_t heads, int64_t dim, int64_t pad) {
  TensorLayout t = packed_layout(dtype, total, heads, dim);
  t.stride_seq = heads * dim + pad;
  t.stride_batch = total * t.stride_seq;
  t.offset = pad;
  return t;
}

// Values of `t`'s elements (rounded to the dtype), NaN in the gaps no element of t is.
std::vector<float> fill(const TensorLayout& t, const std::function<float()>& value, double* max_abs = nullptr) {
  std::vector<float> x(std::size_t(t.required_elements()), kNaN);
  for (int64_t i = 0; i < t.seq; ++i)
    for (int64_t h = 0; h < t.heads; ++h)
      for (int64_t d = 0; d < t.dim; ++d) {
        float& e = x[std::size_t(t.offset + i * t.stride_seq + h * t.stride_head + d)];
        e = value();
        if (max_abs) *max_abs = std::max(*max_abs, double(std::fabs(e)));
      }
  return x;
}

}  // namespace

reference::Outputs as_batch_one(const reference::VarlenOutputs& v) {
  reference::Outputs o;
  o.batch = 1;
  o.heads = v.heads;
  o.seq_q = v.total_q;
  o.dim_v = v.dim_v;
  o.out.resize(v.out.size());
  for (int64_t i = 0; i < v.total_q; ++i)
    for (int64_t h = 0; h < v.heads; ++h)
      for (int64_t d = 0; d < v.dim_v; ++d) o.out[std::size_t((h * v.total_q + i) * v.dim_v + d)] = v.at(i, h, d);
  o.lse = v.lse;  // (heads, total_q) already
  return o;
}

std::string describe(const ServingCase& c, const PackedSource& p) {
  std::ostringstream s;
  s << c.name << ": " << to_string(c.dtype);
  if (c.quant != KvQuant::none) s << " K/V " << to_string(c.quant);
  s << " H" << c.heads << "/KV" << c.kv_heads << " d" << c.dim_qk << "/"
    << c.dim_v << " seq_q/seq_k {";
  for (std::size_t b = 0; b < p.seq_q.size(); ++b) s << (b ? ", " : "") << p.seq_q[b] << "/" << p.seq_k[b];
  s << "}";
  if (p.loose_max) s << " max_seqlen 0";
  if (p.row_pad) s << " row pad " << p.row_pad;
  s << " causal " << to_string(c.causal);
  s << serving_text(c.modifiers);
  if (p.min_splits > 1) s << " split-KV";
  s << " seed " << c.seed;
  return s.str();
}

namespace {

// Everything a case draws from its seed, in the order it draws it, and the bytes the device reads.
struct VarlenData {
  int64_t batch = 0, total_q = 0, total_k = 0;
  VarlenAttentionLayouts layouts;
  std::vector<float> q, k, v;
  HeadValues head;
  double v_scale = 1e-30;  // the largest |V|: the outputs' error scale
  std::vector<uint8_t> k_bytes, v_bytes;  // K and V as the device holds them
};

// The layouts: packed rows `row_pad` apart, the longest sequences as the bounds (or none).
VarlenAttentionLayouts varlen_layouts(const ServingCase& c, const PackedSource& p, AttentionPath path,
                                      const VarlenData& d) {
  int64_t longest_q = 0, longest_k = 0;
  for (std::size_t b = 0; b < p.seq_q.size(); ++b)
    longest_q = std::max<int64_t>(longest_q, p.seq_q[b]), longest_k = std::max<int64_t>(longest_k, p.seq_k[b]);
  VarlenAttentionLayouts layouts;
  layouts.q = padded_layout(c.dtype, d.total_q, c.heads, c.dim_qk, p.row_pad);
  layouts.k = padded_layout(c.dtype, d.total_k, c.kv_heads, c.dim_qk, p.row_pad);
  layouts.v = padded_layout(c.dtype, d.total_k, c.kv_heads, c.dim_v, p.row_pad);
  layouts.out = padded_layout(c.dtype, d.total_q, c.heads, c.dim_v, p.row_pad);
  layouts.batch = d.batch;
  layouts.kv_quant = c.quant;
  layouts.max_seqlen_q = p.loose_max ? 0 : longest_q;
  layouts.max_seqlen_k = p.loose_max ? 0 : longest_k;
  layouts.has_lse = c.lse;
  layouts.path = path;
  layouts.weights = path == AttentionPath::unfused;
  layouts.options.causal = c.causal;
  apply_options(c.modifiers, layouts.options);
  return layouts;
}

// q8_0: the blocks of K and V (the gaps between rows, NaN: blocks of NaN scale), and the values they
// hold for the reference; else the dtype's encoding.
void encode_kv(const ServingCase& c, VarlenData& d) {
  if (c.quant == KvQuant::q8_0) {
    d.k.resize((d.k.size() + kQ8_0BlockElements - 1) / kQ8_0BlockElements * kQ8_0BlockElements, 0.0f);
    d.v.resize((d.v.size() + kQ8_0BlockElements - 1) / kQ8_0BlockElements * kQ8_0BlockElements, 0.0f);
    d.k_bytes = to_q8_0_blocks(d.k);
    d.v_bytes = to_q8_0_blocks(d.v);
  } else {
    d.k_bytes = encoded(c.dtype, d.k);
    d.v_bytes = encoded(c.dtype, d.v);
  }
}

VarlenData draw_varlen_data(const ServingCase& c, const PackedSource& p, AttentionPath path) {
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::function<float()> rounded = [&]() { return round_to(c.dtype, uniform(rng)); };
  VarlenData d;
  d.batch = static_cast<int64_t>(p.seq_q.size());
  int64_t longest_k = 0;
  for (std::size_t b = 0; b < p.seq_q.size(); ++b) {
    d.total_q += p.seq_q[b], d.total_k += p.seq_k[b];
    longest_k = std::max<int64_t>(longest_k, p.seq_k[b]);
  }
  d.layouts = varlen_layouts(c, p, path, d);
  d.q = fill(d.layouts.q, rounded);
  d.k = fill(d.layouts.k, rounded);
  d.v = fill(d.layouts.v, rounded, &d.v_scale);
  encode_kv(c, d);
  d.head = draw_head_values(c.modifiers, rng, c.heads, longest_k);
  set_layouts(d.head, d.layouts);
  return d;
}

// The case's buffers on the device, and the call's view of them. Built in place: bufs points into it.
struct VarlenDevice {
  Buffer q, k, v;
  HeadValueBuffers head;
  uint64_t rows;  // of LSE
  GuardedBuffer out, lse;
  // The offsets sit past 8 bytes of other data in their buffers (BufferSlice offsets).
  Buffer cu_q, cu_k;
  uint64_t weight_count;  // the three-stage path's P, (heads, total_q, total_k)
  std::optional<GuardedBuffer> weights;
  AttentionBuffers bufs;

  VarlenDevice(Context& ctx, const ServingCase& c, const VarlenData& d)
      : q(upload_bytes(ctx, encoded(c.dtype, d.q).data(), d.q.size() * dtype_size(c.dtype))),
        k(upload_bytes(ctx, d.k_bytes.data(), d.k_bytes.size())),
        v(upload_bytes(ctx, d.v_bytes.data(), d.v_bytes.size())),
        head(upload(ctx, d.head)),
        rows(uint64_t(c.heads * d.total_q)),
        out(ctx, uint64_t(d.layouts.out.required_elements()) * dtype_size(c.dtype)),
        lse(ctx, rows * 4),
        cu_q(Buffer::allocate(ctx, 8 + uint64_t(d.batch + 1) * 4)),
        cu_k(Buffer::allocate(ctx, 8 + uint64_t(d.batch + 1) * 4)),
        weight_count(d.layouts.weights ? uint64_t(c.heads * d.total_q) * uint64_t(d.total_k) : 0) {
    bufs.q = &q;
    bufs.k = &k;
    bufs.v = &v;
    bufs.out = &out.buffer();
    bufs.cu_seqlens_q = {&cu_q, 8};
    bufs.cu_seqlens_k = {&cu_k, 8};
    if (c.lse) bufs.lse = {&lse.buffer(), 0};
    bind_head_values(head, bufs);
  }

  // The weights' buffer, for the three-stage path (only once its plan is known to be built).
  void add_weights(Context& ctx) {
    weights.emplace(ctx, std::max<uint64_t>(weight_count, 1) * 4);
    bufs.weights = {&weights->buffer(), 0};
  }
};

// The three-stage path reads no q8_0: it must refuse before anything is built, naming the path that works.
ServingResult expect_q8_0_refusal(Context& ctx, const VarlenAttentionLayouts& layouts) {
  ServingResult result;
  try {
    (void)PreparedAttention(ctx, AttentionSpec::packed(layouts));
    result.text = "the three-stage path accepted q8_0 K and V, which it cannot read\n";
  } catch (const Error& e) {
    result.ok = e.code() == ErrorCode::unsupported && std::string(e.what()).find("fused path only") != std::string::npos;
    result.plan = "refused";
    if (!result.ok) result.text = std::string("the refusal of q8_0 on the three-stage path: ") + e.what() + "\n";
  }
  return result;
}

reference::VarlenOutputs varlen_reference(const VarlenData& d, std::span<const int32_t> cu_q,
                                          std::span<const int32_t> cu_k) {
  reference::VarlenInputs in;
  in.q_layout = d.layouts.q;
  in.k_layout = d.layouts.k;
  in.v_layout = d.layouts.v;
  in.q = d.q;
  in.k.values = d.k;
  in.v.values = d.v;
  in.cu_seqlens_q = cu_q;
  in.cu_seqlens_k = cu_k;
  in.options = d.layouts.options;
  set_reference_inputs(d.head, in);
  in.weights = d.layouts.weights;
  return reference::varlen_attention(in);
}

// O's rows (packed, padded) as (1, heads, total_q, dim_v).
std::vector<float> unpacked_out(const ServingCase& c, const VarlenData& d, const std::vector<float>& all_out) {
  std::vector<float> gpu_out(std::size_t(d.total_q * c.heads * c.dim_v));
  const TensorLayout& ol = d.layouts.out;
  for (int64_t i = 0; i < d.total_q; ++i)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t e = 0; e < c.dim_v; ++e)
        gpu_out[std::size_t((h * d.total_q + i) * c.dim_v + e)] =
            all_out[std::size_t(ol.offset + i * ol.stride_seq + h * ol.stride_head + e)];
  return gpu_out;
}

// One batch of the plan with the sequences of lengths len_q/len_k, on fresh poison: what differs
// from the reference.
std::string run_step(const ServingCase& c, const VarlenData& d, const PreparedAttention& prepared,
                     VarlenDevice& dev, const std::vector<int32_t>& len_q, const std::vector<int32_t>& len_k,
                     double& worst) {
  const std::vector<int32_t> cu_q = offsets(len_q), cu_k = offsets(len_k);
  check_varlen_values(d.layouts, cu_q, cu_k);
  dev.cu_q.upload(cu_q.data(), cu_q.size() * 4, 8);
  dev.cu_k.upload(cu_k.data(), cu_k.size() * 4, 8);
  const reference::VarlenOutputs packed = varlen_reference(d, cu_q, cu_k);
  const reference::Outputs ref = as_batch_one(packed);

  dev.out.reset();
  dev.lse.reset();
  if (dev.weights) dev.weights->reset();
  prepared.run(dev.bufs);
  std::string guard;
  const std::vector<float> gpu_out = unpacked_out(c, d, decoded(c.dtype, dev.out.download("out", guard)));
  std::vector<float> gpu_lse;
  if (c.lse) gpu_lse = dev.lse.download_f32("lse", dev.rows, guard);
  const Comparison cmp = compare_outputs(ref, gpu_out, gpu_lse, d.v_scale, c.dtype);
  worst = std::max(worst, cmp.worst);
  std::string text = guard + cmp.text;
  if (dev.weights) {
    const std::vector<float> gpu_weights = dev.weights->download_f32("weights", dev.weight_count, guard);
    const Comparison w =
        compare_weights(packed.weights, WeightsShape{1, c.heads, d.total_q, d.total_k}, gpu_weights, c.dtype);
    worst = std::max(worst, w.worst);
    text = guard + cmp.text + w.text;
  }
  return text;
}

}  // namespace

ServingResult run_source(Context& ctx, const ServingCase& c, const PackedSource& p, AttentionPath path,
                         const DeviceInfo* plan_for) {
  const VarlenData d = draw_varlen_data(c, p, path);
  ServingResult result;
  if (d.layouts.weights && c.quant != KvQuant::none) {
    if (!plan_for) return expect_q8_0_refusal(ctx, d.layouts);
    result.skip_reason = "a refusal of the local device's own plan, which the profile's replaces";
    return result;
  }
  const std::optional<PreparedAttention> prepared_call =
      prepare_serving_call(ctx, AttentionSpec::packed(d.layouts), plan_for, result);
  if (!prepared_call) return result;
  const PreparedAttention& prepared = *prepared_call;
  VarlenDevice dev(ctx, c, d);
  if (d.layouts.weights) dev.add_weights(ctx);
  result.plan = std::string(prepared.plan().kernel) + " " + std::to_string(prepared.plan().splits) + " splits";
  // (The fused path's split-KV. Another device's plan splits by its own measure; its answers are
  // checked all the same.)
  if (!plan_for && !d.layouts.weights && prepared.plan().splits < p.min_splits) {
    result.text = "the plan (" + result.plan + ") does not split the keys " + std::to_string(p.min_splits) +
                  " ways: the case no longer tests split-KV\n";
    return result;
  }
  // Two batches of one plan, each on fresh poison: the sequences in the case's order, then in reverse
  // (the same packed rows cut elsewhere; the bounds still hold).
  for (int step = 0; step < 2; ++step) {
    std::vector<int32_t> len_q = p.seq_q, len_k = p.seq_k;
    if (step == 1) std::reverse(len_q.begin(), len_q.end()), std::reverse(len_k.begin(), len_k.end());
    const std::string text = run_step(c, d, prepared, dev, len_q, len_k, result.worst);
    if (!text.empty()) {
      result.text = "step " + std::to_string(step + 1) + (step ? " (sequences reversed)" : "") +
                    " (batch 0, head, packed row, dim): " + text;
      return result;
    }
  }
  result.ok = true;
  return result;
}

FeatureTags features(const ServingCase& c, const PackedSource& p) {
  FeatureTags f = {{"dtype", to_string(c.dtype)}, {"layout", "varlen"}};
  if (p.row_pad) f.emplace_back("layout", "strided");
  add_serving_features(c, f);
  return f;
}

}  // namespace vkattn::conform
