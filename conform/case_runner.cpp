#include "conform/case_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "conform/case_modifiers.hpp"
#include "conform/compare.hpp"
#include "conform/guarded_buffer.hpp"
#include "conform/host_bytes.hpp"
#include "conform/q8_0_blocks.hpp"

namespace vkattn::conform {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TensorLayout make_layout(LayoutKind kind, DType dtype, int64_t b, int64_t h, int64_t s, int64_t d, int64_t offset) {
  TensorLayout l;
  switch (kind) {
    case LayoutKind::bhsd:
      l = TensorLayout::bhsd(dtype, b, h, s, d);
      break;
    case LayoutKind::bshd:
      l = TensorLayout::bshd(dtype, b, s, h, d);
      break;
    case LayoutKind::padded:
      // Odd gaps after every head, sequence row and batch, so a kernel that assumes density reads NaN.
      l = TensorLayout::bshd(dtype, b, s, h, d);
      l.stride_head = d + 1;
      l.stride_seq = h * l.stride_head + 3;
      l.stride_batch = s * l.stride_seq + 5;
      break;
  }
  l.offset = offset;
  return l;
}

// A tensor's host values: element i is at index i of the layout; gaps (offset, padding) are NaN.
struct HostTensor {
  TensorLayout layout;
  std::vector<float> values;

