// `vkattn bench`: GPU-timestamp timing of the attention kernels on random inputs, with an optional
// check against the fp64 reference. Every figure is printed with the device, driver and library
// version it was measured with (docs/command-line.md, "vkattn bench"). The shapes come from the command line or from a
// preset (`--sweep`, bench_sweep.hpp); the writers are in bench_output.hpp.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_backward.hpp"
#include "bench_check.hpp"
#include "bench_common.hpp"
#include "conform/q8_0_blocks.hpp"
#include "bench_metrics.hpp"
#include "bench_options.hpp"
#include "bench_output.hpp"
#include "host_cpu.hpp"
#include "bench_paged.hpp"
#include "bench_progress.hpp"
#include "bench_result.hpp"
#include "bench_sweep.hpp"
#include "bench_varlen.hpp"
#include "cli_numbers.hpp"
#include "commands.hpp"
#include "modifier_options.hpp"
#include "usage_error.hpp"
#include "window_option.hpp"
#include "host_time.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/q8_0.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/timer.hpp"
#include "weights_budget.hpp"

namespace vkattn::cli {
namespace {

// --host-time: rounds of calls recorded into one command buffer (median and minimum per call reported).
constexpr int kHostTimeRounds = 9, kHostTimeCalls = 200;

// One set of device tensors; several are rotated through so the inputs are not cache-resident.
struct TensorSet {
  Buffer q, k, v, out;
};

// The run's modifiers onto a shape (every shape of a run, sweeps included, gets the same).
void apply_modifiers(const BenchOptions& o, BenchShape& s) {
  apply_modifier_options(o.modifiers, s.options);
  s.options.num_splits = o.num_splits;
  s.per_head = o.per_head;
}

std::vector<BenchShape> explicit_shapes(const BenchOptions& o) {
  // --lengths: seq_k is the longest sequence's (at least 1: a dense K holds a key or more).
  const std::vector<int64_t> longest = {
      o.lengths.empty() ? 0 : std::max<int64_t>(1, *std::max_element(o.lengths.begin(), o.lengths.end()))};
  const std::vector<int64_t>& sk = !o.lengths.empty() ? longest : o.seq_k.empty() ? o.seq_q : o.seq_k;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (o.seq_q.size() == sk.size()) {
    for (std::size_t i = 0; i < sk.size(); ++i) pairs.emplace_back(o.seq_q[i], sk[i]);
  } else if (o.seq_q.size() == 1) {
    for (int64_t s : sk) pairs.emplace_back(o.seq_q[0], s);
  } else if (sk.size() == 1) {
    for (int64_t s : o.seq_q) pairs.emplace_back(s, sk[0]);
  } else {
    throw UsageError("--seq-q and --seq-k list " + std::to_string(o.seq_q.size()) + " and " + std::to_string(sk.size()) +
                " values; give one of them a single value or both the same count");
  }
  std::vector<BenchShape> shapes;
  for (const auto& [seq_q, seq_k] : pairs) {
    BenchShape s;
    s.batch = o.lengths.empty() || o.batch_given ? o.batch : static_cast<int64_t>(o.lengths.size());
    s.heads = o.heads;
    s.kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads;
    s.seq_q = seq_q;
    s.seq_k = seq_k;
    s.dim_qk = o.dim;
    s.dim_v = o.dim_v > 0 ? o.dim_v : o.dim;
    s.options.causal = parse_causal(o.causal);
    s.path = parse_attention_path(o.path);
    s.kv_lengths = o.lengths;
    s.page_size = o.page_size;
    s.page_order = o.page_order == "hnd" ? PageOrder::hnd : PageOrder::nhd;
    s.v_views_k = o.v_view;
    s.shared_prefix = o.shared_prefix;
    s.cascade = !o.no_cascade;
    s.kv_bshd = o.kv_layout == "bshd";
    s.kv_quant = o.kv_dtype == "q8_0" ? KvQuant::q8_0 : KvQuant::none;
    if (o.varlen) {  // the sequences' lengths, drawn or --lengths (kv_lengths then means each one's keys)
      s.varlen = true;
      s.kv_lengths.clear();
      draw_varlen_lengths(s, o.lengths, o.seed);
    }
    apply_modifiers(o, s);
    shapes.push_back(s);
  }
  return shapes;
}

// The bytes of a call's tensors: K and V as q8_0 blocks under --kv-dtype q8_0.
struct TensorBytes {
  uint64_t q = 0, k = 0, v = 0, out = 0, p = 0;
};

TensorBytes tensor_bytes(const AttentionLayouts& layouts, const AttentionProblem& problem, KvQuant kv_quant,
                         bool weights) {
  const auto bytes_of = [&](const TensorLayout& l, bool kv) {
    const uint64_t elements = static_cast<uint64_t>(l.element_count());
    if (kv && kv_quant == KvQuant::q8_0) return elements / kQ8_0BlockElements * kQ8_0BlockBytes;
    return elements * dtype_size(l.dtype);
  };
  TensorBytes b;
  b.q = bytes_of(layouts.q, false);
  b.k = bytes_of(layouts.k, true);
  b.v = bytes_of(layouts.v, true);
  b.out = bytes_of(layouts.out, false);
  b.p = weights ? weights_bytes(problem.batch, problem.heads, problem.seq_q, problem.seq_k) : 0;
  return b;
}

// Throws ShapeSkipped when the shape's P or its tensors do not fit the device (or --budget).
void check_fits(Context& context, const BenchOptions& o, const AttentionProblem& problem, bool weights,
                const TensorBytes& b) {
  if (weights) {
    try {
      // The message ends "drop <flags> to use the fused path": name what the user can drop.
      check_weights_fit(problem.batch, problem.heads, problem.seq_q, problem.seq_k, context.device_info(),
                        o.sweep.empty() ? "--path unfused" : "the unfused path");
    } catch (const Error& e) {
      throw ShapeSkipped(e.what());
    }
  }
  check_shape_fits(o, context.device_info(), {b.q, b.k, b.v, b.out, b.p});
}

// The shape's random inputs, drawn from --seed.
struct HostInputs {
  std::vector<int32_t> kv_lengths;
  std::vector<float> q, k, v;
  // --kv-dtype q8_0: K and V uploaded as blocks (a NaN row no sequence holds: blocks of NaN scale);
  // k and v become the values the blocks hold.
  std::vector<uint8_t> k_blocks, v_blocks;
};

HostInputs draw_inputs(const AttentionLayouts& layouts, const BenchShape& shape, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostInputs in;
  in.kv_lengths.assign(shape.kv_lengths.begin(), shape.kv_lengths.end());
  in.q = random_values(static_cast<std::size_t>(layouts.q.element_count()), dtype, rng);
  in.k = random_key_values(layouts.k, in.kv_lengths, dtype, rng);
  in.v = random_key_values(layouts.v, in.kv_lengths, dtype, rng);
  if (shape.kv_quant == KvQuant::q8_0)
    in.k_blocks = conform::to_q8_0_blocks(in.k), in.v_blocks = conform::to_q8_0_blocks(in.v);
  return in;
}

// What every rotated set shares: P, the modifiers' per-head values and the key lengths.
struct SharedBuffers {
  // One P for every rotated set: it is written, never read, and usually far larger than the cache
  // the rotation defeats, so copies would only multiply the memory the unfused path needs.
  std::optional<Buffer> weights;
  // The modifiers' per-head values, one copy for every rotated set (a few bytes).
  PerHeadInputs per_head;
  PerHead<std::optional<Buffer>> per_head_storage;
  PerHead<const Buffer*> per_head_buffers;
  // --lengths: kv_lengths (B) int32, one buffer for every rotated set (a few bytes).
  std::optional<Buffer> lengths_buffer;
};

SharedBuffers upload_shared(Context& context, const BenchShape& shape, bool weights, uint64_t p_bytes,
                            const std::vector<int32_t>& kv_lengths) {
  SharedBuffers sb;
  if (weights) sb.weights.emplace(Buffer::allocate(context, std::max<uint64_t>(p_bytes, 16)));
  sb.per_head = PerHeadInputs::fixed(shape.per_head, shape.heads);
  sb.per_head_buffers = sb.per_head.upload(context, sb.per_head_storage);
  if (!kv_lengths.empty()) sb.lengths_buffer.emplace(upload_bytes(context, kv_lengths.data(), kv_lengths.size() * 4));
  return sb;
}

// One call's arguments per rotated set.
std::vector<AttentionArgs> rotated_args(const AttentionLayouts& layouts, const BenchShape& shape,
                                        std::vector<TensorSet>& sets, SharedBuffers& shared) {
  std::vector<AttentionArgs> args(sets.size());
  for (std::size_t r = 0; r < sets.size(); ++r) {
    args[r].q = {&sets[r].q, layouts.q};
    args[r].k = {&sets[r].k, layouts.k};
    args[r].v = {&sets[r].v, layouts.v};
    args[r].kv_quant = shape.kv_quant;
    args[r].out = {&sets[r].out, layouts.out};
    args[r].options = layouts.options;
    args[r].path = shape.path;
    if (shared.weights) args[r].weights = {&*shared.weights, 0};
    for (PerHeadTensor t : kPerHeadTensors)
      if (shared.per_head_buffers[t]) args[r][t] = {shared.per_head_buffers[t], *layouts[t]};
    if (shared.lengths_buffer) args[r].kv_lengths = {&*shared.lengths_buffer, 0};
  }
  return args;
}

// --host-time: the host time of recording the call, by record_attention and by PreparedAttention.
// After the timed runs: every pipeline exists, so this is the recording alone.
void time_host_recording(Context& context, const AttentionArgs& args, BenchResult& result) {
  std::optional<Buffer> workspace;
  if (result.plan.workspace_bytes > 0) workspace.emplace(Buffer::allocate(context, result.plan.workspace_bytes));
  const BufferSlice slice{workspace ? &*workspace : nullptr, 0};
  // Alternated, so that both see the same machine.
  const PreparedAttention prepared(context, AttentionSpec::of(args));
  const AttentionBuffers buffers = AttentionBuffers::of(args);
  std::vector<HostTime> record, replay;
  for (int round = 0; round < kHostTimeRounds; ++round) {
    record.push_back(time_recording(
        context, [&](VkCommandBuffer cmd) { record_attention(context, cmd, args, slice); }, 1, kHostTimeCalls));
    replay.push_back(time_recording(
        context, [&](VkCommandBuffer cmd) { prepared.record(cmd, buffers, slice); }, 1, kHostTimeCalls));
  }
  result.host_record = merge_rounds(record);
  result.host_prepared = merge_rounds(replay);
}

// --check: set 0's output (from the timed runs) against the fp64 reference.
CheckResult check_output(const AttentionLayouts& layouts, const AttentionProblem& problem, DType dtype,
                         const HostInputs& in, const TensorSet& set0, uint64_t out_bytes, const SharedBuffers& shared) {
  std::vector<std::byte> raw(out_bytes);
  if (out_bytes) set0.out.download(raw.data(), out_bytes);
  std::vector<float> out(static_cast<std::size_t>(layouts.out.element_count()));
  decode(dtype, raw.data(), out.data(), out.size());
  return check_against_reference(layouts, problem, in.q, in.k, in.v, out, shared.weights ? &*shared.weights : nullptr,
                                 shared.per_head.reference(), in.kv_lengths);
}

BenchResult bench_one(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype) {
  const AttentionLayouts layouts = bench_layouts(shape, dtype);
  BenchResult result;
  result.shape = shape;
  result.dtype = dtype;
  const AttentionProblem problem = check_attention(layouts);  // before generating gigabytes of random numbers
  result.weights = shape.path == AttentionPath::unfused;
  const TensorBytes bytes = tensor_bytes(layouts, problem, shape.kv_quant, result.weights);
  check_fits(context, o, problem, result.weights, bytes);
  const HostInputs in = draw_inputs(layouts, shape, dtype, o.seed);

  // The peak is measured from here: no scratch left over from an earlier shape (a larger one would
  // be reused, hiding this shape's workspace), and the peak starts at what is allocated now.
  context.release_scratch();
  context.reset_peak_memory();
  const uint64_t baseline = context.memory_stats().current_bytes;
  SharedBuffers shared = upload_shared(context, shape, result.weights, bytes.p, in.kv_lengths);

  // Rotated input sets (make_rotated_sets), counted from the bytes a call touches: Q, O and the K/V
  // it reads (with --lengths, each sequence's keys only).
  result.kv_bytes = kv_read_bytes(shape, dtype);
  const double touched_bytes = static_cast<double>(bytes.q + bytes.out + result.kv_bytes);
  const int wanted = rotation_count(touched_bytes);
  std::vector<TensorSet> sets;
  result.rotated_input_bytes = make_rotated_sets(context, wanted, sets, [&] {
    return TensorSet{upload(context, dtype, in.q), upload_kv(context, dtype, in.k, in.k_blocks),
                     upload_kv(context, dtype, in.v, in.v_blocks), Buffer::allocate(context, std::max<uint64_t>(bytes.out, 16))};
  });
  const std::vector<AttentionArgs> args = rotated_args(layouts, shape, sets, shared);
  result.rotations = static_cast<int>(sets.size());
  result.plan = plan_attention(context, args[0]);
  result.device_bytes = bytes.q + bytes.k + bytes.v + bytes.out + bytes.p + result.plan.workspace_bytes;

  // Poison every output before the first run: the check reads set 0's output from the timed runs
  // (set 0 runs first), so a kernel that skips rows leaves NaN there rather than stale results.
  if (o.check) {
    for (TensorSet& set : sets) set.out.fill(0xFF);  // all-ones bytes: NaN in f32, f16 and bf16
    if (shared.weights) shared.weights->fill(0xFF);
  }

  time_runs(context, o, [&](int warmup, int iters) { return time_attention(context, args, warmup, iters); }, result);
  // Everything of the shape was allocated at once by now (inputs, outputs, P, the scratch).
  result.peak_device_bytes = context.memory_stats().peak_bytes - baseline - result.rotated_input_bytes;
  const double seconds = result.ms_median * 1e-3;
  result.tflops = seconds > 0 ? credited_flops(problem, shape.kv_lengths, false) / seconds * 1e-12 : 0.0;
  result.gbps = seconds > 0 ? touched_bytes / seconds * 1e-9 : 0.0;
  if (o.copy) result.copy = time_copies(context, result.kv_bytes, std::max(o.warmup, 1), result.iters);
  if (o.host_time) time_host_recording(context, args[0], result);
  if (o.check) result.check = check_output(layouts, problem, dtype, in, sets[0], bytes.out, shared);
  return result;
}

BenchResult skipped(const BenchShape& shape, DType dtype, const std::string& reason) {
  BenchResult r;
  r.shape = shape;
  r.dtype = dtype;
  r.skipped = true;
  r.reason = reason;
  for (char& c : r.reason)  // one line in the table and the CSV
    if (c == '\n' || c == '\r') c = ' ';
  return r;
}

bool out_of_memory(const Error& e) { return e.code() == ErrorCode::out_of_memory; }

// Mistakes in the options, before any device is opened.
void check_usage(const BenchOptions& o) {
  if (o.json && o.csv) throw UsageError("--json and --csv both choose what stdout holds; give one of them");
  if (!o.sweep.empty() && !o.shape_option_given.empty())
    throw UsageError("--sweep " + o.sweep + " sets the shapes; drop " + o.shape_option_given);
  if (o.sweep.empty() && o.max_seq > 0)
    throw UsageError("--max-seq caps the sequence lengths of a --sweep preset; give --sweep prefill|decode|scaling");
  if (!o.lengths.empty() && !o.seq_k.empty())
    throw UsageError("--lengths gives each sequence's keys (seq_k is their maximum); drop --seq-k");
  if (!o.lengths.empty() && o.batch_given && static_cast<int64_t>(o.lengths.size()) != o.batch)
    throw UsageError("--lengths gives " + std::to_string(o.lengths.size()) + " lengths for --batch " +
                std::to_string(o.batch) + "; give one per batch entry (or drop --batch)");
  if (o.kv_dtype == "q8_0" && o.path == "unfused")
    throw UsageError("--kv-dtype q8_0 runs on the fused kernels (the three-stage path reads K and V as the dtype); drop --path unfused");
  if (o.shared_prefix > 0 && !o.no_cascade && o.path == "unfused")
    throw UsageError("--shared-prefix runs the cascade on the fused kernels; drop --path unfused (or add --no-cascade)");
  if (o.page_size > 0 && o.host_time)
    throw UsageError("--host-time compares record_attention with PreparedAttention, dense calls; drop --paged or --host-time");
  if (!o.page_order.empty() && o.page_size == 0)
    throw UsageError("--page-order " + o.page_order + " orders the pages of a paged cache; give --paged PAGE_SIZE too");
  if (o.shared_prefix > 0 && o.page_size == 0)
    throw UsageError("--shared-prefix " + std::to_string(o.shared_prefix) + " shares pages of a paged cache; give --paged PAGE_SIZE too");
  if (o.shared_prefix > 0 && o.shared_prefix % o.page_size != 0)
    throw UsageError("--shared-prefix " + std::to_string(o.shared_prefix) + " must be whole pages of --paged " +
                     std::to_string(o.page_size));
  if (o.no_cascade && o.shared_prefix == 0)
    throw UsageError("--no-cascade reads a shared prefix per sequence; give --shared-prefix TOKENS too");
  if (o.v_view && o.page_size == 0)
    throw UsageError("--v-view reads V from the rows of a paged K cache; give --paged PAGE_SIZE too");
  if (o.v_view && o.dim_v > o.dim)
    throw UsageError("--v-view reads V as the first --dim-v columns of K's rows; --dim-v " + std::to_string(o.dim_v) +
                     " exceeds --dim " + std::to_string(o.dim));
  if (o.varlen && o.page_size > 0)
    throw UsageError("--varlen (packed K/V rows) and --paged (a paged KV cache) are two layouts; give one of them");
  if (!o.kv_layout.empty() && (o.page_size > 0 || o.varlen))
    throw UsageError("--kv-layout " + o.kv_layout + " lays out dense K and V; drop it with " +
                (o.varlen ? "--varlen" : "--paged"));
  if (o.varlen && o.host_time)
    throw UsageError("--host-time compares record_attention with PreparedAttention, dense calls; drop --varlen or --host-time");
  if (o.backward) {
    const std::pair<const char*, bool> forward_only[] = {
        {"--paged", o.page_size > 0}, {"--varlen", o.varlen},          {"--lengths", !o.lengths.empty()},
        {"--kv-dtype", !o.kv_dtype.empty()}, {"--host-time", o.host_time}, {"--copy", o.copy}};
    for (const auto& [flag, given] : forward_only)
      if (given) throw UsageError(std::string("--backward times dense calls' backward pass; drop ") + flag);
  }
  if (o.varlen && !o.lengths.empty() && *std::max_element(o.lengths.begin(), o.lengths.end()) == 0)
    throw UsageError("--varlen --lengths: no sequence has a key (packed K and V need a row or more)");
}

int run(const BenchOptions& o) {
  check_usage(o);
  const std::optional<Sweep> sweep = o.sweep.empty() ? std::nullopt : std::optional(parse_sweep(o.sweep));
  ContextOptions context_options;
  context_options.device = o.device;
  context_options.kernel = parse_kernel_variant(o.kernel);
  Context context(context_options);
  const DeviceInfo& device = context.device_info();

  BenchReport report;
  report.device = device;
  if (device.is_cpu()) report.host_cpu = host_cpu_description();
  report.sweep = sweep;
  report.seed = o.seed;
  report.counts_given = o.counts_given;
  std::vector<BenchShape> shapes;
  // Sweeps default to f16, the storage FlashAttention's tables and KV caches use; single runs keep f32.
  DType dtype = parse_dtype(o.dtype);
  if (sweep) {
    SweepGrid grid = sweep_grid(*sweep, is_cpu_device(device), o.max_seq);
    shapes = std::move(grid.shapes);
    for (BenchShape& s : shapes) apply_modifiers(o, s);
    report.reduced = grid.reduced;
    report.grid_note = grid.note;
    if (!o.dtype_given) {
      dtype = device.supports_f16() ? DType::f16 : DType::f32;
      report.grid_note += device.supports_f16() ? "; dtype f16 (the sweep default)"
                                                : "; dtype f32 (the sweep default f16 needs 16-bit storage, which "
                                                  "this device lacks)";
    }
  } else {
    shapes = explicit_shapes(o);
  }

  ProgressLine progress;
  bool any_ran = false;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const BenchShape& shape = shapes[i];
    if (shapes.size() > 1)
      progress.show(i, shapes.size(),
                    sweep ? sweep_label(*sweep, shape)
                          : "seq_q " + std::to_string(shape.seq_q) + " seq_k " + std::to_string(shape.seq_k));
    try {
      report.results.push_back(o.backward             ? bench_backward(context, o, shape, dtype)
                               : shape.varlen         ? bench_varlen(context, o, shape, dtype)
                               : shape.page_size > 0 ? bench_paged(context, o, shape, dtype)
                                                     : bench_one(context, o, shape, dtype));
      any_ran = true;
    } catch (const ShapeSkipped& e) {
      if (!sweep)
        throw Error("bench: seq_q " + std::to_string(shape.seq_q) + " seq_k " + std::to_string(shape.seq_k) + ": " +
                    e.what());
      report.results.push_back(skipped(shape, dtype, e.what()));
    } catch (const Error& e) {
      // Out of memory is the shape's fault; anything else before a single shape has run is most
      // likely the options' (a dtype the device lacks, a bad --kernel for it): fail, don't skip
      // every shape. A lost device fails every later shape too.
      if (!sweep || e.code() == ErrorCode::device_lost || (!any_ran && !out_of_memory(e))) throw;
      report.results.push_back(skipped(shape, dtype, e.what()));
    } catch (const std::bad_alloc&) {
      if (!sweep) throw;
      report.results.push_back(skipped(shape, dtype, "out of host memory for the inputs or the reference"));
    }
  }
  progress.clear();
  if (sweep == Sweep::scaling) report.fits = fit_scaling(report.results);

