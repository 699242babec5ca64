#include "bench_varlen.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_copy.hpp"
#include "bench_metrics.hpp"
#include "bench_timing.hpp"
#include "conform/q8_0_blocks.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/q8_0.hpp"
#include "vkattn/varlen.hpp"
#include "vkattn/varlen_attention.hpp"

namespace vkattn::cli {
namespace {

// One set of device tensors; several are rotated through so the inputs are not cache-resident. The
// offsets are shared (a few bytes).
struct VarlenSet {
  Buffer q, k, v, out;
};

// cu_seqlens of `lengths`: batch + 1 offsets from 0. Throws Error past int32.
std::vector<int32_t> offsets(const std::vector<int64_t>& lengths, const char* what) {
  std::vector<int32_t> cu{0};
  int64_t total = 0;
  for (const int64_t len : lengths) {
    total += len;
    if (total > std::numeric_limits<int32_t>::max())
      throw Error(std::string("--varlen: the sequences' ") + what + " add up to " + std::to_string(total) +
                  ", more than int32 cu_seqlens hold");
    cu.push_back(static_cast<int32_t>(total));
  }
  return cu;
}

}  // namespace

void draw_varlen_lengths(BenchShape& shape, const std::vector<int64_t>& lengths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (lengths.empty()) {
    std::uniform_int_distribution<int64_t> keys(1, shape.seq_k);
    shape.kv_lengths.resize(static_cast<std::size_t>(shape.batch));
    for (int64_t& len : shape.kv_lengths) len = keys(rng);
  } else {
    shape.kv_lengths = lengths;
    shape.batch = static_cast<int64_t>(lengths.size());
  }
  std::uniform_int_distribution<int64_t> queries(1, std::max<int64_t>(shape.seq_q, 1));
  shape.q_lengths.resize(static_cast<std::size_t>(shape.batch));
  for (int64_t& len : shape.q_lengths) len = shape.seq_q == 1 ? 1 : queries(rng);
  shape.seq_q = *std::max_element(shape.q_lengths.begin(), shape.q_lengths.end());
  shape.seq_k = std::max<int64_t>(1, *std::max_element(shape.kv_lengths.begin(), shape.kv_lengths.end()));
}

BenchResult bench_varlen(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype) {
  const std::vector<int32_t> cu_q = offsets(shape.q_lengths, "queries");
  const std::vector<int32_t> cu_k = offsets(shape.kv_lengths, "keys");
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  if (total_k == 0) throw Error("--varlen: no sequence has a key (packed K and V need a row or more)");

  VarlenAttentionLayouts layouts;
  layouts.q = packed_layout(dtype, total_q, shape.heads, shape.dim_qk);
  layouts.k = packed_layout(dtype, total_k, shape.kv_heads, shape.dim_qk);
  layouts.v = packed_layout(dtype, total_k, shape.kv_heads, shape.dim_v);
  layouts.out = packed_layout(dtype, total_q, shape.heads, shape.dim_v);
  layouts.kv_quant = shape.kv_quant;
  layouts.batch = shape.batch;
  layouts.max_seqlen_q = shape.seq_q;
  layouts.max_seqlen_k = *std::max_element(shape.kv_lengths.begin(), shape.kv_lengths.end());
  layouts.options.causal = shape.causal;
  layouts.options.window = shape.window;
  layouts.options.align = shape.align;
  layouts.options.softcap = shape.softcap;
  layouts.options.num_splits = shape.num_splits;
  layouts.path = shape.path;  // --path unfused: the three-stage path (its scores in the workspace)
  if (shape.alibi) layouts.alibi = HeadValuesLayout{1, shape.heads, 0};
  if (shape.sinks) layouts.sinks = HeadValuesLayout{1, shape.heads, 0};
  BenchResult result;
  result.shape = shape;
  result.dtype = dtype;
  const VarlenProblem problem = check_varlen_attention(layouts);  // before generating the values
  check_varlen_values(layouts, cu_q, cu_k);
  const uint64_t esize = dtype_size(dtype);
  const auto kv_bytes_of = [&](const TensorLayout& l) {
    const uint64_t elements = static_cast<uint64_t>(l.element_count());
    if (shape.kv_quant == KvQuant::q8_0) return elements / kQ8_0BlockElements * kQ8_0BlockBytes;
    return elements * esize;
  };
  const uint64_t q_bytes = static_cast<uint64_t>(layouts.q.element_count()) * esize;
  const uint64_t out_bytes = static_cast<uint64_t>(layouts.out.element_count()) * esize;
  const uint64_t k_bytes = kv_bytes_of(layouts.k), v_bytes = kv_bytes_of(layouts.v);
  const uint64_t cu_bytes = static_cast<uint64_t>(shape.batch + 1) * 4;
  check_shape_fits(o, context.device_info(), {q_bytes, k_bytes, v_bytes, out_bytes, cu_bytes, cu_bytes});

  std::mt19937_64 rng(o.seed);
  const std::vector<float> q = random_values(static_cast<std::size_t>(layouts.q.element_count()), dtype, rng);
  std::vector<float> k = random_values(static_cast<std::size_t>(layouts.k.element_count()), dtype, rng);
  std::vector<float> v = random_values(static_cast<std::size_t>(layouts.v.element_count()), dtype, rng);
  // --kv-dtype q8_0: K and V uploaded as blocks; k and v become the values the blocks hold.
  std::vector<uint8_t> k_blocks, v_blocks;
  if (shape.kv_quant == KvQuant::q8_0) k_blocks = conform::to_q8_0_blocks(k), v_blocks = conform::to_q8_0_blocks(v);

  // The peak is measured from here, as for a dense shape (cmd_bench.cpp).
  context.release_scratch();
  context.reset_peak_memory();
  const uint64_t baseline = context.memory_stats().current_bytes;
  const std::vector<float> slopes = shape.alibi ? alibi_slopes(shape.heads) : std::vector<float>{};
  const std::vector<float> sinks = shape.sinks ? sink_logits(shape.heads) : std::vector<float>{};
  std::optional<Buffer> slopes_buffer, sinks_buffer;
  if (shape.alibi) slopes_buffer.emplace(upload(context, DType::f32, slopes));
  if (shape.sinks) sinks_buffer.emplace(upload(context, DType::f32, sinks));
  const Buffer cu_q_buffer = upload_bytes(context, cu_q.data(), cu_bytes);
  const Buffer cu_k_buffer = upload_bytes(context, cu_k.data(), cu_bytes);

  // Rotated sets as the dense bench's, counted from the bytes a call touches (every K/V row is read).
  result.kv_bytes = kv_read_bytes(shape, dtype);
  const double touched_bytes = static_cast<double>(q_bytes + out_bytes + result.kv_bytes);
  const int wanted = rotation_count(touched_bytes);
  std::vector<VarlenSet> sets;
  result.rotated_input_bytes = make_rotated_sets(context, wanted, sets, [&] {
    return VarlenSet{upload(context, dtype, q), upload_kv(context, dtype, k, k_blocks), upload_kv(context, dtype, v, v_blocks),
                     Buffer::allocate(context, std::max<uint64_t>(out_bytes, 16))};
  });
  result.rotations = static_cast<int>(sets.size());
  std::vector<VarlenAttentionBuffers> buffers(sets.size());
  for (std::size_t r = 0; r < sets.size(); ++r) {
    VarlenAttentionBuffers& b = buffers[r];
    b.q = &sets[r].q;
    b.k = &sets[r].k;
    b.v = &sets[r].v;
    b.out = &sets[r].out;
    b.cu_seqlens_q = {&cu_q_buffer, 0};
    b.cu_seqlens_k = {&cu_k_buffer, 0};
    if (slopes_buffer) b.alibi = &*slopes_buffer;
    if (sinks_buffer) b.sinks = &*sinks_buffer;
  }
  // Poisoned outputs: the check reads set 0's output from the timed runs.
  if (o.check)
    for (VarlenSet& set : sets) set.out.fill(0xFF);

  // Planned (and its pipelines built) inside the first run, as time_attention plans a dense call.
  std::optional<PreparedVarlenAttention> prepared;
  std::optional<Buffer> workspace;
  const RunTimer timer = [&](int warmup, int iters) {
    if (!prepared) {
      prepared.emplace(context, layouts);
      if (prepared->workspace_bytes() > 0) workspace.emplace(Buffer::allocate(context, prepared->workspace_bytes()));
    }
    const BufferSlice slice{workspace ? &*workspace : nullptr, 0};
    return time_recorded(
        context, [&](VkCommandBuffer cmd, int run) { prepared->record(cmd, buffers[static_cast<std::size_t>(run) % buffers.size()], slice); },
        warmup, iters);
  };
  time_runs(context, o, timer, result);
  result.plan = prepared->plan();
  result.device_bytes = q_bytes + k_bytes + v_bytes + out_bytes + 2 * cu_bytes + prepared->workspace_bytes();
  result.peak_device_bytes = context.memory_stats().peak_bytes - baseline - result.rotated_input_bytes;
  const double seconds = result.ms_median * 1e-3;
  result.tflops =
      seconds > 0 ? credited_flops(problem.attention, shape.q_lengths, shape.kv_lengths) / seconds * 1e-12 : 0.0;
  result.gbps = seconds > 0 ? touched_bytes / seconds * 1e-9 : 0.0;
  if (o.copy) result.copy = time_copies(context, result.kv_bytes, std::max(o.warmup, 1), result.iters);

  if (o.check) {
    std::vector<std::byte> raw(out_bytes);
    if (out_bytes) sets[0].out.download(raw.data(), out_bytes);
    std::vector<float> out(static_cast<std::size_t>(layouts.out.element_count()));
    decode(dtype, raw.data(), out.data(), out.size());
    // (q8_0: the reference reads the values the blocks hold, k and v.)
    VarlenAttentionLayouts as_values = layouts;
    as_values.kv_quant = KvQuant::none;
    VarlenCheckInputs in;
    in.layouts = &as_values;
    in.q = q;
    in.k = k;
    in.v = v;
    in.cu_seqlens_q = cu_q;
    in.cu_seqlens_k = cu_k;
    in.alibi = slopes;
    in.sinks = sinks;
    result.check = check_varlen_against_reference(in, out);
  }
  return result;
}

}  // namespace vkattn::cli
