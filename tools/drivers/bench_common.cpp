#include "bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "bench_metrics.hpp"
#include "vkattn/dispatch_profile.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/q8_0.hpp"

namespace vkattn::cli {

std::vector<float> random_values(std::size_t count, DType dtype, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& x : values) x = round_to(dtype, normal(rng));
  return values;
}

std::vector<float> random_key_values(const TensorLayout& layout, const std::vector<int32_t>& kv_lengths, DType dtype,
                                     std::mt19937_64& rng) {
  if (kv_lengths.empty()) return random_values(static_cast<std::size_t>(layout.element_count()), dtype, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(layout.element_count()), std::numeric_limits<float>::quiet_NaN());
  for (int64_t b = 0; b < layout.batch; ++b)
    for (int64_t g = 0; g < layout.heads; ++g)
      for (int64_t s = 0; s < std::min<int64_t>(kv_lengths[static_cast<std::size_t>(b)], layout.seq); ++s)
        for (int64_t d = 0; d < layout.dim; ++d)
          values[static_cast<std::size_t>(layout.offset + b * layout.stride_batch + g * layout.stride_head +
                                          s * layout.stride_seq + d)] = round_to(dtype, normal(rng));
  return values;
}

Buffer upload(Context& context, DType dtype, const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  return upload_bytes(context, bytes.data(), bytes.size());
}

Buffer upload_bytes(Context& context, const void* data, std::size_t bytes) {
  Buffer buffer = Buffer::allocate(context, std::max<uint64_t>(bytes, 16));
  if (bytes) buffer.upload(data, bytes);
  return buffer;
}

Buffer upload_kv(Context& context, DType dtype, const std::vector<float>& values, const std::vector<uint8_t>& blocks) {
  return blocks.empty() ? upload(context, dtype, values) : upload_bytes(context, blocks.data(), blocks.size());
}

std::string mib_text(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

void check_shape_fits(const BenchOptions& o, const DeviceInfo& device, const std::vector<uint64_t>& buffers) {
  uint64_t total = 0, largest = 0;
  for (uint64_t b : buffers) {
    total += b;
    largest = std::max(largest, b);
  }
  const uint64_t limit_mib = static_cast<uint64_t>(o.max_memory_mib);
  if (limit_mib > 0 && total > limit_mib * 1024 * 1024)
    throw ShapeSkipped("needs " + mib_text(total) + " of device buffers, more than --max-memory " +
                       std::to_string(limit_mib) + " MiB");
  if (device.device_memory_bytes > 0 && total > device.device_memory_bytes)
    throw ShapeSkipped("needs " + mib_text(total) + " of device buffers, more than the " +
                       mib_text(device.device_memory_bytes) + " heap of " + device.name);
  for (const auto& [limit, name] : {std::pair{device.max_buffer_size, "maxBufferSize"},
                                    std::pair{device.max_allocation_size, "maxMemoryAllocationSize"}})
    if (limit > 0 && largest > limit)
      throw ShapeSkipped("a buffer of " + mib_text(largest) + " exceeds " + name + " (" + mib_text(limit) + ")");
}

std::vector<int64_t> sequence_lengths(const BenchShape& shape) {
  if (!shape.kv_lengths.empty()) return shape.kv_lengths;
  return std::vector<int64_t>(static_cast<std::size_t>(shape.batch), shape.seq_k);
}

uint64_t kv_read_bytes(const BenchShape& shape, DType dtype) {
  uint64_t keys = 0;
  for (const int64_t len : sequence_lengths(shape)) keys += static_cast<uint64_t>(len);
  // --v-view: V is read from K's rows, one cache.
  const int64_t dims = shape.v_views_k ? shape.dim_qk : shape.dim_qk + shape.dim_v;
  const uint64_t elements = keys * static_cast<uint64_t>(shape.kv_heads * dims);
  if (shape.kv_quant == KvQuant::q8_0) return elements / kQ8_0BlockElements * kQ8_0BlockBytes;
  return elements * dtype_size(dtype);
}

double credited_flops(const AttentionProblem& problem, const std::vector<int64_t>& lengths, bool per_sequence) {
  if (!per_sequence) return attention_flops(problem, lengths);
  double pairs = 0;
  for (const int64_t len : lengths) {
    AttentionProblem p = problem;
    p.seq_k = len;
    pairs += visible_pairs(p, len);
  }
  return 2.0 * static_cast<double>(problem.heads) * pairs * static_cast<double>(problem.dim_qk + problem.dim_v);
}

double credited_flops(const AttentionProblem& problem, const std::vector<int64_t>& q_lengths,
                      const std::vector<int64_t>& kv_lengths) {
  double pairs = 0;
  for (std::size_t b = 0; b < kv_lengths.size() && b < q_lengths.size(); ++b) {
    AttentionProblem p = problem;
    p.batch = 1;
    p.seq_q = q_lengths[b];
    p.seq_k = kv_lengths[b];
    pairs += visible_pairs(p, kv_lengths[b]);
  }
  return 2.0 * static_cast<double>(problem.heads) * pairs * static_cast<double>(problem.dim_qk + problem.dim_v);
}

namespace {

// Each pipeline of a call, where it is first dispatched in `first` (a run's dispatches) paired with
// the dispatch at the same place in `warm` (a later run of the same call), and its build time from
// `builds`; none when the two runs' dispatches differ.
std::vector<PipelineFirstDispatch> first_dispatches(const std::vector<DispatchTime>& first,
                                                    const std::vector<DispatchTime>& warm,
                                                    const std::vector<PipelineBuild>& builds) {
  std::vector<PipelineFirstDispatch> out;
  std::vector<uint32_t> seen;
  if (first.size() != warm.size()) return out;
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (first[i].pipeline_id != warm[i].pipeline_id) return {};
    if (std::find(seen.begin(), seen.end(), first[i].pipeline_id) != seen.end()) continue;
    seen.push_back(first[i].pipeline_id);
    const auto built = std::find_if(builds.begin(), builds.end(),
                                    [&](const PipelineBuild& b) { return b.pipeline_id == first[i].pipeline_id; });
    out.push_back({first[i].pipeline, built == builds.end() ? 0.0 : built->ms, first[i].ms, warm[i].ms});
  }
  return out;
}

}  // namespace

