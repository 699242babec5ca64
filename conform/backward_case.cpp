#include "conform/backward_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <tuple>

#include "conform/gradient_compare.hpp"
#include "conform/guarded_buffer.hpp"

namespace vkattn::conform {

namespace {

std::string list_text(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

bool packed(const BackwardCase& c) { return !c.packed_q.empty(); }

// A tensor's values rounded to the dtype (what the device sees), and the buffer holding them.
struct DeviceTensor {
  std::vector<float> values;
  std::optional<Buffer> buffer;
};

DeviceTensor random_tensor(Context& ctx, DType dtype, int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  DeviceTensor t;
  t.values.resize(std::size_t(n));
  for (float& x : t.values) x = round_to(dtype, normal(rng));
  std::vector<std::byte> bytes(t.values.size() * dtype_size(dtype));
  encode(dtype, t.values.data(), bytes.data(), t.values.size());
  t.buffer.emplace(Buffer::allocate(ctx, std::max<uint64_t>(bytes.size(), 4)));
  if (!bytes.empty()) t.buffer->upload(bytes.data(), bytes.size());
  return t;
}

Buffer upload_bytes(Context& ctx, const void* data, uint64_t bytes) {
  Buffer b = Buffer::allocate(ctx, std::max<uint64_t>(bytes, 4));
  if (bytes) b.upload(data, bytes);
  return b;
}

// The call's spec (the forward's, with LSE) and the layouts of its tensors.
struct CaseSpec {
  AttentionSpec spec;
  TensorLayout q, k, v, out;
  std::optional<MaskLayout> mask;
  std::vector<int32_t> cu_q, cu_k;  // packed only
};

CaseSpec make_spec(const BackwardCase& c, const HeadValues& heads) {
  AttentionOptions options;
  options.causal = c.causal;
  options.scale = c.scale;
  apply_options(c.modifiers, options);
  if (c.dropout > 0.0f) options.dropout = Dropout{c.dropout, c.dropout_seed, 3};
  CaseSpec s;
  if (packed(c)) {
    s.cu_q = {0}, s.cu_k = {0};
    for (std::size_t i = 0; i < c.packed_q.size(); ++i) {
      s.cu_q.push_back(s.cu_q.back() + c.packed_q[i]);
      s.cu_k.push_back(s.cu_k.back() + c.packed_k[i]);
    }
    const int64_t total_q = std::max<int64_t>(s.cu_q.back(), 1), total_k = std::max<int64_t>(s.cu_k.back(), 1);
    VarlenAttentionLayouts l;
    l.q = s.q = packed_layout(c.dtype, total_q, c.heads, c.dim_qk);
    l.k = s.k = packed_layout(c.dtype, total_k, c.kv_heads, c.dim_qk);
    l.v = s.v = packed_layout(c.dtype, total_k, c.kv_heads, c.dim_v);
    l.out = s.out = packed_layout(c.dtype, total_q, c.heads, c.dim_v);
    l.batch = int64_t(c.packed_q.size());
    l.has_lse = true;
    l.options = options;
    set_layouts(heads, l);
    s.spec = AttentionSpec::packed(l);
    return s;
  }
  AttentionLayouts l;
  l.q = s.q = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq_q, c.dim_qk);
  l.k = s.k = TensorLayout::bshd(c.dtype, c.batch, c.seq_k, c.kv_heads, c.dim_qk);  // a strided view too
  l.v = s.v = TensorLayout::bhsd(c.dtype, c.batch, c.kv_heads, c.seq_k, c.dim_v);
  l.out = s.out = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq_q, c.dim_v);
  l.has_lse = true;
  l.has_kv_lengths = !c.kv_lengths.empty();
  l.options = options;
  if (c.mask != MaskKind::none)
    l.mask = s.mask = MaskLayout::dense(c.mask == MaskKind::boolean ? MaskType::boolean : MaskType::f32, c.batch, 1, c.seq_q, c.seq_k);
  set_layouts(heads, l);
  s.spec = AttentionSpec::dense(l);
  return s;
}

// The reference's gradients (dense, in the tensors' layouts' element order) and O.
struct Expected {
  std::vector<double> out, dq, dk, dv, dsinks;
};

Expected reference_of(const BackwardCase& c, const CaseSpec& s, const HeadValues& heads, const DeviceTensor& q,
                      const DeviceTensor& k, const DeviceTensor& v, const DeviceTensor& grad_out,
                      const std::vector<float>& mask) {
  Expected e;
  if (packed(c)) {
    reference::VarlenInputs in;
    in.q_layout = s.q, in.k_layout = s.k, in.v_layout = s.v;
    in.q = q.values, in.k.values = k.values, in.v.values = v.values;
    in.cu_seqlens_q = s.cu_q, in.cu_seqlens_k = s.cu_k;
    in.options = s.spec.options;
    set_reference_inputs(heads, in);
    e.out = reference::varlen_attention(in).out;
    reference::VarlenGradients g = reference::varlen_attention_backward(in, s.out, grad_out.values);
    e.dq = std::move(g.dq), e.dk = std::move(g.dk), e.dv = std::move(g.dv), e.dsinks = std::move(g.dsinks);
    return e;  // (packed rows: the reference's dense order is the layouts')
  }
  reference::Inputs in;
  in.q_layout = s.q, in.k_layout = s.k, in.v_layout = s.v;
  in.q = q.values, in.k = k.values, in.v = v.values;
  in.mask_layout = s.mask, in.mask = mask;
  in.kv_lengths = c.kv_lengths;
  in.options = s.spec.options;
  set_reference_inputs(heads, in);
  e.out = reference::attention(in).out;
  reference::Gradients g = reference::attention_backward(in, s.out, grad_out.values);
  e.dq = std::move(g.dq), e.dv = std::move(g.dv), e.dsinks = std::move(g.dsinks);
  // K is a strided (B, Sk, G, D) view; the reference's dK is (B, G, Sk, D) dense.
  e.dk.assign(std::size_t(s.k.required_elements()), 0.0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.kv_heads; ++h)
      for (int64_t j = 0; j < c.seq_k; ++j)
        for (int64_t d = 0; d < c.dim_qk; ++d)
          e.dk[std::size_t(s.k.index(b, h, j, d))] = g.dk[std::size_t(((b * c.kv_heads + h) * c.seq_k + j) * c.dim_qk + d)];
  return e;
}

// Every element of a downloaded payload (compare_gradient then checks the count against the reference's).
std::vector<float> decoded(const std::vector<uint8_t>& bytes, DType dtype) {
  std::vector<float> values(bytes.size() / dtype_size(dtype));
  decode(dtype, bytes.data(), values.data(), values.size());
  return values;
}

// The gradients of one backward run, as bytes (for the bitwise comparison) and decoded.
struct GradientRun {
  std::vector<uint8_t> dq, dk, dv, dsinks;
};

GradientRun run_backward(Context& ctx, const BackwardCase& c, const CaseSpec& s, const PreparedAttentionBackward& prepared,
                         BackwardBuffers buffers, std::string& guard_problem) {
  const auto bytes_of = [&](const TensorLayout& t) { return uint64_t(t.required_elements()) * dtype_size(c.dtype); };
  GuardedBuffer dq(ctx, bytes_of(s.q)), dk(ctx, bytes_of(s.k)), dv(ctx, bytes_of(s.v)), dsinks(ctx, uint64_t(c.heads) * 4);
  buffers.grad_q = &dq.buffer(), buffers.grad_k = &dk.buffer(), buffers.grad_v = &dv.buffer();
  if (c.modifiers.sinks) buffers.grad_sinks = {&dsinks.buffer(), 0};
  prepared.run(buffers);
  GradientRun r;
  r.dq = dq.download("dq", guard_problem);
  r.dk = dk.download("dk", guard_problem);
  r.dv = dv.download("dv", guard_problem);
  if (c.modifiers.sinks) r.dsinks = dsinks.download("dsinks", guard_problem);
  return r;
}

void add(const Comparison& comparison, CaseResult& result) {
  result.worst = std::max(result.worst, comparison.worst);
  if (!comparison.ok()) result.problems.push_back(comparison.text);
}

void run_checked(Context& ctx, const BackwardCase& c, const RunOptions& options, CaseResult& result) {
  std::mt19937_64 rng(c.seed);
  int64_t longest = c.seq_k;
  if (packed(c)) longest = std::max<int64_t>(*std::max_element(c.packed_k.begin(), c.packed_k.end()), 1);
  const HeadValues heads = draw_head_values(c.modifiers, rng, c.heads, longest);
  CaseSpec s = make_spec(c, heads);
  const bool unfused = options.path == AttentionPath::unfused;
  if (unfused) s.spec.weights = true, s.spec.path = AttentionPath::unfused;

  const DeviceTensor q = random_tensor(ctx, c.dtype, s.q.required_elements(), rng);
  const DeviceTensor k = random_tensor(ctx, c.dtype, s.k.required_elements(), rng);
  const DeviceTensor v = random_tensor(ctx, c.dtype, s.v.required_elements(), rng);
  const DeviceTensor grad_out = random_tensor(ctx, c.dtype, s.out.required_elements(), rng);
  std::vector<float> mask;
  std::optional<Buffer> mask_buffer, lengths, cu_q, cu_k, weights;
  if (s.mask) {
    mask.resize(std::size_t(s.mask->required_elements()));
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& m : mask) m = c.mask == MaskKind::boolean ? float(rng() % 5 != 0) : (rng() % 5 == 0 ? -INFINITY : u(rng));
    if (c.mask == MaskKind::boolean) {
      std::vector<uint8_t> bytes(mask.size());
      for (std::size_t i = 0; i < mask.size(); ++i) bytes[i] = mask[i] != 0.0f;
      mask_buffer.emplace(upload_bytes(ctx, bytes.data(), bytes.size()));
    } else {
      mask_buffer.emplace(upload_bytes(ctx, mask.data(), mask.size() * 4));
    }
  }
  if (!c.kv_lengths.empty()) lengths.emplace(upload_bytes(ctx, c.kv_lengths.data(), c.kv_lengths.size() * 4));
  if (packed(c)) {
    cu_q.emplace(upload_bytes(ctx, s.cu_q.data(), s.cu_q.size() * 4));
    cu_k.emplace(upload_bytes(ctx, s.cu_k.data(), s.cu_k.size() * 4));
  }
  const HeadValueBuffers head_buffers = upload(ctx, heads);

