// What the measurements of `vkattn bench` share: the options, the random inputs, the memory checks
// before a shape is allocated, the rule that decides how many runs are timed, and the bytes and
// FLOPs each result is credited with. The dense call is measured in cmd_bench.cpp, the paged one
// (--paged) in bench_paged.cpp, the packed variable-length one (--varlen) in bench_varlen.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_result.hpp"
#include "modifier_options.hpp"
#include "per_head_options.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::cli {

struct BenchOptions {
  int64_t batch = 1, heads = 8, kv_heads = 0;  // 0: kv_heads = heads
  std::vector<int64_t> seq_q = {1024}, seq_k;  // lists: one result per (seq_q, seq_k) pair
  int64_t dim = 64, dim_v = 0;                 // 0: dim_v = dim
  std::string dtype = "f32", causal = "none", device, kernel = "auto";
  std::string path = "auto";
  std::string sweep;        // "": the shapes above
  int64_t max_seq = 0;      // 0: the preset's every sequence length
  int64_t max_memory_mib = 0;  // 0: the device's largest memory heap
  int warmup = 3, iters = 10;
  bool counts_given = false;  // --warmup or --iters on the command line without --budget: honoured exactly
  bool dtype_given = false;
  bool batch_given = false;   // --batch on the command line (else --lengths sets the batch)
  std::string shape_option_given;  // the first of --seq-q, --batch, ... given, for the --sweep error
  double budget_s = 5.0;      // otherwise: GPU seconds the timed runs may take
  uint64_t seed = 1;
  bool check = false, json = false, csv = false;
  bool host_time = false;
  bool copy = false;  // --copy: time copies of the call's K/V bytes too (bench_copy.hpp)
  AttentionOptions modifiers;        // the modifier options as parsed (modifier_options.hpp)
  PerHead<bool> per_head;             // the per-head tensors' flags (per_head_options.hpp)
  int64_t page_size = 0;              // --paged: K/V in a paged cache of this many tokens a page; 0: dense
  std::string page_order;             // --page-order: "" (nhd), "nhd" or "hnd" 
  bool v_view = false;                // --v-view: V as the first dim-v columns of K's rows (one cache)
  int64_t shared_prefix = 0;          // --shared-prefix TOKENS: every sequence's first pages the same
  bool no_cascade = false;            // --no-cascade: a shared prefix read per sequence
  std::string kv_layout;              // --kv-layout: "" (bhsd), "bhsd" or "bshd" (dense K and V)
  std::string kv_dtype;               // --kv-dtype: "" (the compute dtype) or "q8_0"
  std::vector<int64_t> lengths;       // --lengths: keys of each sequence; empty: seq_k each
  bool varlen = false;                // --varlen: one packed variable-length call (bench_varlen.hpp)
  uint32_t num_splits = 0;            // --splits: split-KV parts requested (0: the planner's choice)
  bool backward = false;              // --backward: time the backward pass (bench_backward.hpp)
};

// A shape the device cannot hold (memory, buffer limits): a sweep records it as skipped and goes on.
class ShapeSkipped : public Error {
 public:
  using Error::Error;
};

// Random values already rounded to the dtype: exactly what the GPU will see, so the reference can be
// fed the same numbers.
std::vector<float> random_values(std::size_t count, DType dtype, std::mt19937_64& rng);
// Dense K or V (B, G, S, D) with per-sequence key counts (--lengths): random values for sequence b's
// first kv_lengths[b] keys and NaN past them, which the call must never read. Drawing only the
// visible keys keeps a batch of one long and many short sequences from drawing (and --check from
// reading) the whole padded tensor: 8 x 32768 keys at GQA 8 x d128 took 25 s here before.
std::vector<float> random_key_values(const TensorLayout& layout, const std::vector<int32_t>& kv_lengths, DType dtype,
                                     std::mt19937_64& rng);

