// The GPU multi-head attention layer (vkattn::MultiHeadAttention) against its fp64 reference, on
// both attention paths: self- and cross-attention (kdim != vdim != E), GQA, both causal alignments,
// key padding (a fully padded batch element included), an additive attn_mask, bias off, every dtype,
// and the weights per head and averaged.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compare.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct LayerCase {
  DType dtype = DType::f32;
  int64_t embed = 32, heads = 4, kv_heads = 0, kdim = 0, vdim = 0;
  bool bias = true;
  int64_t batch = 2, seq_q = 7, seq_k = 7;
  bool self_attention = true;
  Causal causal = Causal::none;
  bool padding = false, attn_mask = false;
  bool need_weights = false, average = true;
  uint64_t seed = 1;
};

std::string describe(const LayerCase& c) {
  std::ostringstream s;
  s << to_string(c.dtype) << " E" << c.embed << " H" << c.heads << "/KV" << (c.kv_heads ? c.kv_heads : c.heads)
    << " kdim" << (c.kdim ? c.kdim : c.embed) << " vdim" << (c.vdim ? c.vdim : c.embed) << (c.bias ? " bias" : " no-bias")
    << " B" << c.batch << " Sq" << c.seq_q << " Sk" << c.seq_k << (c.self_attention ? " self" : " cross")
    << " causal=" << to_string(c.causal) << (c.padding ? " padding" : "") << (c.attn_mask ? " attn_mask" : "")
    << (c.need_weights ? (c.average ? " weights(avg)" : " weights(per-head)") : "") << " path=" << to_string(attention_path())
    << " seed=" << c.seed;
  return s.str();
}

// Values the GPU sees exactly: rounded to the layer's dtype.
std::vector<float> random_values(std::mt19937_64& rng, std::size_t n, float scale, DType dtype) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(dtype, u(rng));
  return v;
}

// Tolerance of the layer output: DESIGN.md §6's, relative to max|out| of the reference. The layer
// also rounds its intermediates (projected Q, K, V, the attention output) to the storage dtype, which
// the fp64 reference does not; measured errors stay well inside (f32 3e-7, f16 3e-4, bf16 2.6e-3).
double layer_tolerance(DType dtype) { return tolerance_for(dtype).out; }

void run_layer_case(const LayerCase& c) {
  INFO("case: " << describe(c));
  if (!device_supports(c.dtype)) {
    MESSAGE("skipped (device cannot store " << to_string(c.dtype) << ")");
    return;
  }
  std::mt19937_64 rng(c.seed);
  MhaWeights w;
  w.embed_dim = c.embed;
  w.num_heads = c.heads;
  w.kv_heads = c.kv_heads;
  w.kdim = c.kdim;
  w.vdim = c.vdim;
  w.bias = c.bias;
  const int64_t E = c.embed, kdim = w.effective_kdim(), vdim = w.effective_vdim();
  const int64_t kvd = w.effective_kv_heads() * (E / c.heads);
  w.q_proj_weight = random_values(rng, E * E, 1.0f / std::sqrt(float(E)), c.dtype);
  w.k_proj_weight = random_values(rng, kvd * kdim, 1.0f / std::sqrt(float(kdim)), c.dtype);
  w.v_proj_weight = random_values(rng, kvd * vdim, 1.0f / std::sqrt(float(vdim)), c.dtype);
  w.out_proj_weight = random_values(rng, E * E, 1.0f / std::sqrt(float(E)), c.dtype);
  if (c.bias) {
    w.in_proj_bias = random_values(rng, E + 2 * kvd, 0.5f, c.dtype);
    w.out_proj_bias = random_values(rng, E, 0.5f, c.dtype);
  }
  const std::vector<float> query = random_values(rng, c.batch * c.seq_q * E, 2.0f, c.dtype);
  std::vector<float> key, value;
  MhaInputs in;
  in.batch = c.batch;
  in.seq_q = c.seq_q;
  in.seq_k = c.self_attention ? c.seq_q : c.seq_k;
  in.query = query;
  if (!c.self_attention) {
    key = random_values(rng, c.batch * c.seq_k * kdim, 2.0f, c.dtype);
    value = random_values(rng, c.batch * c.seq_k * vdim, 2.0f, c.dtype);
    in.key = key;
    in.value = value;
  }
  const int64_t Sk = in.seq_k;
  in.causal = c.causal;
  if (c.padding) {
    // Batch 0 hides its last keys; batch 1 (when there is one) hides every key: its rows are all 0.
    in.key_padding_mask.assign(c.batch * Sk, 0);
    for (int64_t j = Sk / 2 + 1; j < Sk; ++j) in.key_padding_mask[j] = 1;
    if (c.batch > 1) std::fill(in.key_padding_mask.begin() + Sk, in.key_padding_mask.begin() + 2 * Sk, 1);
  }
  if (c.attn_mask) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    in.attn_mask.resize(c.seq_q * Sk);
    for (float& x : in.attn_mask) x = u(rng) < -0.6f ? -std::numeric_limits<float>::infinity() : u(rng);
  }
  in.need_weights = c.need_weights;
  in.average_weights = c.average;

  const reference::MhaOutputs ref = reference::multi_head_attention(w, in);
  MultiHeadAttention layer(context(), w, c.dtype);
  const MhaResult got = layer.forward(in, attention_path());
  expect_no_validation_messages();

  REQUIRE(got.out.size() == ref.out.size());
  double scale = 1e-30, err = 0;
  for (const double x : ref.out) scale = std::max(scale, std::abs(x));
  std::size_t bad = 0, first_bad = 0;
  for (std::size_t i = 0; i < ref.out.size(); ++i) {
    const double e = std::abs(double(got.out[i]) - ref.out[i]) / scale;
    if (!(e <= layer_tolerance(c.dtype))) {
      if (!bad++) first_bad = i;
    }
    if (std::isfinite(e)) err = std::max(err, e);
  }
  CHECK_MESSAGE(bad == 0, bad << " outputs beyond " << layer_tolerance(c.dtype) << " of max|out| " << scale
                              << " (first at " << first_bad << ": expected " << ref.out[first_bad] << ", got "
                              << got.out[first_bad] << "); max error " << err);
  if (!c.need_weights) {
    CHECK(got.weights.empty());
    return;
  }
  REQUIRE(got.weights.size() == ref.weights.size());
  std::size_t bad_weights = 0;
  for (std::size_t i = 0; i < ref.weights.size(); ++i) {
    const double e = ref.weights[i], g = got.weights[i];
    // A masked key weighs exactly 0; other weights are probabilities, within the dtype's tolerance.
    const bool ok = e == 0.0 ? g == 0.0 : std::abs(g - e) <= layer_tolerance(c.dtype);
    if (!ok && bad_weights++ == 0) MESSAGE("first bad weight at " << i << ": expected " << e << ", got " << g);
  }
  CHECK_MESSAGE(bad_weights == 0, bad_weights << " weights differ from the reference");
}

}  // namespace

