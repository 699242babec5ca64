// A conformance case's score modifiers (docs/semantics.md, "Score modifiers") as one value, and everything the
// runners do with them: their text in a case's description, their feature tags, the call options
// they set, and the per-head tensors (ALiBi slopes, sink logits) drawn from the case's generator,
// given to the reference and bound to the call. Every kind of case (AttentionCase, ServingCase,
// LayerCase) holds one CaseModifiers, so that adding a per-head tensor touches this file
// and the catalogs that use it, not each runner; the options are described and tagged from the table
// of score options (vkattn/score_options.hpp), so adding one touches only the catalogs here.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/vkattn.hpp>

namespace vkattn::conform {

struct CaseModifiers {
  // The call's score options (vkattn/score_options.hpp: window, align, softcap); its other options
  // (causal, scale, ...) are the case's own.
  AttentionOptions options;
  // Per-head tensors drawn from the seed: ALiBi slopes (0: none; 1: (H); the batch: (B, H) — the
  // layer takes 0 or 1, its slopes being weights, one per head) and one sink logit per head.
  int64_t alibi_batch = 0;
  bool sinks = false;
  // The extremes section's slopes and sinks: every drawn ALiBi slope times alibi_scale (up to
  // +-FLT_MAX, or subnormal), and every head's sink logit set to sink_value (e.g. +-FLT_MAX).
  float alibi_scale = 1.0f;
  std::optional<float> sink_value;
};

// Every modifier at once, as serving and layer catalogs test them beside their own features: a
// window, a logit cap, ALiBi slopes ((H) for alibi_batch 1, (B, H) for the batch) and a sink per head.
CaseModifiers every_modifier(Window window, float cap, int64_t alibi_batch);

// The modifiers' part of describe(), in each kind of case's own wording (the case ids' descriptions
// predate this struct and stay as they were): " window=7:3 softcap=5 sinks" for attention cases,
// " window 7:3 softcap 5 sinks" for paged and packed ones, the layer's " window=7:3 ... sinks alibi".
// Empty without modifiers; otherwise starts with a space.
std::string attention_text(const CaseModifiers& m);
std::string serving_text(const CaseModifiers& m);
std::string layer_text(const CaseModifiers& m);

// The modifiers' feature tags (features()), appended to `f` in each kind's own groups: attention
// cases under "modifiers" (with "none", "combined" and, without causal, the alignment the window and
// ALiBi use), serving cases under "modifier", layer cases under "layer".
using FeatureTags = std::vector<std::pair<std::string, std::string>>;
void add_attention_features(const CaseModifiers& m, Causal causal, FeatureTags& f);
void add_serving_features(const CaseModifiers& m, FeatureTags& f);
void add_layer_features(const CaseModifiers& m, FeatureTags& f);

// The modifiers that are options set on a call's options, which every source's layouts and the
// layer's inputs hold alike.
inline void apply_options(const CaseModifiers& m, AttentionOptions& options) { copy_score_options(m.options, options); }

// The per-head tensors' values and their layouts; none for a modifier the case lacks.
struct HeadValues {
  PerHeadLayouts layouts;
  PerHead<std::vector<float>> values;

  // The values and their layouts as a reference's inputs (reference::Inputs, PagedInputs,
  // VarlenInputs), which only point at them.
  PerHeadValues reference() const;
};

// ALiBi slopes in [0, 1) times alibi_scale (a model's are 2^-8k/H for k = 1..H), (H) for alibi_batch 1
// or (B, H) for alibi_batch B, and sink logits log(longest sequence) + [-2, 4) (or every one
// sink_value): about as heavy as all the keys together, so that a sink left out or counted twice shows
// in every dtype's tolerance however long the keys are. Each array starts `offset` elements into its
// values (junk before: NaN). Draws from `rng` in the order the cases always have: every slope, then
// every sink.
HeadValues draw_head_values(const CaseModifiers& m, std::mt19937_64& rng, int64_t heads, int64_t longest,
                            PerHead<int64_t> offsets = {});

// The layouts of the values on a serving call's layouts (PagedAttentionLayouts, VarlenAttentionLayouts).
template <typename Layouts>
void set_layouts(const HeadValues& values, Layouts& layouts) {
  layouts.per_head() = values.layouts;
}

// The values and their layouts as a reference's inputs.
template <typename ReferenceInputs>
void set_reference_inputs(const HeadValues& values, ReferenceInputs& in) {
  in.per_head_values() = values.reference();
}

// The values on the device.
using HeadValueBuffers = PerHead<std::optional<Buffer>>;
HeadValueBuffers upload(Context& ctx, const HeadValues& values);

// Points a call's buffers (AttentionBuffers, of any key/value source) at them.
inline void bind_head_values(const HeadValueBuffers& device, AttentionBuffers& bufs) {
  for (PerHeadTensor t : kPerHeadTensors)
    if (device[t]) bufs[t] = &*device[t];
}

// Points a dense call's arguments at them, with their layouts.
void bind_head_values(const HeadValueBuffers& device, const HeadValues& values, AttentionArgs& args);

// The layer's per-head weights (its MhaWeights' sinks and ALiBi slopes, one per head of
// w.num_heads), drawn after its projections: sinks uniform in [-2, 2], about as large as the scores,
// so that they take a visible share of each row (or every one sink_value); ALiBi's geometric slopes
// 2^(-8 (h + 1) / H) (BLOOM's) times alibi_scale, which draw nothing.
void draw_layer_weights(const CaseModifiers& m, std::mt19937_64& rng, MhaWeights& w);

}  // namespace vkattn::conform