  // The forward with LSE (its O checked too: the backward reads it).
  const int64_t rows = packed(c) ? s.q.seq : c.batch * c.seq_q;
  const int64_t keys = packed(c) ? s.k.seq : c.seq_k;
  GuardedBuffer out(ctx, uint64_t(s.out.required_elements()) * dtype_size(c.dtype));
  GuardedBuffer lse(ctx, uint64_t(rows * c.heads) * 4);
  AttentionBuffers fb;
  fb.q = &*q.buffer, fb.k = &*k.buffer, fb.v = &*v.buffer, fb.out = &out.buffer();
  fb.lse = {&lse.buffer(), 0};
  if (mask_buffer) fb.mask = &*mask_buffer;
  if (lengths) fb.kv_lengths = {&*lengths, 0};
  if (cu_q) fb.cu_seqlens_q = {&*cu_q, 0}, fb.cu_seqlens_k = {&*cu_k, 0};
  bind_head_values(head_buffers, fb);
  if (unfused) {
    // P: (batch, heads, seq_q, seq_k), or a packed batch's (heads, total_q, total_k).
    weights.emplace(Buffer::allocate(ctx, uint64_t(rows * c.heads * keys) * 4));
    fb.weights = {&*weights, 0};
  }

  // The backward's plan first: a profile's plan that does not fit here skips the case.
  std::optional<PreparedAttentionBackward> backward;
  if (options.profile) {
    try {
      backward.emplace(ctx, s.spec, *options.profile);
    } catch (const PlanDoesNotFit& e) {
      result.skip_reason = e.what();
      return;
    }
  } else {
    backward.emplace(ctx, s.spec);
  }

