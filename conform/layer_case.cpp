#include "conform/layer_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>

#include "conform/compare.hpp"

namespace vkattn::conform {

namespace {

// Values the device sees exactly: rounded to the layer's dtype.
std::vector<float> random_values(std::mt19937_64& rng, int64_t n, float scale, DType dtype) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = round_to(dtype, u(rng));
  return v;
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", x);
  return text;
}

// The weights, scaled like PyTorch's initialisation so the projections stay O(1).
MhaWeights random_weights(const LayerCase& c, std::mt19937_64& rng) {
  MhaWeights w;
  w.embed_dim = c.embed;
  w.num_heads = c.heads;
  w.kv_heads = c.kv_heads;
  w.kdim = c.kdim;
  w.vdim = c.vdim;
  w.bias = c.bias;
  const int64_t E = c.embed, kdim = w.effective_kdim(), vdim = w.effective_vdim();
  const int64_t kv_width = w.effective_kv_heads() * (E / c.heads);
  w.q_proj_weight = random_values(rng, E * E, 1.0f / std::sqrt(float(E)), c.dtype);
  w.k_proj_weight = random_values(rng, kv_width * kdim, 1.0f / std::sqrt(float(kdim)), c.dtype);
  w.v_proj_weight = random_values(rng, kv_width * vdim, 1.0f / std::sqrt(float(vdim)), c.dtype);
  w.out_proj_weight = random_values(rng, E * E, 1.0f / std::sqrt(float(E)), c.dtype);
  if (c.bias) {
    w.in_proj_bias = random_values(rng, E + 2 * kv_width, 0.5f, c.dtype);
    w.out_proj_bias = random_values(rng, E, 0.5f, c.dtype);
  }
  draw_layer_weights(c.modifiers, rng, w);
  return w;
}

// The inputs' vectors, which MhaInputs only points at.
struct LayerInputs {
  std::vector<float> query, key, value;
  MhaInputs in;
};

void random_inputs(const LayerCase& c, const MhaWeights& w, std::mt19937_64& rng, LayerInputs& li) {
  const int64_t E = c.embed;
  li.query = random_values(rng, c.batch * c.seq_q * E, 2.0f, c.dtype);
  MhaInputs& in = li.in;
  in.batch = c.batch;
  in.seq_q = c.seq_q;
  in.seq_k = c.self_attention ? c.seq_q : c.seq_k;
  in.query = li.query;
  if (!c.self_attention) {
    li.key = random_values(rng, c.batch * c.seq_k * w.effective_kdim(), 2.0f, c.dtype);
    li.value = random_values(rng, c.batch * c.seq_k * w.effective_vdim(), 2.0f, c.dtype);
    in.key = li.key;
    in.value = li.value;
  }
  const int64_t Sk = in.seq_k;
  in.options.causal = c.causal;
  if (c.padding) {
    in.key_padding_mask.assign(static_cast<std::size_t>(c.batch * Sk), 0);
    for (int64_t j = Sk / 2 + 1; j < Sk; ++j) in.key_padding_mask[static_cast<std::size_t>(j)] = 1;
    if (c.batch > 1) std::fill(in.key_padding_mask.begin() + Sk, in.key_padding_mask.begin() + 2 * Sk, 1);
  }
  if (c.attn_mask) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    in.attn_mask.resize(static_cast<std::size_t>(c.seq_q * Sk));
    for (float& x : in.attn_mask) x = u(rng) < -0.6f ? -std::numeric_limits<float>::infinity() : u(rng);
  }
  apply_options(c.modifiers, in.options);
  in.need_weights = c.need_weights;
  in.average_weights = c.average;
}

// The output's tolerance is its dtype's (docs/testing.md, "Precision and the tolerances the tests use"), relative to max|out| of the reference. The layer also
// rounds its intermediates (projected Q, K, V, the attention output) to the storage dtype, which the
// fp64 reference does not; measured errors stay well inside (f32 3e-7, f16 3e-4, bf16 2.6e-3).
void compare_layer(const LayerCase& c, const reference::MhaOutputs& ref, const MhaResult& got, CaseResult& result) {
  const double tolerance = tolerance_for(c.dtype).out;
  if (got.out.size() != ref.out.size()) {
    result.problems.push_back("out has " + std::to_string(got.out.size()) + " values, expected " +
                              std::to_string(ref.out.size()));
    return;
  }
  double scale = 1e-30;
  for (const double x : ref.out) scale = std::max(scale, std::abs(x));
  std::size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < ref.out.size(); ++i) {
    const double e = std::abs(double(got.out[i]) - ref.out[i]) / scale;
    if (!(e <= tolerance) && bad++ == 0) first_bad = i;
    if (std::isfinite(e)) worst = std::max(worst, e);
  }
  result.worst = std::max(result.worst, worst / tolerance);
  if (bad)
    result.problems.push_back(std::to_string(bad) + " outputs beyond " + number(tolerance) + " of max|out| " +
                              number(scale) + " (first at " + std::to_string(first_bad) + ": expected " +
                              number(ref.out[first_bad]) + ", got " + number(got.out[first_bad]) +
                              "); max error " + number(worst));
  if (!c.need_weights) {
    if (!got.weights.empty()) result.problems.push_back("weights returned without need_weights");
    return;
  }
  // The weights follow the shared rules (compare.hpp): exactly 0 for a masked key, else within the
  // dtype's tolerance; averaged weights are one "head".
  const WeightsShape shape{c.batch, c.average ? 1 : c.heads, c.seq_q, c.self_attention ? c.seq_q : c.seq_k};
  const Comparison weights = compare_weights(ref.weights, shape, got.weights, c.dtype);
  result.worst = std::max(result.worst, weights.worst);
  if (!weights.ok()) result.problems.push_back(weights.text);
}

