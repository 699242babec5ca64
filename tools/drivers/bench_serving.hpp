// What `vkattn bench --paged` (bench_paged.cpp) and `--varlen` (bench_varlen.cpp) share once their
// call's spec and values are made: the device buffers (rotated sets of Q, K, V and O; the source's
// two int32 arrays and the modifiers' values, shared), the one PreparedAttention of the spec, planned
// inside the first timed run whatever its key/value source, the figures, and the output of set 0
// handed to the source's own check.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "bench_check.hpp"
#include "bench_common.hpp"
#include "bench_copy.hpp"
#include "bench_result.hpp"
#include "bench_timing.hpp"
#include "run_call.hpp"
#include <variant>

#include "vkattn/attention_spec.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn::cli {

// One set of device tensors; several are rotated through so the inputs are not cache-resident.
struct ServingSet {
  Buffer q, k, v, out;
};

// The values a serving bench uploads: Q, K and V (K and V as q8_0 blocks when those are given), the
// two int32 arrays, and the sizes the figures count.
struct ServingValues {
  const std::vector<float>&q, &k, &v;
  const std::vector<uint8_t>&k_blocks, &v_blocks;  // empty: K and V in the dtype
  const std::vector<int32_t>&ints_a, &ints_b;
  uint64_t q_bytes, k_bytes, v_bytes, out_bytes;
  int64_t out_elements;
  bool v_is_k = false;  // V a view of K's rows: K's buffer bound as V too (v, v_blocks and v_bytes unused)
};

// Uploads `values`, times a PreparedAttention of `spec` recorded over the rotated sets, and fills
// `result`'s timing, plan, memory and throughput figures (`flops`: the work the call is credited
// with); with --check, `check` gets set 0's output decoded to f32 with the per-head tensors' values
// and returns the comparison.
inline void run_serving_bench(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype,
                              const AttentionSpec& spec, const ServingValues& values, double flops,
                              const std::function<CheckResult(std::span<const float> out, const PerHeadValues& per_head)>& check,
                              BenchResult& result) {
  // The peak is measured from here, as for a dense shape (cmd_bench.cpp).
  context.release_scratch();
  context.reset_peak_memory();
  const uint64_t baseline = context.memory_stats().current_bytes;
  const PerHeadInputs per_head = PerHeadInputs::fixed(shape.per_head, shape.heads);
  PerHead<std::optional<Buffer>> per_head_storage;
  const PerHead<const Buffer*> per_head_buffers = per_head.upload(context, per_head_storage);
  const uint64_t ints_bytes = (values.ints_a.size() + values.ints_b.size()) * 4;
  const Buffer ints_a = upload_bytes(context, values.ints_a.data(), values.ints_a.size() * 4);
  const Buffer ints_b = upload_bytes(context, values.ints_b.data(), values.ints_b.size() * 4);

  // Rotated sets as the dense bench's, counted from the bytes a call touches (the K/V it reads).
  result.kv_bytes = kv_read_bytes(shape, dtype);
  const double touched_bytes = static_cast<double>(values.q_bytes + values.out_bytes + result.kv_bytes);
  std::vector<ServingSet> sets;
  result.rotated_input_bytes = make_rotated_sets(context, rotation_count(touched_bytes), sets, [&] {
    return ServingSet{upload(context, dtype, values.q), upload_kv(context, dtype, values.k, values.k_blocks),
                      values.v_is_k ? Buffer::allocate(context, 16) : upload_kv(context, dtype, values.v, values.v_blocks),
                      Buffer::allocate(context, std::max<uint64_t>(values.out_bytes, 16))};
  });
  result.rotations = static_cast<int>(sets.size());
  std::vector<AttentionBuffers> buffers(sets.size());
  for (std::size_t r = 0; r < sets.size(); ++r) {
    AttentionBuffers& b = buffers[r];
    b.q = &sets[r].q, b.k = &sets[r].k, b.v = values.v_is_k ? &sets[r].k : &sets[r].v, b.out = &sets[r].out;
    bind_source_ints(spec, ints_a, ints_b, b);
    b.per_head() = per_head_buffers;
  }
  // Poisoned outputs: the check reads set 0's output from the timed runs.
  if (o.check)
    for (ServingSet& set : sets) set.out.fill(0xFF);

  // Planned (and its pipelines built) inside the first run, as time_attention plans a dense call.
  std::optional<PreparedAttention> prepared;
  std::optional<Buffer> workspace;
  const RunTimer timer = [&](int warmup, int iters) {
    if (!prepared) {
      prepared.emplace(context, spec);
      if (prepared->workspace_bytes() > 0) workspace.emplace(Buffer::allocate(context, prepared->workspace_bytes()));
    }
    const BufferSlice slice{workspace ? &*workspace : nullptr, 0};
    return time_recorded(
        context, [&](VkCommandBuffer cmd, int run) { prepared->record(cmd, buffers[static_cast<std::size_t>(run) % buffers.size()], slice); },
        warmup, iters);
  };
  time_runs(context, o, timer, result);
  result.plan = prepared->plan();
  result.device_bytes =
      values.q_bytes + values.k_bytes + (values.v_is_k ? 0 : values.v_bytes) + values.out_bytes + ints_bytes +
      prepared->workspace_bytes();
  result.peak_device_bytes = context.memory_stats().peak_bytes - baseline - result.rotated_input_bytes;
  const double seconds = result.ms_median * 1e-3;
  result.tflops = seconds > 0 ? flops / seconds * 1e-12 : 0.0;
  result.gbps = seconds > 0 ? touched_bytes / seconds * 1e-9 : 0.0;
  if (o.copy) result.copy = time_copies(context, result.kv_bytes, std::max(o.warmup, 1), result.iters);

  if (o.check) {
    std::vector<std::byte> raw(values.out_bytes);
    if (values.out_bytes) sets[0].out.download(raw.data(), values.out_bytes);
    std::vector<float> out(static_cast<std::size_t>(values.out_elements));
    decode(dtype, raw.data(), out.data(), out.size());
    result.check = check(out, per_head.reference());
  }
}

}  // namespace vkattn::cli