  HostTensor(const TensorLayout& l, std::mt19937_64& rng, float range) : layout(l) {
    values.assign(static_cast<std::size_t>(l.required_elements()), kNaN);
    std::uniform_real_distribution<float> dist(-range, range);
    for (int64_t b = 0; b < l.batch; ++b)
      for (int64_t h = 0; h < l.heads; ++h)
        for (int64_t s = 0; s < l.seq; ++s)
          for (int64_t d = 0; d < l.dim; ++d) at(b, h, s, d) = round_to(l.dtype, dist(rng));
  }
  float& at(int64_t b, int64_t h, int64_t s, int64_t d) { return values[static_cast<std::size_t>(layout.index(b, h, s, d))]; }
  std::vector<uint8_t> encoded() const { return conform::encoded(layout.dtype, values); }
};

// A tensor's values as q8_0 blocks (to_q8_0_blocks), from index 0 to a whole number of blocks (q8_0
// layouts have offsets, strides and dims of whole blocks; the tail past the last element is a gap).
std::vector<uint8_t> q8_0_blocks(HostTensor& t) {
  std::vector<float> values(t.values);
  values.resize((values.size() + kQ8_0BlockElements - 1) / kQ8_0BlockElements * kQ8_0BlockElements, kNaN);
  std::vector<uint8_t> bytes = to_q8_0_blocks(values);
  std::copy_n(values.begin(), t.values.size(), t.values.begin());
  return bytes;
}

// The explicit mask: values as the reference reads them (bool: 0 / nonzero) and the bytes the device reads.
struct HostMask {
  MaskLayout layout;
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};

HostMask make_mask(const AttentionCase& c, std::mt19937_64& rng) {
  HostMask m;
  const MaskType type = c.mask == MaskKind::boolean ? MaskType::boolean : c.mask == MaskKind::f32 ? MaskType::f32 : MaskType::f16;
  m.layout = MaskLayout::dense(type, c.mask_batch, c.mask_heads, c.seq_q, c.seq_k);
  m.layout.offset = c.offset;
  const std::size_t n = static_cast<std::size_t>(m.layout.required_elements());
  // Gaps: "attend" for bool, NaN for float masks, so a misplaced read shows.
  m.values.assign(n, type == MaskType::boolean ? 1.0f : kNaN);
  std::bernoulli_distribution drop(c.mask_drop);
  std::uniform_real_distribution<float> bias(-2.0f, 2.0f);
  std::uniform_int_distribution<int> nonzero(1, 255);  // any nonzero byte means "attend"
  auto blank = [](const std::vector<int64_t>& list, int64_t x) { return std::find(list.begin(), list.end(), x) != list.end(); };
  for (int64_t b = 0; b < c.mask_batch; ++b)
    for (int64_t h = 0; h < c.mask_heads; ++h)
      for (int64_t i = 0; i < c.seq_q; ++i)
        for (int64_t j = 0; j < c.seq_k; ++j) {
          const bool hide = drop(rng) || blank(c.mask_blank_rows, i) || blank(c.mask_blank_keys, j);
          float v = 0.0f;
          if (type == MaskType::boolean) {
            v = hide ? 0.0f : static_cast<float>(nonzero(rng) % 2 ? 1 : nonzero(rng));
          } else {
            v = hide ? -kInf : bias(rng);
            if (type == MaskType::f16) v = round_to(DType::f16, v);
          }
          m.values[static_cast<std::size_t>(m.layout.index(b, h, i, j))] = v;
        }
  m.bytes.resize(n * mask_type_size(type));
  if (type == MaskType::boolean) {
    for (std::size_t e = 0; e < n; ++e) m.bytes[e] = static_cast<uint8_t>(m.values[e]);
  } else {
    encode(type == MaskType::f32 ? DType::f32 : DType::f16, m.values.data(), m.bytes.data(), n);
  }
  return m;
}

// Plants NaN / Inf in every K and V row that no query row of any head in its group may see, so a
// kernel that reads (rather than skips) a masked key fails.
void poison_hidden_keys(const AttentionCase& c, const HostMask* mask, HostTensor& k, HostTensor& v) {
  // The visible band of each row (causal and the modifiers' options), as check_attention resolves it.
  AttentionLayouts l;
  l.q = TensorLayout::bhsd(c.dtype, 1, 1, c.seq_q, 1);
  l.k = l.v = TensorLayout::bhsd(c.dtype, 1, 1, c.seq_k, 1);
  l.out = l.q;
  l.options.causal = c.causal;
  apply_options(c.modifiers, l.options);
  const AttentionProblem p = check_attention(l);
  const int64_t group = c.heads / c.kv_heads;
  const float poison[3] = {kNaN, kInf, -kInf};
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = c.kv_lengths.empty() ? c.seq_k : c.kv_lengths[static_cast<std::size_t>(b)];
    for (int64_t g = 0; g < c.kv_heads; ++g) {
      for (int64_t j = 0; j < c.seq_k; ++j) {
        bool seen = false;
        for (int64_t h = g * group; h < (g + 1) * group && !seen; ++h) {
          for (int64_t i = 0; i < c.seq_q && !seen; ++i) {
            if (j >= len || j < p.visible_key_begin(i) || j >= p.visible_key_end(i)) continue;
            if (mask) {
              const float m = mask->values[static_cast<std::size_t>(mask->layout.index(b, h, i, j))];
              if (m == 0.0f && mask->layout.type == MaskType::boolean) continue;
              if (m == -kInf) continue;
            }
            seen = true;
          }
        }
        if (seen) continue;
        for (int64_t d = 0; d < c.dim_qk; ++d) k.at(b, g, j, d) = poison[(j + d) % 3];
        for (int64_t d = 0; d < c.dim_v; ++d) v.at(b, g, j, d) = poison[(j + d + 1) % 3];
      }
    }
  }
}

double max_abs_finite(const HostTensor& t) {
  double m = 0.0;
  for (int64_t b = 0; b < t.layout.batch; ++b)
    for (int64_t h = 0; h < t.layout.heads; ++h)
      for (int64_t s = 0; s < t.layout.seq; ++s)
        for (int64_t d = 0; d < t.layout.dim; ++d) {
          const float x = t.values[static_cast<std::size_t>(t.layout.index(b, h, s, d))];
          if (std::isfinite(x)) m = std::max(m, static_cast<double>(std::abs(x)));
        }
  return std::max(m, 1e-30);
}

