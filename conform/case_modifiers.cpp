#include "conform/case_modifiers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "conform/host_bytes.hpp"

namespace vkattn::conform {

std::string attention_text(const CaseModifiers& m) {
  std::ostringstream s;
  s << score_options_text(m.options, "=");
  if (m.alibi_batch) s << " alibi=" << (m.alibi_batch > 1 ? "(B,H)" : "(H)");
  if (m.alibi_batch && m.alibi_scale != 1.0f) s << "x" << m.alibi_scale;
  if (m.sinks) s << " sinks";
  if (m.sinks && m.sink_value) s << "=" << *m.sink_value;
  return s.str();
}

std::string serving_text(const CaseModifiers& m) {
  std::ostringstream s;
  s << score_options_text(m.options, " ");
  if (m.alibi_batch) s << " alibi (" << (m.alibi_batch > 1 ? "B,H" : "H") << ")";
  if (m.alibi_batch && m.alibi_scale != 1.0f) s << " x" << m.alibi_scale;
  // (" sinks <value> sinks": the wording the case descriptions have always had.)
  if (m.sinks && m.sink_value) s << " sinks " << *m.sink_value;
  if (m.sinks) s << " sinks";
  return s.str();
}

std::string layer_text(const CaseModifiers& m) {
  std::ostringstream s;
  s << score_options_text(m.options, "=");
  if (m.sink_value) s << " sinks=" << *m.sink_value;
  if (m.alibi_batch && m.alibi_scale != 1.0f) s << " alibi x" << m.alibi_scale;
  s << (m.sinks ? " sinks" : "") << (m.alibi_batch ? " alibi" : "");
  return s.str();
}

void add_attention_features(const CaseModifiers& m, Causal causal, FeatureTags& f) {
  int modifiers = 0;
  for (const ScoreOption& option : score_options())
    if (const std::string tag = option.feature(m.options); !tag.empty()) {
      f.emplace_back("modifiers", tag);
      ++modifiers;
    }
  if (m.alibi_batch) {
    f.emplace_back("modifiers", m.alibi_batch > 1 ? "ALiBi (B,H)" : "ALiBi (H)");
    ++modifiers;
  }
  if (m.sinks) {
    f.emplace_back("modifiers", "sinks");
    ++modifiers;
  }
  // Causal fixes the alignment; without it the window and ALiBi use align's (bottom-right by default).
  if ((m.options.window || m.alibi_batch) && causal == Causal::none)
    f.emplace_back("modifiers", std::string("aligned ") + to_string(m.options.align.value_or(Align::bottom_right)));
  if (modifiers == 0) f.emplace_back("modifiers", "none");
  if (modifiers > 1) f.emplace_back("modifiers", "combined");
}

void add_serving_features(const CaseModifiers& m, FeatureTags& f) {
  for (const ScoreOption& option : score_options())
    if (const std::string tag = option.feature(m.options); !tag.empty()) f.emplace_back("modifier", tag);
  if (m.alibi_batch) f.emplace_back("modifier", "alibi");
  if (m.sinks) f.emplace_back("modifier", "sinks");
}

void add_layer_features(const CaseModifiers& m, FeatureTags& f) {
  for (const ScoreOption& option : score_options())
    if (const std::string tag = option.feature(m.options); !tag.empty()) f.emplace_back("layer", tag);
  if (m.sinks) f.emplace_back("layer", "attention sinks");
  if (m.alibi_batch) f.emplace_back("layer", "ALiBi");
}

CaseModifiers every_modifier(Window window, float cap, int64_t alibi_batch) {
  CaseModifiers m;
  m.options.window = window;
  m.options.softcap = cap;
  m.alibi_batch = alibi_batch;
  m.sinks = true;
  return m;
}

PerHeadValues HeadValues::reference() const {
  PerHeadValues r;
  for (PerHeadTensor t : kPerHeadTensors) {
    r.layout(t) = layouts[t];
    r.values(t) = values[t];
  }
  return r;
}

HeadValues draw_head_values(const CaseModifiers& m, std::mt19937_64& rng, int64_t heads, int64_t longest,
                            PerHead<int64_t> offsets) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float sink_base = static_cast<float>(std::log(double(std::max<int64_t>(longest, 1))));
  std::uniform_real_distribution<float> slope_dist(0.0f, 1.0f), sink_dist(sink_base - 2.0f, sink_base + 4.0f);
  HeadValues v;
  const PerHead<int64_t> batch{m.alibi_batch, m.sinks ? 1 : 0};
  for (PerHeadTensor t : kPerHeadTensors) {
    if (!batch[t]) continue;
    const HeadValuesLayout& l = v.layouts[t].emplace(HeadValuesLayout{batch[t], heads, offsets[t]});
    v.values[t].assign(std::size_t(l.required_elements()), kNaN);
    // (A set sink_value still takes its draw: the generator's sequence is the cases' identity.)
    for (int64_t e = offsets[t]; e < l.required_elements(); ++e)
      v.values[t][std::size_t(e)] = t == PerHeadTensor::alibi ? slope_dist(rng) * m.alibi_scale
                                                              : m.sink_value.value_or(sink_dist(rng));
  }
  return v;
}

HeadValueBuffers upload(Context& ctx, const HeadValues& values) {
  HeadValueBuffers b;
  for (PerHeadTensor t : kPerHeadTensors)
    if (values.layouts[t]) b[t].emplace(upload_bytes(ctx, values.values[t].data(), values.values[t].size() * 4));
  return b;
}

void bind_head_values(const HeadValueBuffers& device, const HeadValues& values, AttentionArgs& args) {
  for (PerHeadTensor t : kPerHeadTensors)
    if (values.layouts[t]) args[t] = {&*device[t], *values.layouts[t]};
}

void draw_layer_weights(const CaseModifiers& m, std::mt19937_64& rng, MhaWeights& w) {
  // The layer's slopes are weights of one per head: it has no (B, H) form.
  if (m.alibi_batch > 1) throw std::invalid_argument("a layer case's alibi_batch must be 0 or 1");
  const int64_t heads = w.num_heads;
  if (m.sinks) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    w.sinks.resize(static_cast<std::size_t>(heads));
    for (float& x : w.sinks) x = round_to(DType::f32, u(rng));
  }
  if (m.sink_value) std::fill(w.sinks.begin(), w.sinks.end(), *m.sink_value);
  for (int64_t h = 0; m.alibi_batch && h < heads; ++h)
    w.alibi_slopes.push_back(std::exp2(-8.0f * float(h + 1) / float(heads)) * m.alibi_scale);
}

}  // namespace vkattn::conform