TEST_SUITE("conformance-mha") {
  TEST_CASE("self-attention, every dtype") {
    uint64_t n = 0;
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      LayerCase c;
      c.dtype = dtype;
      c.seed = case_seed(7000 + n++);
      run_layer_case(c);
    }
  }

  TEST_CASE("cross-attention with kdim != vdim != E, odd sizes") {
    LayerCase c;
    c.embed = 24, c.heads = 3, c.kdim = 10, c.vdim = 7;
    c.self_attention = false;
    c.batch = 3, c.seq_q = 5, c.seq_k = 13;
    c.seed = case_seed(7010);
    run_layer_case(c);
  }

  TEST_CASE("grouped-query attention: 8 heads over 2 KV heads, cross, f16") {
    LayerCase c;
    c.dtype = DType::f16;
    c.embed = 64, c.heads = 8, c.kv_heads = 2, c.kdim = 40, c.vdim = 40;
    c.self_attention = false;
    c.seq_q = 9, c.seq_k = 33;
    c.seed = case_seed(7020);
    run_layer_case(c);
  }

  TEST_CASE("causal, both alignments, with seq_q != seq_k") {
    uint64_t n = 0;
    for (const Causal causal : {Causal::top_left, Causal::bottom_right}) {
      LayerCase c;
      c.causal = causal;
      c.self_attention = false;
      c.seq_q = 6, c.seq_k = 11;
      c.seed = case_seed(7030 + n++);
      run_layer_case(c);
    }
  }

  TEST_CASE("key padding (a fully padded batch element), attn_mask, bias off") {
    LayerCase c;
    c.padding = true;
    c.attn_mask = true;
    c.bias = false;
    c.seq_q = c.seq_k = 17;
    c.seed = case_seed(7040);
    run_layer_case(c);
    c.attn_mask = false;
    c.bias = true;
    c.seed = case_seed(7041);
    run_layer_case(c);
  }

  TEST_CASE("attention weights, per head and averaged, masked and causal") {
    uint64_t n = 0;
    for (const bool average : {false, true}) {
      LayerCase c;
      c.need_weights = true;
      c.average = average;
      c.padding = true;
      c.causal = Causal::bottom_right;
      c.self_attention = false;
      c.seq_q = 5, c.seq_k = 19;
      c.seed = case_seed(7050 + n++);
      run_layer_case(c);
    }
  }

  TEST_CASE("a batch beyond maxComputeWorkGroupCount (66,000): the projections split across dispatches") {
    // The projections' split does not depend on the attention path, and the unfused path's own grid
    // split is covered by the long suite: one path is enough for this slow case (30 s on lavapipe).
    if (attention_path() == AttentionPath::unfused) return;
    LayerCase c;
    c.embed = 8, c.heads = 2;
    c.batch = 66000;
    c.seq_q = c.seq_k = 2;
    c.seed = case_seed(7070);
    run_layer_case(c);
  }

  TEST_CASE("a wider layer: E 256, 4 heads of 64, 70 tokens") {
    LayerCase c;
    c.embed = 256;
    c.seq_q = c.seq_k = 70;
    c.batch = 1;
    c.seed = case_seed(7060);
    run_layer_case(c);
  }
}
