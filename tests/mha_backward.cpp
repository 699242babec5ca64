// The layer's backward pass on the device (MultiHeadAttention::backward) against the fp64 reference
// (reference::multi_head_attention_backward): self and cross attention, kdim/vdim != E, GQA, no bias,
// key padding and attn masks, causal, sinks, ALiBi, a window, a logit cap, f32/f16/bf16. The first
// run is the prepared pass (PreparedMhaBackward) recorded with its output, gradients and workspace
// poisoned (NaN bytes); the second, backward() on fresh buffers, must give the same bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "command_buffer.hpp"
#include "mha_mask.hpp"
#include "support.hpp"
#include "vkattn/mha.hpp"
#include "vkattn/mha_backward.hpp"
#include "vkattn/mha_reference.hpp"
#include "vkattn/numeric.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct LayerCase {
  const char* name;
  int64_t batch = 2, seq_q = 5, seq_k = 7, embed = 16, heads = 2, kv_heads = 0, kdim = 0, vdim = 0;
  bool self = false, bias = true, sinks = false, alibi = false, padding = false;
  int attn_mask = 0;  // 0 none, 1 boolean (0 / -inf), 2 float (with some -inf)
  Causal causal = Causal::none;
  std::optional<Window> window;
  std::optional<float> softcap;
};

// As tests/backward.cpp: the error normalised by the largest reference value.
double tolerance(DType dtype) { return dtype == DType::f32 ? 2e-4 : dtype == DType::f16 ? 1e-2 : 6e-2; }

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& want, DType dtype) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double scale = 0.0, err = 0.0;
  std::size_t worst = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double e = std::isnan(got[i]) ? INFINITY : std::abs(double(got[i]) - want[i]);
    if (e > err) err = e, worst = i;
  }
  INFO("max error " << err << " at " << worst << " (got " << (got.empty() ? 0.0f : got[worst]) << ", want "
                    << (want.empty() ? 0.0 : want[worst]) << "), scale " << scale);
  CHECK(err / std::max(scale, 1e-3) <= tolerance(dtype));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

std::vector<float> normal(std::mt19937_64& rng, DType dtype, int64_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = round_to(dtype, dist(rng));
  return v;
}

// The case's layer and inputs (values rounded to the dtype: what the device sees).
struct Problem {
  MhaWeights w;
  std::vector<float> query, key, value, grad, attn_mask;
  std::vector<uint8_t> padding;
  MhaInputs in;
};

Problem make_problem(const LayerCase& c, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  MhaWeights& w = p.w;
  w.embed_dim = c.embed, w.num_heads = c.heads, w.kv_heads = c.kv_heads, w.kdim = c.kdim, w.vdim = c.vdim;
  w.bias = c.bias;
  const int64_t E = c.embed, kvd = w.effective_kv_heads() * (E / c.heads);
  const int64_t kdim = w.effective_kdim(), vdim = w.effective_vdim(), Sk = c.self ? c.seq_q : c.seq_k;
  const auto init = [&](int64_t n, int64_t fan_in) { return normal(rng, dtype, n, 1.0f / std::sqrt(float(fan_in))); };
  w.q_proj_weight = init(E * E, E);
  w.k_proj_weight = init(kvd * kdim, kdim);
  w.v_proj_weight = init(kvd * vdim, vdim);
  w.out_proj_weight = init(E * E, E);
  if (c.bias) w.in_proj_bias = normal(rng, dtype, E + 2 * kvd, 0.3f), w.out_proj_bias = normal(rng, dtype, E, 0.3f);
  for (int64_t h = 0; h < c.heads; ++h) {
    if (c.sinks) w.sinks.push_back(0.5f * float(h) - 0.3f);
    if (c.alibi) w.alibi_slopes.push_back(0.25f / float(h + 1));
  }
  p.query = normal(rng, dtype, c.batch * c.seq_q * E, 1.0f);
  if (!c.self) p.key = normal(rng, dtype, c.batch * Sk * kdim, 1.0f), p.value = normal(rng, dtype, c.batch * Sk * vdim, 1.0f);
  p.grad = normal(rng, dtype, c.batch * c.seq_q * E, 1.0f);
  if (c.padding) {
    // The last key of every batch element hidden, and of batch element 1 all: fully masked rows.
    p.padding.assign(static_cast<std::size_t>(c.batch * Sk), 0);
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t j = 0; j < Sk; ++j) p.padding[std::size_t(b * Sk + j)] = (j == Sk - 1 || b == 1 || rng() % 5 == 0);
  }
  if (c.attn_mask) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    p.attn_mask.resize(static_cast<std::size_t>(c.seq_q * Sk));
    for (float& m : p.attn_mask)
      m = rng() % 4 == 0 ? -INFINITY : c.attn_mask == 1 ? 0.0f : u(rng);
  }
  MhaInputs& in = p.in;
  in.batch = c.batch, in.seq_q = c.seq_q, in.seq_k = Sk;
  in.query = p.query, in.key = p.key, in.value = p.value;
  in.key_padding_mask = p.padding;
  in.attn_mask = p.attn_mask;
  in.options.causal = c.causal;
  in.options.window = c.window;
  in.options.softcap = c.softcap;
  return p;
}

