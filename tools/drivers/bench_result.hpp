// One row of `vkattn bench`: the shape it was asked to time and what it measured, or why it was
// skipped. Shared by the measuring (cmd_bench.cpp), the presets and fits (bench_sweep) and the
// writers (bench_output).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_copy.hpp"
#include "host_time.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// One pipeline's first dispatch in a shape's first run, and the same dispatch warm (milliseconds).
struct PipelineFirstDispatch {
  std::string pipeline;  // DispatchTime::pipeline
  double build_ms = 0;   // host time building it (PipelineBuild); 0 when it existed already
  double first_ms = 0, warm_ms = 0;
};

// Fully resolved: kv_heads and dim_v are never 0 here.
struct BenchShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, dim_qk = 64, dim_v = 64;
  // --causal, the modifier options and --splits (the same for every shape of a run but causal, which
  // sweeps vary).
  AttentionOptions options;
  // automatic and fused: the fused kernels, no weights. unfused: the three-stage path writing the
  // weights P (that is what one takes it for), so its time and memory include materialising them.
  AttentionPath path = AttentionPath::automatic;
  // The per-head tensors (the same for every shape of a run): each flag given gives every head a fixed
  // value (per_head_options.hpp).
  PerHead<bool> per_head;
  // --lengths: the keys of each batch entry (seq_k is then their maximum); empty: seq_k each.
  std::vector<int64_t> kv_lengths;
  // --paged: K and V in a paged cache of pages of this many tokens (vkattn/kv_cache.hpp); 0: dense.
  int64_t page_size = 0;
  PageOrder page_order = PageOrder::nhd;  // --page-order
  bool v_views_k = false;                 // --v-view: one cache, V the first dim_v columns of K's rows
  // --shared-prefix: tokens every sequence's table starts with (the same pages), read once for the
  // batch (cascade) unless --no-cascade.
  int64_t shared_prefix = 0;
  bool cascade = true;
  // --kv-layout bshd: dense K and V laid out (batch, seq, kv_heads, dim) (PyTorch's, a head's rows
  // kv_heads * dim elements apart) instead of (batch, kv_heads, seq, dim).
  bool kv_bshd = false;
  // --kv-dtype q8_0: K and V (dense, paged or varlen) stored as q8_0 blocks.
  KvQuant kv_quant = KvQuant::none;
  // --varlen: one packed variable-length call (vkattn/varlen.hpp) of `batch` sequences, sequence b
  // with q_lengths[b] queries and kv_lengths[b] keys (drawn, or --lengths); seq_q and seq_k are the
  // longest (max_seqlen_q and max_seqlen_k).
  bool varlen = false;
  std::vector<int64_t> q_lengths;
};

// "dense", "dense bshd", "paged 16", "paged 16 hnd" or "varlen" (then " v-view" for V a view of K's
// rows, " shared N" for a prefix of N tokens every sequence's table starts with and " cascade" when
// the call reads it once, " q8_0" for q8_0 K/V): the K/V layout a result was measured with.
inline std::string layout_name(const BenchShape& shape) {
  const std::string kv = shape.kv_quant == KvQuant::q8_0 ? " q8_0" : "";
  if (shape.varlen) return "varlen" + kv;
  if (shape.page_size == 0) return (shape.kv_bshd ? "dense bshd" : "dense") + kv;
  const std::string shared =
      shape.shared_prefix > 0 ? " shared " + std::to_string(shape.shared_prefix) + (shape.cascade ? " cascade" : "") : "";
  return "paged " + std::to_string(shape.page_size) + (shape.page_order == PageOrder::hnd ? " hnd" : "") +
         (shape.v_views_k ? " v-view" : "") + shared + kv;
}

// The shape's options and per-head tensors onto the layouts of any source (dense, paged, packed).
template <class Layouts>
void apply_shape_options(const BenchShape& shape, Layouts& layouts) {
  layouts.options = shape.options;
  for (PerHeadTensor t : kPerHeadTensors)
    if (shape.per_head[t]) layouts[t] = HeadValuesLayout{1, shape.heads, 0};
}

struct BenchResult {
  BenchShape shape;
  DType dtype = DType::f32;
  // A shape the device cannot run (memory, limits) in a sweep: not measured; `reason` says why.
  bool skipped = false;
  std::string reason;

  AttentionPlan plan;
  bool weights = false;       // P (B,H,Sq,Sk) f32 was written
  bool backward = false;      // --backward: the backward pass timed (FLOPs credited 2.5x the forward's)
  uint64_t device_bytes = 0;  // computed: Q, K, V, O, P (when written) and the planned workspace
  // Measured (Context::memory_stats): the most device memory the shape had allocated at once — one
  // set of Q, K, V, O, P when written, and the scratch the call used — less the extra input sets
  // rotated through to defeat the cache, which are `rotated_input_bytes` (also measured).
  uint64_t peak_device_bytes = 0;
  uint64_t rotated_input_bytes = 0;
  int rotations = 1;
  int iters = 0;
  double ms_median = 0, ms_min = 0, tflops = 0, gbps = 0;
  // The shape's first run, timed on the host from building its plan's pipelines to the end of the
  // run: on lavapipe the pipelines JIT-compile at that first dispatch, unless Mesa's shader cache
  // already holds them. first_run_pipelines: how many pipelines it built (0: all existed already).
  double first_run_ms = 0;
  int first_run_pipelines = 0;
  // When the first run built pipelines: each pipeline of the call, the host time building it, its
  // first dispatch in that run and the same dispatch in the run after it (GPU time, DispatchProfile).
  // On lavapipe build + first - warm is that pipeline's translation and JIT compile. Empty when no
  // pipeline was built or without timestamps.
  std::vector<PipelineFirstDispatch> first_dispatches;
  std::optional<CheckResult> check;
  // --host-time: host microseconds per call of recording the call into a command buffer: through
  // record_attention, which plans on every call, and through a PreparedAttention made once.
  std::optional<HostTime> host_record, host_prepared;
  // Bytes of K and V the call reads (kv_read_bytes: each sequence's keys only), reported as GB/s over
  // the median time; --copy: copies of as many bytes timed in the same run.
  uint64_t kv_bytes = 0;
  std::optional<CopyTiming> copy;
};

}  // namespace vkattn::cli