// What the layer says when asked for the weights on the fused path.
constexpr const char* kFusedWeightsRefusal = "only the unfused (three-stage) path computes the weights";

}  // namespace

std::string describe(const LayerCase& c) {
  std::ostringstream s;
  s << "layer " << to_string(c.dtype) << " E" << c.embed << " H" << c.heads << "/KV" << (c.kv_heads ? c.kv_heads : c.heads)
    << " kdim" << (c.kdim ? c.kdim : c.embed) << " vdim" << (c.vdim ? c.vdim : c.embed) << (c.bias ? " bias" : " no-bias")
    << " B" << c.batch << " Sq" << c.seq_q << " Sk" << (c.self_attention ? c.seq_q : c.seq_k)
    << (c.self_attention ? " self" : " cross") << " causal=" << to_string(c.causal) << (c.padding ? " padding" : "")
    << (c.attn_mask ? " attn_mask" : "");
  s << layer_text(c.modifiers)
    << (c.need_weights ? (c.average ? " weights(avg)" : " weights(per-head)") : "")
    << (c.fused_only ? " fused-only" : "") << " seed=" << c.seed;
  return s.str();
}

std::vector<std::pair<std::string, std::string>> features(const LayerCase& c) {
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("dtype", to_string(c.dtype));
  f.emplace_back("layer", c.self_attention ? "self-attention" : "cross-attention");
  if ((c.kdim && c.kdim != c.embed) || (c.vdim && c.vdim != c.embed)) f.emplace_back("layer", "kdim/vdim != embed");
  if (c.kv_heads && c.kv_heads != c.heads) f.emplace_back("layer", "GQA " + std::to_string(c.heads / c.kv_heads) + ":1");
  if (c.causal != Causal::none) f.emplace_back("layer", std::string("causal ") + to_string(c.causal));
  if (c.padding) f.emplace_back("layer", "key padding");
  if (c.attn_mask) f.emplace_back("layer", "attn_mask");
  if (!c.bias) f.emplace_back("layer", "no bias");
  add_layer_features(c.modifiers, f);
  if (c.need_weights) f.emplace_back("layer", c.average ? "weights averaged" : "weights per head");
  if (c.batch > 65535) f.emplace_back("layer", "batch beyond 65535");
  return f;
}

CaseResult run_layer_case(Context& context, const LayerCase& c, const RunOptions& options) {
  if (options.profile) {
    CaseResult result;
    result.outcome = Outcome::skipped;
    result.skip_reason = "the layer plans for the device it runs on; --profile applies to attention cases";
    return result;
  }
  if (c.fused_only && options.path == AttentionPath::unfused) {
    CaseResult result;
    result.outcome = Outcome::skipped;
    result.skip_reason = "runs on the fused path only";
    return result;
  }
  return run_in_frame(context, c.dtype, options, [&](CaseResult& result) {
    std::mt19937_64 rng(c.seed);
    const MhaWeights weights = random_weights(c, rng);
    LayerInputs inputs;
    random_inputs(c, weights, rng, inputs);
    const reference::MhaOutputs ref = reference::multi_head_attention(weights, inputs.in);
    MultiHeadAttention layer(context, weights, c.dtype);
    if (!(c.need_weights && options.path == AttentionPath::fused)) {
      compare_layer(c, ref, layer.forward(inputs.in, options.path), result);
      return;
    }
    // Only the three-stage path computes the weights: the fused path must refuse, clearly.
    try {
      layer.forward(inputs.in, options.path);
      result.problems.push_back("need_weights on the fused path was not refused");
    } catch (const Error& e) {
      if (std::string(e.what()).find(kFusedWeightsRefusal) == std::string::npos)
        result.problems.push_back(std::string("need_weights on the fused path: expected an Error containing \"") +
                                  kFusedWeightsRefusal + "\", got: " + e.what());
    }
  });
}

}  // namespace vkattn::conform