// Extracts O from the downloaded output bytes as dense (B, H, Sq, Dv) f32, and reports elements
// outside the tensor (offset, padding) that lost their poison.
std::vector<float> extract_out(const TensorLayout& l, const std::vector<uint8_t>& bytes, uint8_t poison,
                               std::vector<std::string>& problems) {
  const std::size_t esize = dtype_size(l.dtype);
  std::vector<float> all(bytes.size() / esize);
  decode(l.dtype, bytes.data(), all.data(), all.size());
  std::vector<bool> covered(all.size(), false);
  std::vector<float> dense(static_cast<std::size_t>(l.element_count()));
  std::size_t n = 0;
  for (int64_t b = 0; b < l.batch; ++b)
    for (int64_t h = 0; h < l.heads; ++h)
      for (int64_t s = 0; s < l.seq; ++s)
        for (int64_t d = 0; d < l.dim; ++d) {
          const std::size_t idx = static_cast<std::size_t>(l.index(b, h, s, d));
          covered[idx] = true;
          dense[n++] = all[idx];
        }
  uint64_t touched = 0;
  for (std::size_t e = 0; e < all.size(); ++e) {
    if (covered[e]) continue;
    for (std::size_t byte = 0; byte < esize; ++byte) {
      if (bytes[e * esize + byte] != poison) {
        ++touched;
        break;
      }
    }
  }
  if (touched) problems.push_back("out: " + std::to_string(touched) + " elements outside the tensor (offset/gaps) were written");
  return dense;
}

// The f32 words of a guarded slice after `offset` bytes, reporting bytes before it that lost their poison.
std::vector<float> extract_slice(const char* what, const std::vector<uint8_t>& bytes, uint64_t offset, uint64_t count,
                                 uint8_t poison, std::vector<std::string>& problems) {
  for (uint64_t b = 0; b < offset; ++b) {
    if (bytes[b] != poison) {
      problems.push_back(std::string(what) + ": byte " + std::to_string(b) + " before the slice was written");
      break;
    }
  }
  std::vector<float> values(count);
  if (count) std::memcpy(values.data(), bytes.data() + offset, count * 4);
  return values;
}

// Everything a case draws from its seed, in the order it draws it.
struct CaseInputs {
  HostTensor q, k, v;
  TensorLayout out_layout;
  std::optional<HostMask> mask;
  HeadValues head;
  // q8_0 K and V: the blocks of the drawn values (gaps: 0, blocks whose scale is NaN where a whole
  // block is gap), and what they stand for is what the reference sees.
  std::vector<uint8_t> k_q8_0, v_q8_0;
  double v_scale = 0.0;

  CaseInputs(const AttentionCase& c, std::mt19937_64& rng)
      : q(make_layout(c.layout, c.dtype, c.batch, c.heads, c.seq_q, c.dim_qk, c.offset), rng, c.qk_range),
        k(make_layout(c.layout, c.dtype, c.batch, c.kv_heads, c.seq_k, c.dim_qk, c.offset), rng, c.qk_range),
        v(make_layout(c.layout, c.dtype, c.batch, c.kv_heads, c.seq_k, c.dim_v, c.offset), rng, 1.0f),
        out_layout(make_layout(c.layout, c.dtype, c.batch, c.heads, c.seq_q, c.dim_v, c.offset)) {
    if (c.mask != MaskKind::none) mask = make_mask(c, rng);
    if (c.poison_hidden_kv) poison_hidden_keys(c, mask ? &*mask : nullptr, k, v);
    for (const int64_t i : c.nan_q_rows) q.at(0, 0, i, 0) = kNaN;
    // With an offset, the per-head tensors start past junk too: 1 and 3 elements.
    head = draw_head_values(c.modifiers, rng, c.heads, c.seq_k, PerHead<int64_t>{c.offset ? 1 : 0, c.offset ? 3 : 0});
    if (c.kv_quant == KvQuant::q8_0) {
      k_q8_0 = q8_0_blocks(k);
      v_q8_0 = q8_0_blocks(v);
    }
    v_scale = max_abs_finite(v);
  }
};

// The case's buffers on the device and the call's arguments over them. Inputs carry their gaps (NaN)
// too; outputs are poisoned and guarded. Built in place: args points into it.
struct CaseDevice {
  Buffer q, k, v;
  GuardedBuffer out;
  uint64_t lse_offset, lse_count;
  std::optional<GuardedBuffer> lse;
  uint64_t weights_offset, weights_count;
  std::optional<GuardedBuffer> weights;
  std::optional<Buffer> mask, kv_lengths;
  HeadValueBuffers head;
  uint64_t kv_offset;
  AttentionArgs args;