Buffer upload(DType dtype, std::span<const float> values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer b = Buffer::allocate(context(), std::max<uint64_t>(bytes.size(), 16));
  if (!bytes.empty()) b.upload(bytes.data(), bytes.size());
  return b;
}

// The gradients through PreparedMhaBackward::record, every output and the workspace poisoned first.
MhaBackwardResult recorded(const MultiHeadAttention& layer, const Problem& p, DType dtype) {
  Context& ctx = context();
  const MhaDims d = check_mha_weights(p.w);
  const MhaCall call = check_mha_inputs(d, p.in);
  const detail::MhaMask mask = detail::merge_mha_masks(p.in, call);
  MhaSpec spec;
  spec.batch = call.batch, spec.seq_q = call.seq_q, spec.seq_k = call.seq_k;
  spec.self_attention = call.self_attention;
  spec.options = p.in.options;
  spec.mask = mask.layout;
  spec.path = attention_path();
  const PreparedMhaBackward pass = layer.prepare_backward(spec);

  const int64_t E = d.embed_dim, KVD = d.kv_dim(), Tq = call.batch * call.seq_q, Tk = call.batch * call.seq_k;
  const Buffer query = upload(dtype, p.query), grad_out = upload(dtype, p.grad);
  std::optional<Buffer> key, value, mask_buffer;
  if (!call.self_attention) key.emplace(upload(dtype, p.key)), value.emplace(upload(dtype, p.value));
  if (mask.layout) {
    mask_buffer.emplace(Buffer::allocate(ctx, std::max<std::size_t>(mask.bytes.size(), 16)));
    mask_buffer->upload(mask.bytes.data(), mask.bytes.size());
  }
  const auto poisoned = [&](uint64_t bytes) {
    Buffer b = Buffer::allocate(ctx, std::max<uint64_t>(bytes, 16));
    b.fill(0xff);
    return b;
  };
  const Buffer out = poisoned(uint64_t(Tq * E) * dtype_size(dtype));
  Buffer workspace = poisoned(pass.workspace_bytes());
  MhaBackwardResult r;
  r.embed_dim = E, r.kdim = d.kdim, r.vdim = d.vdim;
  MhaBackwardBuffers b;
  b.query = &query, b.grad_out = &grad_out, b.out = &out;
  if (key) b.key = &*key, b.value = &*value;
  if (mask_buffer) b.mask = &*mask_buffer;
  struct Part {
    std::vector<float>* values;
    BufferSlice* slice;
    int64_t n;
    bool given;
  };
  const Part parts[] = {{&r.q_proj_weight, &b.grads.q_proj_weight, E * E, true},
                        {&r.k_proj_weight, &b.grads.k_proj_weight, KVD * d.kdim, true},
                        {&r.v_proj_weight, &b.grads.v_proj_weight, KVD * d.vdim, true},
                        {&r.in_proj_bias, &b.grads.in_proj_bias, E + 2 * KVD, d.bias},
                        {&r.out_proj_weight, &b.grads.out_proj_weight, E * E, true},
                        {&r.out_proj_bias, &b.grads.out_proj_bias, E, d.bias},
                        {&r.sinks, &b.grads.sinks, d.num_heads, d.has_sinks},
                        {&r.query, &b.grads.query, Tq * E, true},
                        {&r.key, &b.grads.key, Tk * d.kdim, !call.self_attention},
                        {&r.value, &b.grads.value, Tk * d.vdim, !call.self_attention}};
  std::vector<Buffer> grads;
  grads.reserve(std::size(parts));
  for (const Part& part : parts)
    if (part.given) grads.push_back(poisoned(uint64_t(part.n) * 4)), *part.slice = {&grads.back(), 0};

  TestCommandBuffer shot(ctx);
  pass.record(shot.cmd(), b, {&workspace, 0});
  shot.barrier();
  shot.submit_and_wait();
  r.out.resize(std::size_t(Tq * E));
  std::vector<std::byte> raw(r.out.size() * dtype_size(dtype));
  if (!raw.empty()) out.download(raw.data(), raw.size());
  decode(dtype, raw.data(), r.out.data(), r.out.size());
  for (const Part& part : parts) {
    if (!part.given) continue;
    part.values->resize(std::size_t(part.n));
    if (part.n) part.slice->buffer->download(part.values->data(), uint64_t(part.n) * 4);
  }
  return r;
}

