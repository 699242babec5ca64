// `vkattn bench`: GPU-timestamp timing of the attention kernels on random inputs, with an optional
// check against the fp64 reference. Every figure is printed with the device, driver and library
// version it was measured with (README.md, "Command line": bench). The shapes come from the command line or from a
// preset (`--sweep`, bench_sweep.hpp); the writers are in bench_output.hpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_metrics.hpp"
#include "bench_output.hpp"
#include "bench_progress.hpp"
#include "bench_result.hpp"
#include "bench_sweep.hpp"
#include "commands.hpp"
#include "host_time.hpp"
#include "modifier_options.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/timer.hpp"
#include "weights_budget.hpp"

namespace vkattn::cli {
namespace {

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
  std::string shape_option_given;  // the first of --seq-q, --batch, ... given, for the --sweep error
  double budget_s = 5.0;      // otherwise: GPU seconds the timed runs may take
  uint64_t seed = 1;
  bool check = false, json = false, csv = false;
  bool host_time = false;
  bool copy = false;  // --copy: time copies of the call's K/V bytes too (bench_copy.hpp)
  ModifierOptions modifiers;         // --window, --align, --softcap
  bool alibi = false, sinks = false;  // --alibi, --sinks
};

// ALiBi's slopes for `heads` heads, 2^(-8(h+1)/H) (Press et al.; exact for a power of two), and sink
// logits (fixed values around 0, as a trained model's are): what `--alibi` and `--sinks` give.
std::vector<float> alibi_slopes(int64_t heads) {
  std::vector<float> s(static_cast<std::size_t>(heads));
  for (int64_t h = 0; h < heads; ++h)
    s[static_cast<std::size_t>(h)] = static_cast<float>(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads)));
  return s;
}
std::vector<float> sink_logits(int64_t heads) {
  std::vector<float> s(static_cast<std::size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) s[static_cast<std::size_t>(h)] = 0.25f * static_cast<float>(h % 5) - 0.5f;
  return s;
}

// --host-time: rounds of calls recorded into one command buffer (median and minimum per call reported).
constexpr int kHostTimeRounds = 9, kHostTimeCalls = 200;

// A shape the device cannot hold (memory, buffer limits): a sweep records it as skipped and goes on.
class ShapeSkipped : public Error {
 public:
  using Error::Error;
};

// Random values already rounded to the dtype: exactly what the GPU will see, so the reference can be
// fed the same numbers.
std::vector<float> random_values(std::size_t count, DType dtype, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& x : values) x = round_to(dtype, normal(rng));
  return values;
}

// One set of device tensors; several are rotated through so the inputs are not cache-resident.
struct TensorSet {
  Buffer q, k, v, out;
};