  CaseDevice(Context& ctx, const AttentionCase& c, const CaseInputs& in, const RunOptions& options)
      : q(upload(ctx, in.q.encoded())),
        k(upload(ctx, in.k_q8_0.empty() ? in.k.encoded() : in.k_q8_0)),
        v(upload(ctx, in.v_q8_0.empty() ? in.v.encoded() : in.v_q8_0)),
        out(ctx, static_cast<uint64_t>(in.out_layout.required_elements()) * dtype_size(c.dtype)),
        lse_offset(4 * static_cast<uint64_t>(c.offset)),
        lse_count(static_cast<uint64_t>(c.batch * c.heads * c.seq_q)),
        weights_offset(4 * static_cast<uint64_t>(c.offset)),
        weights_count(static_cast<uint64_t>(c.batch * c.heads * c.seq_q * c.seq_k)),
        kv_offset(c.offset ? 8 : 0) {
    const bool want_weights = options.path == AttentionPath::unfused;
    if (c.lse) lse.emplace(ctx, lse_offset + 4 * lse_count);
    if (want_weights && c.unfused_refusal.empty()) weights.emplace(ctx, weights_offset + 4 * weights_count);
    if (in.mask) mask.emplace(upload(ctx, in.mask->bytes));
    head = conform::upload(ctx, in.head);
    if (!c.kv_lengths.empty()) {
      std::vector<int32_t> words(kv_offset / 4, std::numeric_limits<int32_t>::min());  // junk before
      const std::vector<int32_t>& lengths = c.gpu_kv_lengths.empty() ? c.kv_lengths : c.gpu_kv_lengths;
      words.insert(words.end(), lengths.begin(), lengths.end());
      kv_lengths.emplace(upload_bytes(ctx, words.data(), words.size() * 4));
    }
    bind_args(c, in, options);
  }

 private:
  static Buffer upload(Context& ctx, const std::vector<uint8_t>& bytes) {
    return upload_bytes(ctx, bytes.data(), bytes.size());
  }

  void bind_args(const AttentionCase& c, const CaseInputs& in, const RunOptions& options) {
    args.q = {&q, in.q.layout};
    args.k = {&k, in.k.layout};
    args.v = {&v, in.v.layout};
    args.kv_quant = c.kv_quant;
    args.out = {&out.buffer(), in.out_layout};
    if (lse) args.lse = {&lse->buffer(), lse_offset};
    if (in.mask) args.mask = {&*mask, in.mask->layout};
    if (kv_lengths) args.kv_lengths = {&*kv_lengths, kv_offset};
    args.options.scale = c.scale;
    args.options.causal = c.causal;
    apply_options(c.modifiers, args.options);
    bind_head_values(head, in.head, args);
    args.path = options.path;
    if (weights) args.weights = {&weights->buffer(), weights_offset};
  }
};

// A case the three-stage path binds each KV head of whole: it must refuse, naming the path that works.
void check_unfused_refusal(Context& ctx, const AttentionCase& c, const RunOptions& options, const AttentionArgs& args,
                           CaseResult& result) {
  if (options.profile) {
    result.skip_reason = "a refusal of the local device's own plan, which --profile replaces";
    return;
  }
  std::string message = "<no vkattn::Error thrown>";
  try {
    attention(ctx, args);
  } catch (const Error& e) {
    message = e.what();
  }
  if (message.find(c.unfused_refusal) == std::string::npos)
    result.problems.push_back("the unfused path must refuse this case with \"" + c.unfused_refusal + "\"; it said: " + message);
}

reference::Outputs case_reference(const AttentionCase& c, const CaseInputs& in, const AttentionArgs& args,
                                  bool want_weights) {
  reference::Inputs r;
  r.q_layout = in.q.layout;
  r.k_layout = in.k.layout;
  r.v_layout = in.v.layout;
  r.q = in.q.values;
  r.k = in.k.values;
  r.v = in.v.values;
  if (in.mask) {
    r.mask_layout = in.mask->layout;
    r.mask = in.mask->values;
  }
  r.kv_lengths = c.kv_lengths;
  r.options = args.options;
  set_reference_inputs(in.head, r);
  r.weights = want_weights;
  return reference::attention(r, c.reference_rows);
}