  if (o.json) print_json(report);
  else if (o.csv) print_csv(report);
  else print_table(report);
  std::fflush(stdout);

  for (const BenchResult& r : report.results) {
    if (r.check && !r.check->passed()) {
      const bool p_failed = r.check->weights_checked && !(r.check->max_weight_err <= r.check->tolerance);
      char message[320];
      std::snprintf(message, sizeof message,
                    "check failed: batch %lld heads %lld seq_q %lld seq_k %lld dim %lld %s %s: %s %.3g exceeds the %s "
                    "tolerance %g (seed %llu)",
                    static_cast<long long>(r.shape.batch), static_cast<long long>(r.shape.heads),
                    static_cast<long long>(r.shape.seq_q), static_cast<long long>(r.shape.seq_k),
                    static_cast<long long>(r.shape.dim_qk), layout_name(r.shape).c_str(), r.plan.path ? r.plan.path : "",
                    p_failed ? "max_weight_err" : "max_err_over_max_v", p_failed ? r.check->max_weight_err : r.check->max_err_over_max_v,
                    to_string(r.dtype), r.check->tolerance, static_cast<unsigned long long>(o.seed));
      throw Error(message);
    }
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = parent.add_subcommand("bench", "Time attention on random inputs (GPU timestamps)");
  const GivenOptions f = add_bench_options(app, o.get());
  const CLI::Option* batch = f.shape_options.front();
  return {app, [o, warmup = f.warmup, iters = f.iters, budget = f.budget, dtype = f.dtype, batch,
               shape_options = f.shape_options]() {
            // Counts on the command line are honoured exactly, unless --budget is given as well: then
            // they are the caps of the budget rule (how bench/compare.py --budget gets the same counts
            // and the same budget on vkattn and its torch peers).
            o->counts_given = (warmup->count() > 0 || iters->count() > 0) && budget->count() == 0;
            o->dtype_given = dtype->count() > 0;
            o->batch_given = batch->count() > 0;
            for (const CLI::Option* option : shape_options)
              if (option->count() > 0 && o->shape_option_given.empty()) o->shape_option_given = option->get_name();
            return run(*o);
          }};
}

}  // namespace vkattn::cli