void run_case(const LayerCase& c, DType dtype, uint64_t seed) {
  const std::string name = std::string(c.name) + " " + to_string(dtype);
  CAPTURE(name);
  if (!device_supports(dtype)) return;
  const Problem p = make_problem(c, dtype, seed);
  MultiHeadAttention layer(context(), p.w, dtype);

  const MhaBackwardResult got = recorded(layer, p, dtype);
  const reference::MhaGradients want = reference::multi_head_attention_backward(p.w, p.in, p.grad);
  expect_close("out", got.out, reference::multi_head_attention(p.w, p.in).out, dtype);
  expect_close("q_proj_weight", got.q_proj_weight, want.q_proj_weight, dtype);
  expect_close("k_proj_weight", got.k_proj_weight, want.k_proj_weight, dtype);
  expect_close("v_proj_weight", got.v_proj_weight, want.v_proj_weight, dtype);
  expect_close("in_proj_bias", got.in_proj_bias, want.in_proj_bias, dtype);
  expect_close("out_proj_weight", got.out_proj_weight, want.out_proj_weight, dtype);
  expect_close("out_proj_bias", got.out_proj_bias, want.out_proj_bias, dtype);
  expect_close("sinks", got.sinks, want.sinks, dtype);
  expect_close("query", got.query, want.query, dtype);
  expect_close("key", got.key, want.key, dtype);
  expect_close("value", got.value, want.value, dtype);
  expect_close("in_proj_weight", got.in_proj_weight(), want.in_proj_weight(), dtype);

  // The same inputs, fresh (unpoisoned) buffers: the same bits.
  const MhaBackwardResult again = layer.backward(p.in, p.grad, attention_path());
  for (const auto& [what, a, b] :
       {std::tuple{"out", &got.out, &again.out}, std::tuple{"q_proj_weight", &got.q_proj_weight, &again.q_proj_weight},
        std::tuple{"k_proj_weight", &got.k_proj_weight, &again.k_proj_weight},
        std::tuple{"v_proj_weight", &got.v_proj_weight, &again.v_proj_weight},
        std::tuple{"in_proj_bias", &got.in_proj_bias, &again.in_proj_bias},
        std::tuple{"out_proj_weight", &got.out_proj_weight, &again.out_proj_weight},
        std::tuple{"out_proj_bias", &got.out_proj_bias, &again.out_proj_bias}, std::tuple{"sinks", &got.sinks, &again.sinks},
        std::tuple{"query", &got.query, &again.query}, std::tuple{"key", &got.key, &again.key},
        std::tuple{"value", &got.value, &again.value}}) {
    INFO(what);
    CHECK(same_bits(*a, *b));
  }
}

