// The backward pass on the device against the fp64 reference (vkattn/backward_reference.hpp): dense
// and packed calls over odd sizes, every mask and score modifier, GQA, dropout (the forward's O too:
// its output pass), every dtype; the outputs poisoned before each run, and two runs bitwise equal (no atomics).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conform/gradient_compare.hpp"
#include "support.hpp"
#include "vkattn/attention_backward.hpp"
#include "vkattn/backward_reference.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct BackwardCase {
  const char* name;
  int64_t batch = 1, heads = 2, kv_heads = 2, seq_q = 7, seq_k = 9, dim_qk = 16, dim_v = 16;
  DType dtype = DType::f32;
  Causal causal = Causal::none;
  int mask = 0;  // 0 none, 1 boolean, 2 f32
  bool kv_lengths = false, alibi = false, sinks = false;
  // NaN on the device where every pair is hidden: K and V of the keys no row sees (past the key length;
  // with a boolean mask, every 7th key masked out for all rows) and, with the mask, Q and dO of every
  // 5th row, masked out for all keys. They must never reach a gradient (not even as 0 × NaN).
  bool nan_hidden = false;
  std::optional<Window> window;
  std::optional<float> softcap;
  float dropout = 0.0f;
  std::vector<int32_t> packed_q, packed_k;  // a packed batch's sequence lengths (empty: dense)
};

// Values rounded to the dtype (what the device sees), as f32 and as the dtype's bytes.
struct Tensor {
  std::vector<float> values;
  std::optional<Buffer> buffer;
};

Tensor random_tensor(Context& ctx, DType dtype, std::size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t;
  t.values.resize(n);
  for (float& x : t.values) x = round_to(dtype, normal(rng));
  std::vector<std::byte> bytes(n * dtype_size(dtype));
  encode(dtype, t.values.data(), bytes.data(), n);
  t.buffer.emplace(Buffer::allocate(ctx, std::max<uint64_t>(bytes.size(), 4)));
  if (n) t.buffer->upload(bytes.data(), bytes.size());
  return t;
}

std::vector<float> download(const Buffer& b, DType dtype, std::size_t n) {
  std::vector<std::byte> bytes(n * dtype_size(dtype));
  b.download(bytes.data(), bytes.size());
  std::vector<float> values(n);
  decode(dtype, bytes.data(), values.data(), n);
  return values;
}

// The keys nan_hidden masks out for every row, and the rows for every key.
bool masked_out_key(int64_t j) { return j % 7 == 3; }
bool masked_out_row(int64_t i) { return i % 5 == 2; }

// The shared rule and per-dtype tolerances (conform/gradient_compare.hpp), as the catalog's backward
// section checks them.
void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& want, DType dtype) {
  const conform::Comparison comparison = conform::compare_gradient(what, got, want, dtype);
  INFO(comparison.text);
  CHECK(comparison.ok());
}

struct Run {
  std::vector<float> dq, dk, dv, dsinks;
};