// `values` encoded in `dtype` in a new device buffer (at least 16 bytes).
Buffer upload(Context& context, DType dtype, const std::vector<float>& values);
Buffer upload_bytes(Context& context, const void* data, std::size_t bytes);
// K or V: its q8_0 blocks as they are when there are any (--kv-dtype q8_0), else `values` in `dtype`.
Buffer upload_kv(Context& context, DType dtype, const std::vector<float>& values, const std::vector<uint8_t>& blocks);

std::string mib_text(uint64_t bytes);

// Before anything is allocated: the buffers of one call (one input set, O, P when written) against
// --max-memory, the device's largest heap and its per-buffer limits; the library would refuse the
// last two as well, but the bench says which shape and why, and skips it in a sweep. The workspace
// is not known before the buffers exist: a failure to allocate it surfaces as out-of-memory.
void check_shape_fits(const BenchOptions& o, const DeviceInfo& device, const std::vector<uint64_t>& buffers);

// A dense shape's layouts in `dtype` (BHSD, or BSHD K and V with --kv-layout bshd), its options and
// per-head tensors applied.
AttentionLayouts bench_layouts(const BenchShape& shape, DType dtype);

// The keys of each sequence of `shape`: its kv_lengths, or seq_k for every batch entry.
std::vector<int64_t> sequence_lengths(const BenchShape& shape);

// Bytes of K and V the call reads: each sequence's keys x kv_heads x (dim_qk + dim_v) x the element
// size, or q8_0's 34 bytes per 32 elements (the whole of K and V for a dense call without --lengths).
uint64_t kv_read_bytes(const BenchShape& shape, DType dtype);


// FLOPs credited to a call: 2 (dim_qk + dim_v) per visible (query, key) pair, counted per sequence.
// Dense: `problem` is the call's, and a sequence of len_b keys sees its first len_b keys of seq_k
// (kv_lengths). Paged (`per_sequence`): each sequence is a problem of its own with seq_k = len_b
// (its causal diagonal and window follow its own length).
double credited_flops(const AttentionProblem& problem, const std::vector<int64_t>& lengths, bool per_sequence);

// Varlen: sequence b a problem of its own with q_lengths[b] queries and kv_lengths[b] keys (its
// causal diagonal and window follow both); `problem` gives the heads, dims and options.
double credited_flops(const AttentionProblem& problem, const std::vector<int64_t>& q_lengths,
                      const std::vector<int64_t>& kv_lengths);

// The GPU milliseconds of `iters` timed runs after `warmup` untimed ones of one call, each in its own
// submission between timestamps.
using RunTimer = std::function<std::vector<double>(int warmup, int iters)>;

// Times a shape with `timer`: its first run apart (host time, pipelines it built), then as many
// warm-ups and timed runs as the counts or the budget of `o` give. Fills first_run_ms,
// first_run_pipelines, iters, ms_median and ms_min of `result`.
void time_runs(Context& context, const BenchOptions& o, const RunTimer& timer, BenchResult& result);


// The rotated input sets of a bench shape: up to `wanted` sets made by make_set(), the same values in
// each (only the addresses differ, to defeat the cache). A set the device has no memory for ends the
// rotation there; the first one must fit. Returns the bytes the sets after the first hold (counted
// apart: a caller running the shape once needs only one).
template <typename Set, typename MakeSet>
uint64_t make_rotated_sets(Context& context, int wanted, std::vector<Set>& sets, MakeSet make_set) {
  sets.reserve(static_cast<std::size_t>(wanted));
  uint64_t after_first_set = 0;
  for (int r = 0; r < wanted; ++r) {
    try {
      sets.push_back(make_set());
    } catch (const Error&) {
      if (r == 0) throw;
      break;
    }
    if (r == 0) after_first_set = context.memory_stats().current_bytes;
  }
  return context.memory_stats().current_bytes - after_first_set;
}

}  // namespace vkattn::cli