const LayerCase kCases[] = {
    {.name = "cross attention"},
    {.name = "self attention", .seq_q = 6, .self = true},
    {.name = "kdim and vdim", .kdim = 5, .vdim = 11},
    {.name = "no bias", .kdim = 5, .bias = false},
    {.name = "GQA", .heads = 4, .kv_heads = 2, .kdim = 12},
    {.name = "self attention GQA", .seq_q = 6, .heads = 4, .kv_heads = 1, .self = true},
    {.name = "key padding", .padding = true},
    {.name = "boolean attn_mask", .attn_mask = 1},
    {.name = "float attn_mask and key padding", .padding = true, .attn_mask = 2},
    {.name = "causal top-left", .seq_q = 7, .self = true, .causal = Causal::top_left},
    {.name = "causal bottom-right", .seq_q = 4, .seq_k = 9, .causal = Causal::bottom_right},
    {.name = "sinks", .sinks = true, .padding = true},
    {.name = "alibi", .alibi = true, .causal = Causal::bottom_right},
    {.name = "window and softcap", .seq_q = 9, .self = true, .window = Window{2, 1}, .softcap = 5.0f},
    {.name = "one token, one head", .batch = 1, .seq_q = 1, .seq_k = 1, .embed = 8, .heads = 1},
    {.name = "wide heads", .batch = 1, .seq_q = 33, .seq_k = 40, .embed = 128, .heads = 2, .sinks = true},
};

}  // namespace