void run_case(const BackwardCase& c, uint64_t seed) {
  const std::string name = std::string(c.name) + " " + to_string(c.dtype);
  CAPTURE(name);
  Context& ctx = context();
  if (!device_supports(c.dtype)) return;
  std::mt19937_64 rng(seed);
  const bool packed = !c.packed_q.empty();
  const int64_t batch = packed ? int64_t(c.packed_q.size()) : c.batch;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  for (std::size_t s = 0; s < c.packed_q.size(); ++s) {
    cu_q.push_back(cu_q.back() + c.packed_q[s]);
    cu_k.push_back(cu_k.back() + c.packed_k[s]);
  }
  const int64_t total_q = packed ? std::max<int64_t>(cu_q.back(), 1) : 0, total_k = packed ? std::max<int64_t>(cu_k.back(), 1) : 0;

  AttentionOptions options;
  options.causal = c.causal;
  options.window = c.window;
  options.softcap = c.softcap;
  if (c.dropout > 0.0f) options.dropout = Dropout{c.dropout, 0x1234567890abcdefull + seed, 7};

  AttentionSpec spec;
  if (packed) {
    VarlenAttentionLayouts l;
    l.q = packed_layout(c.dtype, total_q, c.heads, c.dim_qk);
    l.k = packed_layout(c.dtype, total_k, c.kv_heads, c.dim_qk);
    l.v = packed_layout(c.dtype, total_k, c.kv_heads, c.dim_v);
    l.out = packed_layout(c.dtype, total_q, c.heads, c.dim_v);
    l.batch = batch;
    l.has_lse = true;
    l.options = options;
    if (c.alibi) l.alibi = HeadValuesLayout{1, c.heads, 0};
    if (c.sinks) l.sinks = HeadValuesLayout{1, c.heads, 0};
    spec = AttentionSpec::packed(l);
  } else {
    AttentionLayouts l;
    l.q = TensorLayout::bhsd(c.dtype, batch, c.heads, c.seq_q, c.dim_qk);
    l.k = TensorLayout::bshd(c.dtype, batch, c.seq_k, c.kv_heads, c.dim_qk);  // a strided view, too
    l.v = TensorLayout::bhsd(c.dtype, batch, c.kv_heads, c.seq_k, c.dim_v);
    l.out = TensorLayout::bhsd(c.dtype, batch, c.heads, c.seq_q, c.dim_v);
    l.has_lse = true;
    l.has_kv_lengths = c.kv_lengths;
    l.options = options;
    if (c.mask) {
      MaskLayout m = MaskLayout::dense(c.mask == 1 ? MaskType::boolean : MaskType::f32, batch, 1, c.seq_q, c.seq_k);
      l.mask = m;
    }
    if (c.alibi) l.alibi = HeadValuesLayout{1, c.heads, 0};
    if (c.sinks) l.sinks = HeadValuesLayout{1, c.heads, 0};
    spec = AttentionSpec::dense(l);
  }
  const AttentionLayouts view = packed ? AttentionLayouts{} : spec.dense_layouts();
  const TensorLayout ql = packed ? spec.q : view.q, ol = packed ? spec.out : view.out;
  const TensorLayout kl = packed ? std::get<PackedKv>(spec.kv).k : view.k, vl = packed ? std::get<PackedKv>(spec.kv).v : view.v;

  Tensor q = random_tensor(ctx, c.dtype, std::size_t(ql.required_elements()), rng);
  Tensor k = random_tensor(ctx, c.dtype, std::size_t(kl.required_elements()), rng);
  Tensor v = random_tensor(ctx, c.dtype, std::size_t(vl.required_elements()), rng);
  Tensor grad_out = random_tensor(ctx, c.dtype, std::size_t(ol.required_elements()), rng);
  std::vector<float> mask_values;
  std::optional<Buffer> mask, lengths, alibi, sinks, cu_q_buffer, cu_k_buffer;
  if (c.mask) {
    const std::size_t n = std::size_t(view.mask->required_elements());
    mask_values.resize(n);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& m : mask_values) m = c.mask == 1 ? float(rng() % 4 != 0) : (rng() % 5 == 0 ? -INFINITY : u(rng));
    if (c.nan_hidden)  // ((batch, 1, seq_q, seq_k) dense)
      for (std::size_t e = 0; e < n; ++e)
        if (masked_out_key(int64_t(e) % c.seq_k) || masked_out_row(int64_t(e) / c.seq_k % c.seq_q)) mask_values[e] = 0.0f;
    mask.emplace(Buffer::allocate(ctx, n * 4));
    if (c.mask == 1) {
      std::vector<uint8_t> bytes(n);
      for (std::size_t i = 0; i < n; ++i) bytes[i] = mask_values[i] != 0.0f;
      mask->upload(bytes.data(), n);
    } else {
      mask->upload(mask_values.data(), n * 4);
    }
  }
  std::vector<int32_t> length_values;
  if (c.kv_lengths) {
    for (int64_t b = 0; b < batch; ++b) length_values.push_back(int32_t(rng() % uint64_t(c.seq_k + 1)));
    lengths.emplace(Buffer::allocate(ctx, length_values.size() * 4));
    lengths->upload(length_values.data(), length_values.size() * 4);
  }
  if (c.nan_hidden) {
    // (The reference reads the finite values: it never uses these.) `hidden(b, s)`: row or key s of
    // batch element b.
    const auto poison = [&](Tensor& t, const TensorLayout& layout, auto hidden) {
      std::vector<float> values = t.values;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < layout.heads; ++h)
          for (int64_t s = 0; s < layout.seq; ++s)
            if (hidden(b, s))
              for (int64_t d = 0; d < layout.dim; ++d) values[std::size_t(layout.index(b, h, s, d))] = NAN;
      std::vector<std::byte> bytes(values.size() * dtype_size(c.dtype));
      encode(c.dtype, values.data(), bytes.data(), values.size());
      t.buffer->upload(bytes.data(), bytes.size());
    };
    const auto hidden_key = [&](int64_t b, int64_t j) {
      return (c.kv_lengths && j >= length_values[std::size_t(b)]) || (c.mask == 1 && masked_out_key(j));
    };
    const auto hidden_row = [&](int64_t, int64_t i) { return c.mask == 1 && masked_out_row(i); };
    poison(k, kl, hidden_key);
    poison(v, vl, hidden_key);
    poison(q, ql, hidden_row);
    poison(grad_out, ol, hidden_row);
  }
  std::vector<float> alibi_values, sink_values;
  for (int64_t h = 0; h < c.heads; ++h) {
    alibi_values.push_back(0.25f / float(h + 1));
    sink_values.push_back(0.5f * float(h) - 0.3f);
  }
  if (c.alibi) alibi.emplace(Buffer::allocate(ctx, alibi_values.size() * 4)), alibi->upload(alibi_values.data(), alibi_values.size() * 4);
  if (c.sinks) sinks.emplace(Buffer::allocate(ctx, sink_values.size() * 4)), sinks->upload(sink_values.data(), sink_values.size() * 4);
  if (packed) {
    cu_q_buffer.emplace(Buffer::allocate(ctx, cu_q.size() * 4));
    cu_q_buffer->upload(cu_q.data(), cu_q.size() * 4);
    cu_k_buffer.emplace(Buffer::allocate(ctx, cu_k.size() * 4));
    cu_k_buffer->upload(cu_k.data(), cu_k.size() * 4);
  }

  // The reference's forward and gradients.
  reference::Gradients want;
  std::vector<double> ref_out, ref_lse;
  if (packed) {
    reference::VarlenInputs in;
    in.q_layout = ql, in.k_layout = kl, in.v_layout = vl;
    in.q = q.values, in.k.values = k.values, in.v.values = v.values;
    in.cu_seqlens_q = cu_q, in.cu_seqlens_k = cu_k;
    in.options = options;
    if (c.alibi) in.alibi_layout = HeadValuesLayout{1, c.heads, 0}, in.alibi = alibi_values;
    if (c.sinks) in.sinks_layout = HeadValuesLayout{1, c.heads, 0}, in.sinks = sink_values;
    const reference::VarlenOutputs fwd = reference::varlen_attention(in);
    ref_out = fwd.out, ref_lse = fwd.lse;
    const reference::VarlenGradients g = reference::varlen_attention_backward(in, ol, grad_out.values);
    want.dq = g.dq, want.dk = g.dk, want.dv = g.dv, want.dsinks = g.dsinks;
  } else {
    reference::Inputs in;
    in.q_layout = ql, in.k_layout = kl, in.v_layout = vl;
    in.q = q.values, in.k = k.values, in.v = v.values;
    if (c.mask) in.mask_layout = view.mask, in.mask = mask_values;
    in.kv_lengths = length_values;
    in.options = options;
    if (c.alibi) in.alibi_layout = HeadValuesLayout{1, c.heads, 0}, in.alibi = alibi_values;
    if (c.sinks) in.sinks_layout = HeadValuesLayout{1, c.heads, 0}, in.sinks = sink_values;
    const reference::Outputs fwd = reference::attention(in);
    ref_out = fwd.out, ref_lse = fwd.lse;
    want = reference::attention_backward(in, ol, grad_out.values);
  }

  // The forward on the device (with dropout: its output pass), O against the reference's.
  Buffer out = Buffer::allocate(ctx, std::max<uint64_t>(uint64_t(ol.required_elements()) * dtype_size(c.dtype), 4));
  Buffer lse = Buffer::allocate(ctx, std::max<uint64_t>(ref_lse.size() * 4, 4));
  AttentionBuffers fb;
  fb.q = &*q.buffer, fb.k = &*k.buffer, fb.v = &*v.buffer, fb.out = &out;
  fb.lse = {&lse, 0};
  if (mask) fb.mask = &*mask;
  if (lengths) fb.kv_lengths = {&*lengths, 0};
  if (alibi) fb.alibi = &*alibi;
  if (sinks) fb.sinks = &*sinks;
  if (packed) fb.cu_seqlens_q = {&*cu_q_buffer, 0}, fb.cu_seqlens_k = {&*cu_k_buffer, 0};
  out.fill(0xFF);
  attention(ctx, spec, fb);
  // (Dense (B, H, Sq, Dv) and packed (total_q, H, Dv): the reference's O is dense in the same order.)
  const std::vector<float> forward_out = download(out, c.dtype, std::size_t(ol.required_elements()));
  expect_close("out", forward_out, ref_out, c.dtype);
  if (c.dropout > 0.0f) {
    // The same seed gives the same bits; another seed another mask.
    out.fill(0xFF);
    attention(ctx, spec, fb);
    const std::vector<float> again = download(out, c.dtype, forward_out.size());
    CHECK_MESSAGE(std::memcmp(again.data(), forward_out.data(), again.size() * 4) == 0, "O differs between two runs");
    AttentionSpec reseeded = spec;
    reseeded.options.dropout->seed ^= 1;
    attention(ctx, reseeded, fb);
    const std::vector<float> other = download(out, c.dtype, forward_out.size());
    CHECK_MESSAGE(std::memcmp(other.data(), forward_out.data(), other.size() * 4) != 0, "another seed gave the same O");
    attention(ctx, spec, fb);  // (the backward below reads this seed's O)
  }

  const auto grad_buffer = [&](const TensorLayout& t) {
    return Buffer::allocate(ctx, std::max<uint64_t>(uint64_t(t.required_elements()) * dtype_size(c.dtype), 4));
  };
  Buffer dq = grad_buffer(ql), dk = grad_buffer(kl), dv = grad_buffer(vl);
  Buffer dsinks = Buffer::allocate(ctx, uint64_t(c.heads) * 4);
  BackwardBuffers bb;
  bb.forward = fb;
  bb.grad_out = &*grad_out.buffer;
  bb.grad_q = &dq, bb.grad_k = &dk, bb.grad_v = &dv;
  if (c.sinks) bb.grad_sinks = {&dsinks, 0};

  const PreparedAttentionBackward prepared(ctx, spec);
  // --kernel=tiled runs the tiled form (every case here fits lavapipe's 32 KiB), rowwise the portable.
  const std::string kernel = prepared.plan().kernel;
  if (kernel_variant() == KernelVariant::tiled) CHECK(kernel == "tiled");
  if (kernel_variant() == KernelVariant::rowwise) CHECK(kernel == "portable");
  Run runs[2];
  for (Run& r : runs) {
    for (Buffer* b : {&dq, &dk, &dv, &dsinks}) b->fill(0xFF);  // NaN in every dtype
    prepared.run(bb);
    r.dq = download(dq, c.dtype, std::size_t(ql.required_elements()));
    r.dk = download(dk, c.dtype, std::size_t(kl.required_elements()));
    r.dv = download(dv, c.dtype, std::size_t(vl.required_elements()));
    if (c.sinks) r.dsinks = download(dsinks, DType::f32, std::size_t(c.heads));
  }
  // The layouts here are dense except K's BSHD view: the reference's dK is (B, G, Sk, D) dense.
  std::vector<double> want_dk = want.dk;
  if (!packed) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t g = 0; g < c.kv_heads; ++g)
        for (int64_t j = 0; j < c.seq_k; ++j)
          for (int64_t d = 0; d < c.dim_qk; ++d)
            want_dk[std::size_t(kl.index(b, g, j, d))] = want.dk[std::size_t(((b * c.kv_heads + g) * c.seq_k + j) * c.dim_qk + d)];
  }
  expect_close("dq", runs[0].dq, want.dq, c.dtype);
  expect_close("dk", runs[0].dk, want_dk, c.dtype);
  expect_close("dv", runs[0].dv, want.dv, c.dtype);
  if (c.sinks) expect_close("dsinks", runs[0].dsinks, want.dsinks, DType::f32 == c.dtype ? DType::f32 : c.dtype);
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  };
  CHECK_MESSAGE(same_bits(runs[0].dq, runs[1].dq), "dq differs between two runs");
  CHECK_MESSAGE(same_bits(runs[0].dk, runs[1].dk), "dk differs between two runs");
  CHECK_MESSAGE(same_bits(runs[0].dv, runs[1].dv), "dv differs between two runs");
  CHECK_MESSAGE(same_bits(runs[0].dsinks, runs[1].dsinks), "dsinks differs between two runs");
}

