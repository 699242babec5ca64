#include "conform/head_values.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "conform/host_bytes.hpp"

namespace vkattn::conform {

HeadValues draw_head_values(std::mt19937_64& rng, int64_t heads, int64_t alibi_batch, float alibi_scale, bool sinks,
                            std::optional<float> sink_value, int64_t longest, HeadValuesOffsets offset) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float sink_base = static_cast<float>(std::log(double(std::max<int64_t>(longest, 1))));
  std::uniform_real_distribution<float> slope_dist(0.0f, 1.0f), sink_dist(sink_base - 2.0f, sink_base + 4.0f);
  HeadValues v;
  if (alibi_batch) {
    v.alibi_layout = HeadValuesLayout{alibi_batch, heads, offset.alibi};
    v.alibi.assign(std::size_t(v.alibi_layout->required_elements()), kNaN);
    for (int64_t e = offset.alibi; e < v.alibi_layout->required_elements(); ++e)
      v.alibi[std::size_t(e)] = slope_dist(rng) * alibi_scale;
  }
  if (sinks) {
    v.sinks_layout = HeadValuesLayout{1, heads, offset.sinks};
    v.sinks.assign(std::size_t(v.sinks_layout->required_elements()), kNaN);
    // (A set sink_value still takes its draw: the generator's sequence is the cases' identity.)
    for (int64_t e = offset.sinks; e < v.sinks_layout->required_elements(); ++e)
      v.sinks[std::size_t(e)] = sink_value.value_or(sink_dist(rng));
  }
  return v;
}

HeadValueBuffers upload(Context& ctx, const HeadValues& values) {
  HeadValueBuffers b;
  if (values.alibi_layout) b.alibi.emplace(upload_bytes(ctx, values.alibi.data(), values.alibi.size() * 4));
  if (values.sinks_layout) b.sinks.emplace(upload_bytes(ctx, values.sinks.data(), values.sinks.size() * 4));
  return b;
}

}  // namespace vkattn::conform