TEST_SUITE("mha-backward") {
  TEST_CASE("the layer's gradients on the device match the fp64 reference, and are deterministic") {
    uint64_t n = 0;
    for (const LayerCase& c : kCases)
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) run_case(c, dtype, case_seed(n++));
    expect_no_validation_messages();
  }

  TEST_CASE("a prepared backward refuses a spec it cannot run and buffers that do not fit it, naming them") {
    Context& ctx = context();
    const Problem p = make_problem(LayerCase{.name = "buffers", .sinks = true}, DType::f32, 5);
    MultiHeadAttention layer(ctx, p.w);
    MhaSpec spec;
    spec.batch = 2, spec.seq_q = 5, spec.seq_k = 7;
    MhaSpec weights = spec;
    weights.weights = true;
    CHECK(contains(error_message([&] { (void)layer.prepare_backward(weights); }), "MhaSpec::weights"));
    MhaSpec self = spec;
    self.self_attention = true;
    CHECK(contains(error_message([&] { (void)layer.prepare_backward(self); }), "self_attention needs seq_k == seq_q"));
    const PreparedMhaBackward pass = layer.prepare_backward(spec);

    const auto f32 = [&](int64_t n) { return Buffer::allocate(ctx, uint64_t(n) * 4); };
    const int64_t E = 16, KVD = 16;
    Buffer query = f32(2 * 5 * E), key = f32(2 * 7 * E), value = f32(2 * 7 * E), out = f32(2 * 5 * E), dy = f32(2 * 5 * E);
    Buffer gq = f32(E * E), gk = f32(KVD * E), gv = f32(KVD * E), gib = f32(E + 2 * KVD), gow = f32(E * E), gob = f32(E),
           gs = f32(2), gx = f32(2 * 5 * E), gkx = f32(2 * 7 * E), gvx = f32(2 * 7 * E);
    MhaBackwardBuffers b;
    b.query = &query, b.key = &key, b.value = &value, b.out = &out, b.grad_out = &dy;
    b.grads = {{&gq, 0}, {&gk, 0}, {&gv, 0}, {&gib, 0}, {&gow, 0}, {&gob, 0}, {&gs, 0}, {&gx, 0}, {&gkx, 0}, {&gvx, 0}};
    pass.run(b);  // fits

    MhaBackwardBuffers no_sinks = b;
    no_sinks.grads.sinks = {};
    CHECK(contains(error_message([&] { pass.run(no_sinks); }), "grads.sinks: the layer and pass have this gradient"));
    MhaBackwardBuffers short_query = b;
    short_query.grads.query = {&gx, 4};
    CHECK(contains(error_message([&] { pass.run(short_query); }), "grads.query"));
    MhaBackwardBuffers overlap = b;
    overlap.grads.value = {&gkx, 0};
    CHECK(contains(error_message([&] { pass.run(overlap); }), "overlaps"));
    MhaBackwardBuffers into_input = b;
    into_input.grads.value = {&key, 0};
    CHECK(contains(error_message([&] { pass.run(into_input); }), "overlaps"));
    Buffer small = Buffer::allocate(ctx, 64);
    TestCommandBuffer shot(ctx);
    CHECK(contains(error_message([&] { pass.record(shot.cmd(), b, {&small, 0}); }), "workspace: needs"));
    shot.end();
  }

  TEST_CASE("with no key (or no query) the layer's gradients are out_proj.bias's alone, as the reference's") {
    for (const LayerCase& c : {LayerCase{.name = "no key", .seq_k = 0}, LayerCase{.name = "no query", .seq_q = 0},
                               LayerCase{.name = "no key, self", .seq_q = 0, .self = true, .sinks = true}}) {
      INFO(std::string(c.name));
      const Problem p = make_problem(c, DType::f16, 4);
      MultiHeadAttention layer(context(), p.w, DType::f16);
      const MhaBackwardResult got = recorded(layer, p, DType::f16);
      const reference::MhaGradients want = reference::multi_head_attention_backward(p.w, p.in, p.grad);
      CHECK(same_bits(got.out_proj_bias, layer.backward(p.in, p.grad).out_proj_bias));
      expect_close("out", got.out, reference::multi_head_attention(p.w, p.in).out, DType::f16);
      expect_close("out_proj_bias", got.out_proj_bias, want.out_proj_bias, DType::f32);
      expect_close("in_proj_weight", got.in_proj_weight(), want.in_proj_weight(), DType::f32);
      expect_close("q_proj_weight", got.q_proj_weight, want.q_proj_weight, DType::f32);
      expect_close("sinks", got.sinks, want.sinks, DType::f32);
      expect_close("query", got.query, want.query, DType::f32);
      expect_close("key", got.key, want.key, DType::f32);
      expect_close("value", got.value, want.value, DType::f32);
      expect_close("in_proj_bias", got.in_proj_bias, want.in_proj_bias, DType::f32);
      expect_close("out_proj_weight", got.out_proj_weight, want.out_proj_weight, DType::f32);
    }
  }

  TEST_CASE("the layer's backward refuses dropout and a grad_out of another shape, dispatching nothing") {
    const Problem p = make_problem(LayerCase{.name = "refusals"}, DType::f32, 1);
    MultiHeadAttention layer(context(), p.w);
    std::vector<float> short_grad(p.grad.begin(), p.grad.end() - 1);
    CHECK(contains(error_message([&] { layer.backward(p.in, short_grad); }), "grad_out: expected (2, 5, 16)"));
    MhaInputs dropped = p.in;
    dropped.options.dropout = Dropout{0.1f, 1, 0};
    CHECK(contains(error_message([&] { layer.backward(dropped, p.grad); }), "dropout"));
  }

  TEST_CASE("set_weights replaces the weights the backward (and forward) read") {
    const Problem a = make_problem(LayerCase{.name = "a"}, DType::f32, 2);
    const Problem b = make_problem(LayerCase{.name = "b"}, DType::f32, 3);
    MultiHeadAttention layer(context(), a.w);
    layer.set_weights(b.w);
    const MhaBackwardResult got = layer.backward(a.in, a.grad);
    expect_close("query", got.query, reference::multi_head_attention_backward(b.w, a.in, a.grad).query, DType::f32);
    expect_close("out", layer.forward(a.in).out, reference::multi_head_attention(b.w, a.in).out, DType::f32);
    MhaWeights other = b.w;
    other.bias = false, other.in_proj_bias.clear(), other.out_proj_bias.clear();
    CHECK(contains(error_message([&] { layer.set_weights(other); }), "set_weights"));
  }
}