// The call on the device, or the plan the profile makes of it; false when that plan does not fit
// (the skip reason set).
bool run_on_device(Context& ctx, const RunOptions& options, const AttentionArgs& args, CaseResult& result) {
  if (!options.profile) {
    attention(ctx, args);
    return true;
  }
  try {
    PreparedAttention(ctx, AttentionSpec::of(args), *options.profile).run(AttentionBuffers::of(args));
  } catch (const PlanDoesNotFit& e) {
    result.skip_reason = e.what();
    return false;
  }
  return true;
}

// The device's O, LSE and weights against the reference's, and the guards.
void compare_with_reference(const AttentionCase& c, const CaseInputs& in, const CaseDevice& dev,
                            const reference::Outputs& ref, CaseResult& result) {
  std::string guard;
  const std::vector<float> gpu_out =
      extract_out(in.out_layout, dev.out.download("out", guard), dev.out.poison(), result.problems);
  std::vector<float> gpu_lse;
  if (dev.lse)
    gpu_lse = extract_slice("lse", dev.lse->download("lse", guard), dev.lse_offset, dev.lse_count, dev.lse->poison(),
                            result.problems);
  const Comparison out_cmp = compare_outputs(ref, gpu_out, gpu_lse, in.v_scale, c.dtype, c.reference_rows);
  result.worst = std::max(result.worst, out_cmp.worst);
  if (!out_cmp.ok()) result.problems.push_back(out_cmp.text);
  if (dev.weights) {
    const std::vector<float> gpu_weights = extract_slice("weights", dev.weights->download("weights", guard),
                                                         dev.weights_offset, dev.weights_count,
                                                         dev.weights->poison(), result.problems);
    const Comparison p_cmp = compare_weights(ref, gpu_weights, c.dtype, c.reference_rows);
    result.worst = std::max(result.worst, p_cmp.worst);
    if (!p_cmp.ok()) result.problems.push_back(p_cmp.text);
  }
  if (!guard.empty()) result.problems.push_back(guard);
}

void run_checked(Context& ctx, const AttentionCase& c, const RunOptions& options, CaseResult& result) {
  std::mt19937_64 rng(c.seed);
  const CaseInputs in(c, rng);
  const bool want_weights = options.path == AttentionPath::unfused;
  const CaseDevice dev(ctx, c, in, options);
  if (want_weights && !c.unfused_refusal.empty()) {
    check_unfused_refusal(ctx, c, options, dev.args, result);
    return;
  }
  // Reference first: it also rejects a case that is itself malformed.
  const reference::Outputs ref = case_reference(c, in, dev.args, want_weights);
  if (!run_on_device(ctx, options, dev.args, result)) return;
  compare_with_reference(c, in, dev, ref, result);
}

}  // namespace

CaseResult run_case(Context& context, const AttentionCase& c, const RunOptions& options) {
  return run_in_frame(context, c.dtype, options, [&](CaseResult& result) { run_checked(context, c, options, result); });
}

CaseResult run_in_frame(Context& context, DType dtype, const RunOptions& options,
                        const std::function<void(CaseResult&)>& body) {
  CaseResult result;
  if (dtype != DType::f32 && !context.device_info().storage_16bit) {
    result.outcome = Outcome::skipped;
    result.skip_reason = std::string("the device cannot store ") + to_string(dtype) + " tensors (storageBuffer16BitAccess)";
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    body(result);
  } catch (const std::exception& e) {
    result.problems.push_back(std::string("threw: ") + e.what());
  }
  if (options.take_validation_messages)
    for (const std::string& m : options.take_validation_messages()) result.problems.push_back("validation: " + m);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.outcome = !result.problems.empty()     ? Outcome::failed
                   : !result.skip_reason.empty() ? Outcome::skipped
                                                 : Outcome::passed;
  return result;
}

}  // namespace vkattn::conform
