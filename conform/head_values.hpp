// The per-head values of a conformance case's modifiers (case_runner.cpp, paged_case.cpp,
// varlen_case.cpp): ALiBi slopes and sink logits, drawn from the case's generator, given to the
// reference and uploaded for the call.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include <vkattn/vkattn.hpp>

namespace vkattn::conform {

// The values and their layouts; none for a modifier the case lacks.
struct HeadValues {
  std::optional<HeadValuesLayout> alibi_layout, sinks_layout;
  std::vector<float> alibi, sinks;
};

// ALiBi slopes in [0, 1) times alibi_scale (a model's are 2^-8k/H for k = 1..H), (H) for alibi_batch 1
// or (B, H) for alibi_batch B, and sink logits log(longest sequence) + [-2, 4) (or every one
// sink_value): about as heavy as all the keys together, so that a sink left out or counted twice shows
// in every dtype's tolerance however long the keys are. Each array starts `offset` elements into its
// values (junk before: NaN). Draws from `rng` in the order the cases always have: every slope, then
// every sink.
struct HeadValuesOffsets {
  int64_t alibi = 0, sinks = 0;
};
HeadValues draw_head_values(std::mt19937_64& rng, int64_t heads, int64_t alibi_batch, float alibi_scale, bool sinks,
                            std::optional<float> sink_value, int64_t longest, HeadValuesOffsets offset = {});

// The same from a case's fields (AttentionCase, PagedCase, VarlenCase).
template <typename Case>
HeadValues draw_head_values(const Case& c, std::mt19937_64& rng, int64_t longest, HeadValuesOffsets offset = {}) {
  return draw_head_values(rng, c.heads, c.alibi_batch, c.alibi_scale, c.sinks, c.sink_value, longest, offset);
}

// The values on the device.
struct HeadValueBuffers {
  std::optional<Buffer> alibi, sinks;
};
HeadValueBuffers upload(Context& ctx, const HeadValues& values);

// Points a call's buffers (PagedAttentionBuffers, VarlenAttentionBuffers) at them.
template <typename CallBuffers>
void bind(HeadValueBuffers& device, CallBuffers& bufs) {
  if (device.alibi) bufs.alibi = &*device.alibi;
  if (device.sinks) bufs.sinks = &*device.sinks;
}

}  // namespace vkattn::conform