std::vector<BackwardCase> cases() {
  std::vector<BackwardCase> list;
  const auto add = [&](BackwardCase c) { list.push_back(c); };
  add({.name = "plain"});
  add({.name = "odd sizes, GQA 3", .batch = 2, .heads = 6, .kv_heads = 2, .seq_q = 13, .seq_k = 21, .dim_qk = 21, .dim_v = 8});
  add({.name = "causal top-left", .seq_q = 17, .seq_k = 23, .causal = Causal::top_left});
  add({.name = "causal bottom-right, MQA", .heads = 4, .kv_heads = 1, .seq_q = 5, .seq_k = 70, .dim_qk = 40, .dim_v = 72,
       .causal = Causal::bottom_right});
  add({.name = "boolean mask, key lengths", .batch = 3, .seq_q = 11, .seq_k = 65, .mask = 1, .kv_lengths = true});
  add({.name = "float mask", .batch = 2, .seq_q = 9, .seq_k = 30, .mask = 2});
  add({.name = "NaN in keys no row sees and rows that see no key (key lengths, masked out), GQA 2", .batch = 3, .heads = 4,
       .kv_heads = 2, .seq_q = 13, .seq_k = 45, .mask = 1, .kv_lengths = true, .nan_hidden = true});
  add({.name = "window, ALiBi", .seq_q = 40, .seq_k = 40, .alibi = true, .window = Window{5, 3}});
  add({.name = "softcap, sinks", .heads = 3, .kv_heads = 1, .seq_q = 19, .seq_k = 33, .sinks = true, .softcap = 2.5f});
  add({.name = "dropout", .batch = 2, .seq_q = 15, .seq_k = 37, .causal = Causal::top_left, .dropout = 0.3f});
  add({.name = "fully masked rows (causal bottom-right, seq_q > seq_k), sinks", .seq_q = 12, .seq_k = 5, .causal = Causal::bottom_right,
       .sinks = true});
  add({.name = "packed, empty sequences", .heads = 4, .kv_heads = 2, .dim_qk = 24, .dim_v = 24, .packed_q = {5, 0, 9, 1},
       .packed_k = {7, 3, 0, 12}});
  add({.name = "packed, causal, window, sinks, dropout", .heads = 2, .kv_heads = 1, .causal = Causal::bottom_right,
       .sinks = true, .window = Window{4, -1}, .dropout = 0.2f, .packed_q = {6, 11}, .packed_k = {9, 11}});
  add({.name = "d128", .seq_q = 33, .seq_k = 47, .dim_qk = 128, .dim_v = 128, .causal = Causal::top_left});
  return list;
}

}  // namespace

TEST_SUITE("backward") {
  // lavapipe ends an invocation's loops after 65535 iterations, silently: the walks must be split
  // (the dQ kernel's over keys, the dK/dV kernel's over its group's query rows) and their partials
  // summed. Without the splits these come out wrong on lavapipe.
  TEST_CASE("backward: long sequences, split walks (lavapipe's loop limit)") {
    run_case({.name = "70000 keys, GQA 2", .heads = 2, .kv_heads = 1, .seq_q = 24, .seq_k = 70000, .dim_qk = 8, .dim_v = 8},
             case_seed(1000));
    run_case({.name = "70000 query rows, causal", .heads = 1, .kv_heads = 1, .seq_q = 70000, .seq_k = 40,
              .dim_qk = 8, .dim_v = 8, .causal = Causal::bottom_right},
             case_seed(1001));
  }

  TEST_CASE("backward: against the fp64 reference, every dtype, two runs bitwise equal") {
    uint64_t n = 0;
    for (DType dtype : {DType::f32, DType::f16, DType::bf16})
      for (BackwardCase c : cases()) {
        c.dtype = dtype;
        run_case(c, case_seed(n++));
      }
  }
}