void time_runs(Context& context, const BenchOptions& o, const RunTimer& timer, BenchResult& result) {
  // The first run builds the call's pipelines (and, on lavapipe, JIT-compiles them at their first
  // dispatch): its host time is reported apart. It is the first warm-up, or with --warmup 0 the
  // first timed run. Where it built pipelines, the run after it is profiled too, dispatch by
  // dispatch, so that each pipeline's first dispatch can be set against a warm one; that run is the
  // second warm-up (the probe run without counts), or with --warmup 0 or 1 one more run.
  const std::size_t pipelines_before = context.pipeline_count();
  std::optional<DispatchProfile> profile;
  if (context.device_info().timestamps) profile.emplace(context);
  const auto first_start = std::chrono::steady_clock::now();
  const double first_gpu_ms = timer(0, 1).at(0);
  result.first_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_start).count();
  result.first_run_pipelines = static_cast<int>(context.pipeline_count() - pipelines_before);
  std::optional<double> second_gpu_ms;
  if (profile && result.first_run_pipelines > 0) {
    const std::vector<DispatchTime> first = profile->collect();
    second_gpu_ms = timer(0, 1).at(0);
    result.first_dispatches = first_dispatches(first, profile->collect(), profile->builds());
  }
  profile.reset();

  std::vector<double> ms;
  if (o.counts_given) {
    const int warmups_done = 1 + (second_gpu_ms ? 1 : 0);
    if (o.warmup >= warmups_done) {
      ms = timer(o.warmup - warmups_done, o.iters);
    } else {
      // --warmup 0: the first run is timed (and the profiled one after it, when there was one);
      // --warmup 1 with a profiled run: that run is timed.
      if (o.warmup == 0) ms.push_back(first_gpu_ms);
      if (second_gpu_ms && static_cast<int>(ms.size()) < o.iters) ms.push_back(*second_gpu_ms);
      if (o.iters > static_cast<int>(ms.size())) {
        const std::vector<double> rest = timer(0, o.iters - static_cast<int>(ms.size()));
        ms.insert(ms.end(), rest.begin(), rest.end());
      }
    }
  } else {
    // One probe run (a warm-up after the first run, whose time is mostly building the pipelines)
    // says how long a run takes; then as many warm-ups and timed runs as the defaults ask for, fewer
    // where they would exceed the budget. The first run and the probe count as two of the warm-ups.
    // A 2-core lavapipe needs seconds per run on the default problem; a GPU gets the full counts.
    const double probe_ms = std::max(second_gpu_ms ? *second_gpu_ms : timer(0, 1).at(0), 1e-3);
    const double budget_ms = o.budget_s * 1e3;
    const int warmup = std::clamp(static_cast<int>(0.2 * budget_ms / probe_ms), 0, std::max(o.warmup - 2, 0));
    const int iters = std::clamp(static_cast<int>(budget_ms / probe_ms), 1, o.iters);
    ms = timer(warmup, iters);
  }
  if (ms.empty()) throw Error("bench: the timer returned no timings");
  result.iters = static_cast<int>(ms.size());
  result.ms_median = median(ms);
  result.ms_min = *std::min_element(ms.begin(), ms.end());
}

AttentionLayouts bench_layouts(const BenchShape& shape, DType dtype) {
  AttentionLayouts layouts;
  layouts.q = TensorLayout::bhsd(dtype, shape.batch, shape.heads, shape.seq_q, shape.dim_qk);
  if (shape.kv_bshd) {
    layouts.k = TensorLayout::bshd(dtype, shape.batch, shape.seq_k, shape.kv_heads, shape.dim_qk);
    layouts.v = TensorLayout::bshd(dtype, shape.batch, shape.seq_k, shape.kv_heads, shape.dim_v);
  } else {
    layouts.k = TensorLayout::bhsd(dtype, shape.batch, shape.kv_heads, shape.seq_k, shape.dim_qk);
    layouts.v = TensorLayout::bhsd(dtype, shape.batch, shape.kv_heads, shape.seq_k, shape.dim_v);
  }
  layouts.out = TensorLayout::bhsd(dtype, shape.batch, shape.heads, shape.seq_q, shape.dim_v);
  apply_shape_options(shape, layouts);
  layouts.has_kv_lengths = !shape.kv_lengths.empty();
  layouts.kv_quant = shape.kv_quant;
  return layouts;
}

}  // namespace vkattn::cli