  const PreparedAttention forward(ctx, s.spec);
  forward.run(fb);
  std::string guard_problem;
  const std::vector<float> device_out =
      decoded(out.download("out", guard_problem), c.dtype);
  lse.download("lse", guard_problem);

  const Expected want = reference_of(c, s, heads, q, k, v, grad_out, mask);
  add(compare_gradient("out", device_out, want.out, c.dtype), result);

  BackwardBuffers bb;
  bb.forward = fb;
  bb.grad_out = &*grad_out.buffer;
  const GradientRun first = run_backward(ctx, c, s, *backward, bb, guard_problem);
  const GradientRun second = run_backward(ctx, c, s, *backward, bb, guard_problem);
  if (!guard_problem.empty()) result.problems.push_back(guard_problem);
  for (const auto& [name, a, b] : {std::tuple{"dq", &first.dq, &second.dq}, {"dk", &first.dk, &second.dk},
                                   {"dv", &first.dv, &second.dv}, {"dsinks", &first.dsinks, &second.dsinks}})
    if (*a != *b) result.problems.push_back(std::string(name) + " differs between two runs (the backward is deterministic)");

  add(compare_gradient("dq", decoded(first.dq, c.dtype), want.dq, c.dtype), result);
  add(compare_gradient("dk", decoded(first.dk, c.dtype), want.dk, c.dtype), result);
  add(compare_gradient("dv", decoded(first.dv, c.dtype), want.dv, c.dtype), result);
  if (c.modifiers.sinks)
    add(compare_gradient("dsinks", decoded(first.dsinks, DType::f32), want.dsinks, c.dtype), result);
}

}  // namespace