Buffer upload(Context& context, DType dtype, const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer buffer = Buffer::allocate(context, std::max<uint64_t>(bytes.size(), 16));
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

// The run's modifiers onto a shape (every shape of a run, sweeps included, gets the same).
void apply_modifiers(const BenchOptions& o, BenchShape& s) {
  AttentionOptions options;
  apply_modifier_options(o.modifiers, options);
  s.window = options.window;
  s.align = options.align;
  s.softcap = options.softcap;
  s.alibi = o.alibi;
  s.sinks = o.sinks;
}

std::vector<BenchShape> explicit_shapes(const BenchOptions& o) {
  const std::vector<int64_t>& sk = o.seq_k.empty() ? o.seq_q : o.seq_k;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (o.seq_q.size() == sk.size()) {
    for (std::size_t i = 0; i < sk.size(); ++i) pairs.emplace_back(o.seq_q[i], sk[i]);
  } else if (o.seq_q.size() == 1) {
    for (int64_t s : sk) pairs.emplace_back(o.seq_q[0], s);
  } else if (sk.size() == 1) {
    for (int64_t s : o.seq_q) pairs.emplace_back(s, sk[0]);
  } else {
    throw Error("--seq-q and --seq-k list " + std::to_string(o.seq_q.size()) + " and " + std::to_string(sk.size()) +
                " values; give one of them a single value or both the same count");
  }
  std::vector<BenchShape> shapes;
  for (const auto& [seq_q, seq_k] : pairs) {
    BenchShape s;
    s.batch = o.batch;
    s.heads = o.heads;
    s.kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads;
    s.seq_q = seq_q;
    s.seq_k = seq_k;
    s.dim_qk = o.dim;
    s.dim_v = o.dim_v > 0 ? o.dim_v : o.dim;
    s.causal = parse_causal(o.causal);
    s.path = parse_attention_path(o.path);
    apply_modifiers(o, s);
    shapes.push_back(s);
  }
  return shapes;
}

std::string mib_text(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// Before anything is allocated: the buffers of one call (one input set, O, P when written) against
// --max-memory, the device's largest heap and its per-buffer limits; the library would refuse the
// last two as well, but the bench says which shape and why, and skips it in a sweep. The workspace
// is not known before the buffers exist: a failure to allocate it surfaces as out-of-memory.
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

BenchResult bench_one(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype) {
  AttentionLayouts layouts;
  layouts.q = TensorLayout::bhsd(dtype, shape.batch, shape.heads, shape.seq_q, shape.dim_qk);
  layouts.k = TensorLayout::bhsd(dtype, shape.batch, shape.kv_heads, shape.seq_k, shape.dim_qk);
  layouts.v = TensorLayout::bhsd(dtype, shape.batch, shape.kv_heads, shape.seq_k, shape.dim_v);
  layouts.out = TensorLayout::bhsd(dtype, shape.batch, shape.heads, shape.seq_q, shape.dim_v);
  layouts.options.causal = shape.causal;
  layouts.options.window = shape.window;
  layouts.options.align = shape.align;
  layouts.options.softcap = shape.softcap;
  if (shape.alibi) layouts.alibi = HeadValuesLayout{1, shape.heads, 0};
  if (shape.sinks) layouts.sinks = HeadValuesLayout{1, shape.heads, 0};
  BenchResult result;
  result.shape = shape;
  result.dtype = dtype;
  const AttentionProblem problem = check_attention(layouts);  // before generating gigabytes of random numbers
  result.weights = shape.path == AttentionPath::unfused;
  const uint64_t p_bytes = result.weights ? weights_bytes(problem.batch, problem.heads, problem.seq_q, problem.seq_k) : 0;
  const auto bytes_of = [](const TensorLayout& l) {
    return static_cast<uint64_t>(l.element_count()) * dtype_size(l.dtype);
  };
  const uint64_t out_bytes = bytes_of(layouts.out);
  if (result.weights) {
    try {
      // The message ends "drop <flags> to use the fused path": name what the user can drop.
      check_weights_fit(problem.batch, problem.heads, problem.seq_q, problem.seq_k, context.device_info(),
                        o.sweep.empty() ? "--path unfused" : "the unfused path");
    } catch (const Error& e) {
      throw ShapeSkipped(e.what());
    }
  }
  check_shape_fits(o, context.device_info(), {bytes_of(layouts.q), bytes_of(layouts.k), bytes_of(layouts.v), out_bytes, p_bytes});

  std::mt19937_64 rng(o.seed);
  const std::vector<float> q = random_values(static_cast<std::size_t>(layouts.q.element_count()), dtype, rng);
  const std::vector<float> k = random_values(static_cast<std::size_t>(layouts.k.element_count()), dtype, rng);
  const std::vector<float> v = random_values(static_cast<std::size_t>(layouts.v.element_count()), dtype, rng);

  // The peak is measured from here: no scratch left over from an earlier shape (a larger one would
  // be reused, hiding this shape's workspace), and the peak starts at what is allocated now.
  context.release_scratch();
  context.reset_peak_memory();
  const uint64_t baseline = context.memory_stats().current_bytes;

  // One P for every rotated set: it is written, never read, and usually far larger than the cache
  // the rotation defeats, so copies would only multiply the memory the unfused path needs.
  std::optional<Buffer> weights;
  if (result.weights) weights.emplace(Buffer::allocate(context, std::max<uint64_t>(p_bytes, 16)));
  // The modifiers' per-head values, one copy for every rotated set (a few bytes).
  const std::vector<float> slopes = shape.alibi ? alibi_slopes(shape.heads) : std::vector<float>{};
  const std::vector<float> sinks = shape.sinks ? sink_logits(shape.heads) : std::vector<float>{};
  std::optional<Buffer> slopes_buffer, sinks_buffer;
  if (shape.alibi) slopes_buffer.emplace(upload(context, DType::f32, slopes));
  if (shape.sinks) sinks_buffer.emplace(upload(context, DType::f32, sinks));

  // The same values in every set: only the addresses have to differ to defeat the cache. A set the
  // device has no memory for ends the rotation there (the first one must fit). The extra sets are
  // counted apart (rotated_input_bytes): a caller running this shape once needs only one.
  const int wanted = rotation_count(attention_bytes(problem));
  std::vector<TensorSet> sets;
  sets.reserve(static_cast<std::size_t>(wanted));
  uint64_t after_first_set = 0;
  for (int r = 0; r < wanted; ++r) {
    try {
      sets.push_back(TensorSet{upload(context, dtype, q), upload(context, dtype, k), upload(context, dtype, v),
                               Buffer::allocate(context, std::max<uint64_t>(out_bytes, 16))});
    } catch (const Error&) {
      if (r == 0) throw;
      break;
    }
    if (r == 0) after_first_set = context.memory_stats().current_bytes;
  }
  result.rotated_input_bytes = context.memory_stats().current_bytes - after_first_set;
  std::vector<AttentionArgs> args(sets.size());
  for (std::size_t r = 0; r < sets.size(); ++r) {
    args[r].q = {&sets[r].q, layouts.q};
    args[r].k = {&sets[r].k, layouts.k};
    args[r].v = {&sets[r].v, layouts.v};
    args[r].out = {&sets[r].out, layouts.out};
    args[r].options = layouts.options;
    args[r].path = shape.path;
    if (weights) args[r].weights = {&*weights, 0};
    if (slopes_buffer) args[r].alibi = {&*slopes_buffer, *layouts.alibi};
    if (sinks_buffer) args[r].sinks = {&*sinks_buffer, *layouts.sinks};
  }
  result.rotations = static_cast<int>(sets.size());
  result.plan = plan_attention(context, args[0]);
  result.device_bytes = bytes_of(layouts.q) + bytes_of(layouts.k) + bytes_of(layouts.v) + out_bytes + p_bytes +
                        result.plan.workspace_bytes;

  // Poison every output before the first run: the check reads set 0's output from the timed runs
  // (set 0 runs first), so a kernel that skips rows leaves NaN there rather than stale results.
  if (o.check) {
    for (TensorSet& set : sets) set.out.fill(0xFF);  // all-ones bytes: NaN in f32, f16 and bf16
    if (weights) weights->fill(0xFF);
  }

  // The first run builds the call's pipelines (and, on lavapipe, JIT-compiles them at their first
  // dispatch): its host time is reported apart. It is the first warm-up, or with --warmup 0 the
  // first timed run.
  const std::size_t pipelines_before = context.pipeline_count();
  const auto first_start = std::chrono::steady_clock::now();
  const double first_gpu_ms = time_attention(context, args, 0, 1).at(0);
  result.first_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_start).count();
  result.first_run_pipelines = static_cast<int>(context.pipeline_count() - pipelines_before);

  std::vector<double> ms;
  if (o.counts_given) {
    if (o.warmup > 0) {
      ms = time_attention(context, args, o.warmup - 1, o.iters);
    } else {
      ms = {first_gpu_ms};
      if (o.iters > 1) {
        const std::vector<double> rest = time_attention(context, args, 0, o.iters - 1);
        ms.insert(ms.end(), rest.begin(), rest.end());
      }
    }
  } else {
    // One probe run (a warm-up after the first run, whose time is mostly building the pipelines)
    // says how long a run takes; then as many warm-ups and timed runs as the defaults ask for, fewer
    // where they would exceed the budget. The first run and the probe count as two of the warm-ups.
    // A 2-core lavapipe needs seconds per run on the default problem; a GPU gets the full counts.
    const double probe_ms = std::max(time_attention(context, args, 0, 1).at(0), 1e-3);
    const double budget_ms = o.budget_s * 1e3;
    const int warmup = std::clamp(static_cast<int>(0.2 * budget_ms / probe_ms), 0, std::max(o.warmup - 2, 0));
    const int iters = std::clamp(static_cast<int>(budget_ms / probe_ms), 1, o.iters);
    ms = time_attention(context, args, warmup, iters);
  }
  if (ms.empty()) throw Error("time_attention returned no timings");
  // Everything of the shape was allocated at once by now (inputs, outputs, P, the scratch).
  result.peak_device_bytes = context.memory_stats().peak_bytes - baseline - result.rotated_input_bytes;
  result.iters = static_cast<int>(ms.size());
  result.ms_median = median(ms);
  result.ms_min = *std::min_element(ms.begin(), ms.end());
  const double seconds = result.ms_median * 1e-3;
  result.tflops = seconds > 0 ? attention_flops(problem) / seconds * 1e-12 : 0.0;
  result.gbps = seconds > 0 ? attention_bytes(problem) / seconds * 1e-9 : 0.0;
  result.kv_bytes = bytes_of(layouts.k) + bytes_of(layouts.v);
  if (o.copy) result.copy = time_copies(context, result.kv_bytes, std::max(o.warmup, 1), result.iters);

  if (o.host_time) {
    // After the timed runs: every pipeline exists, so this is the recording alone.
    std::optional<Buffer> workspace;
    if (result.plan.workspace_bytes > 0) workspace.emplace(Buffer::allocate(context, result.plan.workspace_bytes));
    const BufferSlice slice{workspace ? &*workspace : nullptr, 0};
    // Alternated, so that both see the same machine.
    const PreparedAttention prepared(context, AttentionSpec::of(args[0]));
    const AttentionBuffers buffers = AttentionBuffers::of(args[0]);
    std::vector<HostTime> record, replay;
    for (int round = 0; round < kHostTimeRounds; ++round) {
      record.push_back(time_recording(
          context, [&](VkCommandBuffer cmd) { record_attention(context, cmd, args[0], slice); }, 1, kHostTimeCalls));
      replay.push_back(time_recording(
          context, [&](VkCommandBuffer cmd) { prepared.record(cmd, buffers, slice); }, 1, kHostTimeCalls));
    }
    result.host_record = merge_rounds(record);
    result.host_prepared = merge_rounds(replay);
  }

  if (o.check) {
    std::vector<std::byte> raw(out_bytes);
    if (out_bytes) sets[0].out.download(raw.data(), out_bytes);
    std::vector<float> out(static_cast<std::size_t>(layouts.out.element_count()));
    decode(dtype, raw.data(), out.data(), out.size());
    result.check = check_against_reference(layouts, problem, q, k, v, out, weights ? &*weights : nullptr, slopes, sinks);
  }
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
  if (o.json && o.csv) throw Error("--json and --csv both choose what stdout holds; give one of them");
  if (!o.sweep.empty() && !o.shape_option_given.empty())
    throw Error("--sweep " + o.sweep + " sets the shapes; drop " + o.shape_option_given);
  if (o.sweep.empty() && o.max_seq > 0)
    throw Error("--max-seq caps the sequence lengths of a --sweep preset; give --sweep prefill|decode|scaling");
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
      report.results.push_back(bench_one(context, o, shape, dtype));
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
                    "check failed: batch %lld heads %lld seq_q %lld seq_k %lld dim %lld %s: %s %.3g exceeds the %s "
                    "tolerance %g (seed %llu)",
                    static_cast<long long>(r.shape.batch), static_cast<long long>(r.shape.heads),
                    static_cast<long long>(r.shape.seq_q), static_cast<long long>(r.shape.seq_k),
                    static_cast<long long>(r.shape.dim_qk), r.plan.path ? r.plan.path : "",
                    p_failed ? "max_weight_err" : "max_err_over_max_v", p_failed ? r.check->max_weight_err : r.check->max_err_over_max_v,
                    to_string(r.dtype), r.check->tolerance, static_cast<unsigned long long>(o.seed));
      throw Error(message);
    }
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  // CLI::PositiveNumber would print DBL_MAX in full in its message.
  const CLI::Range kPositive(1, std::numeric_limits<int32_t>::max());
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = parent.add_subcommand("bench", "Time attention on random inputs (GPU timestamps)");
  std::vector<CLI::Option*> shape_options;
  shape_options.push_back(app->add_option("--batch", o->batch, "Batch size")->capture_default_str()->check(kPositive));
  shape_options.push_back(app->add_option("--heads", o->heads, "Query heads")->capture_default_str()->check(kPositive));
  shape_options.push_back(
      app->add_option("--kv-heads", o->kv_heads, "Key/value heads (GQA/MQA; default: heads)")->check(kPositive));
  shape_options.push_back(app->add_option("--seq-q", o->seq_q, "Query sequence length(s), e.g. 512,1024,2048")
                              ->delimiter(',')
                              ->capture_default_str()
                              ->check(kPositive));
  shape_options.push_back(app->add_option("--seq-k", o->seq_k, "Key sequence length(s) (default: seq-q)")
                              ->delimiter(',')
                              ->check(kPositive));
  shape_options.push_back(
      app->add_option("--dim", o->dim, "Head dim of Q and K (1..256)")->capture_default_str()->check(kPositive));
  shape_options.push_back(app->add_option("--dim-v", o->dim_v, "Head dim of V and O (default: dim)")->check(kPositive));
  CLI::Option* dtype = app->add_option("--dtype", o->dtype, "Storage dtype (f32; f16 with --sweep)")
                           ->capture_default_str()
                           ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  shape_options.push_back(app->add_option("--causal", o->causal,
                                          "Causal mask alignment. TFLOP/s count 2*(dim+dim_v) FLOPs per visible "
                                          "(query, key) pair, exactly for either alignment (seq_q != seq_k too); "
                                          "without a mask that is FlashAttention's 4*B*H*Sq*Sk*D")
                              ->capture_default_str()
                              ->check(CLI::IsMember({"none", "top-left", "bottom-right"})));
  CLI::Option* warmup =
      app->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str()->check(CLI::Range(0, 1000000));
  CLI::Option* iters = app->add_option("--iters", o->iters, "Timed runs (median and minimum reported)")
                           ->capture_default_str()
                           ->check(kPositive);
  CLI::Option* budget =
      app->add_option("--budget", o->budget_s,
                      "Seconds of GPU time the timed runs of each shape may take (fewer runs beyond it). Applies "
                      "without --warmup/--iters; given with them, it makes their counts caps rather than exact")
          ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  app->add_option("--window", o->modifiers.window, "Sliding window L:R (-1 = unbounded side), e.g. 512:0 with --causal")
      ->type_name("L:R");
  app->add_option("--align", o->modifiers.align, "Diagonal of the window and ALiBi without --causal")
      ->check(CLI::IsMember({"top-left", "bottom-right"}));
  app->add_option("--softcap", o->modifiers.softcap, "Logit softcap C > 0")->type_name("FLOAT");
  app->add_flag("--alibi", o->alibi, "ALiBi with slopes 2^(-8(h+1)/H)");
  app->add_flag("--sinks", o->sinks, "An attention-sink logit per head");
  app->add_flag("--check", o->check, "Compare with the fp64 CPU reference (sampled rows); fail beyond tolerance");
  app->add_flag("--host-time", o->host_time,
                "Also measure the host microseconds per call of recording it into a command buffer");
  app->add_flag("--copy", o->copy,
                "Also time copying as many bytes as the call's K and V (vkCmdCopyBuffer, and a compute shader that "
                "copies 16 bytes per invocation) right after its runs, and report the GB/s at which the call reads "
                "K and V against both: on a decoding step, how close it streams the KV cache to the device's copy "
                "bandwidth");
  app->add_flag("--json", o->json, "Print JSON instead of a table");
  app->add_flag("--csv", o->csv, "Print CSV (a header, one row per shape) instead of a table");
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  app->add_option("--kernel", o->kernel, "Fused-kernel variant (auto: subgroup on CPU devices, tiled on GPUs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tiled", "rowwise", "subgroup"}));
  shape_options.push_back(
      app->add_option("--path", o->path,
                      "auto/fused: the fused kernels; unfused: the three-stage path, writing the weights P (B,H,Sq,Sk)")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "fused", "unfused"})));
  app->add_option("--sweep", o->sweep,
                  "A preset grid of shapes: prefill (FlashAttention's: 16k tokens, hidden 2048, dim 64/128/256, seq "
                  "512..16k, causal and not), decode (seq_q 1, seq_k 1k..128k, 32 heads, 8 KV heads, dim 128) or "
                  "scaling (seq 256..8k, fused and unfused, fitted growth of time and memory); reduced on CPU devices")
      ->check(CLI::IsMember({"prefill", "decode", "scaling"}));
  app->add_option("--max-seq", o->max_seq,
                  "With --sweep: only the preset's shapes whose sequence length (decode: seq_k) is at most this")
      ->check(kPositive);
  app->add_option("--max-memory", o->max_memory_mib,
                  "MiB of device buffers a shape may need (inputs, output, P); a sweep skips larger shapes, a "
                  "single run refuses them (default: the device's memory)")
      ->check(kPositive);
  return {app, [o, warmup, iters, budget, dtype, shape_options]() {
            // Counts on the command line are honoured exactly, unless --budget is given as well: then
            // they are the caps of the budget rule (how bench/compare_torch.py gets the same counts
            // and the same budget on both sides).
            o->counts_given = (warmup->count() > 0 || iters->count() > 0) && budget->count() == 0;
            o->dtype_given = dtype->count() > 0;
            for (const CLI::Option* option : shape_options)
              if (option->count() > 0 && o->shape_option_given.empty()) o->shape_option_given = option->get_name();
            return run(*o);
          }};
}

}  // namespace vkattn::cli