std::string describe(const BackwardCase& c) {
  std::ostringstream s;
  s << "backward " << to_string(c.dtype) << " H" << c.heads << "/KV" << c.kv_heads;
  if (packed(c))
    s << " packed q" << list_text(c.packed_q) << " k" << list_text(c.packed_k);
  else
    s << " B" << c.batch << " Sq" << c.seq_q << " Sk" << c.seq_k;
  s << " d" << c.dim_qk << "/" << c.dim_v << " causal=" << to_string(c.causal);
  if (c.mask != MaskKind::none) s << " mask=" << to_string(c.mask);
  if (!c.kv_lengths.empty()) s << " kv_lengths=" << list_text(c.kv_lengths);
  s << attention_text(c.modifiers);
  if (c.scale) s << " scale=" << *c.scale;
  if (c.dropout > 0.0f) s << " dropout=" << c.dropout << "@" << c.dropout_seed;
  s << (c.fused_only ? " fused-only" : "") << " seed=" << c.seed;
  return s.str();
}

std::vector<std::pair<std::string, std::string>> features(const BackwardCase& c) {
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("dtype", to_string(c.dtype));
  f.emplace_back("backward", packed(c) ? "packed" : "dense");
  if (c.causal != Causal::none) f.emplace_back("backward", std::string("causal ") + to_string(c.causal));
  if (c.mask != MaskKind::none) f.emplace_back("backward", std::string("mask ") + to_string(c.mask));
  if (!c.kv_lengths.empty()) f.emplace_back("backward", "key lengths");
  if (c.kv_heads == 1 && c.heads > 1) f.emplace_back("backward", "MQA");
  else if (c.kv_heads != c.heads) f.emplace_back("backward", "GQA " + std::to_string(c.heads / c.kv_heads) + ":1");
  if (c.dim_v != c.dim_qk) f.emplace_back("backward", "dim_v != dim_qk");
  const int64_t widest = std::max(c.dim_qk, c.dim_v);
  f.emplace_back("backward", "head dim " + std::string(widest > 256 ? "> 256" : widest > 128 ? "129-256" : widest > 64 ? "65-128" : "<= 64"));
  if (c.dropout > 0.0f) f.emplace_back("backward", "dropout");
  if (c.scale) f.emplace_back("backward", "scale");
  if (packed(c) && std::count(c.packed_q.begin(), c.packed_q.end(), 0) + std::count(c.packed_k.begin(), c.packed_k.end(), 0) > 0)
    f.emplace_back("backward", "empty sequences");
  int64_t longest = std::max(c.seq_q, c.seq_k);
  for (const int32_t n : c.packed_q) longest = std::max<int64_t>(longest, n);
  for (const int32_t n : c.packed_k) longest = std::max<int64_t>(longest, n);
  if (longest > kLavapipeWalkBudget) f.emplace_back("backward", "split walks (lavapipe)");
  add_attention_features(c.modifiers, c.causal, f);
  return f;
}

CaseResult run_backward_case(Context& context, const BackwardCase& c, const RunOptions& options) {
  if (c.fused_only && options.path == AttentionPath::unfused) {
    CaseResult result;
    result.outcome = Outcome::skipped;
    result.skip_reason = "runs on the fused path only";
    return result;
  }
  return run_in_frame(context, c.dtype, options, [&](CaseResult& result) { run_checked(context, c, options, result); });
}

}  // namespace vkattn::conform
