// `vkattn bench`: GPU-timestamp timing of the attention kernels on random inputs, with an optional
// check against the fp64 reference. Every figure is printed with the device, driver and library
// version it was measured with (DESIGN.md §7).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_metrics.hpp"
#include "commands.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/timer.hpp"
#include "vkattn/version.hpp"
#include "weights_budget.hpp"

namespace vkattn::cli {
namespace {

struct BenchOptions {
  int64_t batch = 1, heads = 8, kv_heads = 0;  // 0: kv_heads = heads
  std::vector<int64_t> seq_q = {1024}, seq_k;  // lists: one result per (seq_q, seq_k) pair
  int64_t dim = 64, dim_v = 0;                 // 0: dim_v = dim
  std::string dtype = "f32", causal = "none", device, kernel = "auto";
  // auto and fused: the fused kernels, no weights. unfused: the three-stage path, writing the weights P
  // (that is what one takes it for), so its time and memory include materialising them.
  std::string path = "auto";
  int warmup = 3, iters = 10;
  bool counts_given = false;  // --warmup or --iters on the command line: honoured exactly
  double budget_s = 5.0;      // otherwise: GPU seconds the timed runs may take
  uint64_t seed = 1;
  bool check = false, json = false;
};

struct Result {
  AttentionProblem problem;
  AttentionPlan plan;
  bool weights = false;       // P (B,H,Sq,Sk) f32 was written
  uint64_t device_bytes = 0;  // Q, K, V, O, P (when written) and the workspace of one call
  int rotations = 1;
  int iters = 0;
  double ms_median = 0, ms_min = 0, tflops = 0, gbps = 0;
  std::optional<CheckResult> check;
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

std::vector<std::pair<int64_t, int64_t>> sequence_pairs(const BenchOptions& o) {
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
  return pairs;
}

Result bench_one(Context& context, const BenchOptions& o, int64_t seq_q, int64_t seq_k) {
  const DType dtype = parse_dtype(o.dtype);
  const int64_t kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads;
  const int64_t dim_v = o.dim_v > 0 ? o.dim_v : o.dim;
  AttentionLayouts layouts;
  layouts.q = TensorLayout::bhsd(dtype, o.batch, o.heads, seq_q, o.dim);
  layouts.k = TensorLayout::bhsd(dtype, o.batch, kv_heads, seq_k, o.dim);
  layouts.v = TensorLayout::bhsd(dtype, o.batch, kv_heads, seq_k, dim_v);
  layouts.out = TensorLayout::bhsd(dtype, o.batch, o.heads, seq_q, dim_v);
  layouts.options.causal = parse_causal(o.causal);
  Result result;
  result.problem = check_attention(layouts);  // before generating gigabytes of random numbers
  const AttentionPath path = parse_attention_path(o.path);
  result.weights = path == AttentionPath::unfused;
  const AttentionProblem& p = result.problem;
  const uint64_t p_bytes = result.weights ? weights_bytes(p.batch, p.heads, p.seq_q, p.seq_k) : 0;
  if (result.weights)
    check_weights_fit(p.batch, p.heads, p.seq_q, p.seq_k, context.device_info(),
                      "--path unfused");

  std::mt19937_64 rng(o.seed);
  const std::vector<float> q = random_values(static_cast<std::size_t>(layouts.q.element_count()), dtype, rng);
  const std::vector<float> k = random_values(static_cast<std::size_t>(layouts.k.element_count()), dtype, rng);
  const std::vector<float> v = random_values(static_cast<std::size_t>(layouts.v.element_count()), dtype, rng);
  const uint64_t out_bytes = static_cast<uint64_t>(layouts.out.element_count()) * dtype_size(dtype);
  // One P for every rotated set: it is written, never read, and usually far larger than the cache
  // the rotation defeats, so copies would only multiply the memory the unfused path needs.
  std::optional<Buffer> weights;
  if (result.weights) weights.emplace(Buffer::allocate(context, std::max<uint64_t>(p_bytes, 16)));

  // The same values in every set: only the addresses have to differ to defeat the cache. A set the
  // device has no memory for ends the rotation there (the first one must fit).
  const int wanted = rotation_count(attention_bytes(result.problem));
  std::vector<TensorSet> sets;
  sets.reserve(static_cast<std::size_t>(wanted));
  for (int r = 0; r < wanted; ++r) {
    try {
      sets.push_back(TensorSet{upload(context, dtype, q), upload(context, dtype, k), upload(context, dtype, v),
                               Buffer::allocate(context, std::max<uint64_t>(out_bytes, 16))});
    } catch (const Error&) {
      if (r == 0) throw;
      break;
    }
  }
  std::vector<AttentionArgs> args(sets.size());
  for (std::size_t r = 0; r < sets.size(); ++r) {
    args[r].q = {&sets[r].q, layouts.q};
    args[r].k = {&sets[r].k, layouts.k};
    args[r].v = {&sets[r].v, layouts.v};
    args[r].out = {&sets[r].out, layouts.out};
    args[r].options = layouts.options;
    args[r].path = path;
    if (weights) args[r].weights = {&*weights, 0};
  }
  result.rotations = static_cast<int>(sets.size());
  result.plan = plan_attention(context, args[0]);
  const auto bytes_of = [](const TensorLayout& l) {
    return static_cast<uint64_t>(l.element_count()) * dtype_size(l.dtype);
  };
  result.device_bytes = bytes_of(layouts.q) + bytes_of(layouts.k) + bytes_of(layouts.v) + out_bytes + p_bytes +
                        result.plan.workspace_bytes;

  // Poison every output before the first run: the check reads set 0's output from the timed runs
  // (set 0 runs first), so a kernel that skips rows leaves NaN there rather than stale results.
  if (o.check) {
    for (TensorSet& set : sets) set.out.fill(0xFF);  // all-ones bytes: NaN in f32, f16 and bf16
    if (weights) weights->fill(0xFF);
  }

  std::vector<double> ms;
  if (o.counts_given) {
    ms = time_attention(context, args, o.warmup, o.iters);
  } else {
    // One probe run (it is the first warm-up) says how long a run takes; then as many warm-ups and
    // timed runs as the defaults ask for, fewer where they would exceed the budget. A 2-core
    // lavapipe needs seconds per run on the default problem; a GPU gets the full counts.
    const double probe_ms = std::max(time_attention(context, args, 0, 1).at(0), 1e-3);
    const double budget_ms = o.budget_s * 1e3;
    const int warmup = std::clamp(static_cast<int>(0.2 * budget_ms / probe_ms), 0, std::max(o.warmup - 1, 0));
    const int iters = std::clamp(static_cast<int>(budget_ms / probe_ms), 1, o.iters);
    ms = time_attention(context, args, warmup, iters);
  }
  if (ms.empty()) throw Error("time_attention returned no timings");
  result.iters = static_cast<int>(ms.size());
  result.ms_median = median(ms);
  result.ms_min = *std::min_element(ms.begin(), ms.end());
  const double seconds = result.ms_median * 1e-3;
  result.tflops = seconds > 0 ? attention_flops(result.problem) / seconds * 1e-12 : 0.0;
  result.gbps = seconds > 0 ? attention_bytes(result.problem) / seconds * 1e-9 : 0.0;

  if (o.check) {
    std::vector<std::byte> raw(out_bytes);
    if (out_bytes) sets[0].out.download(raw.data(), out_bytes);
    std::vector<float> out(static_cast<std::size_t>(layouts.out.element_count()));
    decode(dtype, raw.data(), out.data(), out.size());
    result.check = check_against_reference(layouts, result.problem, q, k, v, out, weights ? &*weights : nullptr);
  }
  return result;
}

std::string driver_string(const DeviceInfo& d) {
  return d.driver_info.empty() ? d.driver_name : d.driver_name + " " + d.driver_info;
}

void print_json(const DeviceInfo& device, const std::vector<Result>& results) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Result& r : results) {
    const AttentionProblem& p = r.problem;
    rows.push_back({{"batch", p.batch},
                    {"heads", p.heads},
                    {"kv_heads", p.kv_heads},
                    {"seq_q", p.seq_q},
                    {"seq_k", p.seq_k},
                    {"dim_qk", p.dim_qk},
                    {"dim_v", p.dim_v},
                    {"dtype", to_string(p.dtype)},
                    {"causal", to_string(p.causal)},
                    {"path", r.plan.path ? r.plan.path : ""},
                    {"kernel", r.plan.kernel ? r.plan.kernel : ""},
                    {"splits", r.plan.splits},
                    {"chunks", r.plan.chunks},
                    {"weights", r.weights},
                    {"device_bytes", r.device_bytes},
                    {"workspace_bytes", r.plan.workspace_bytes},
                    {"ms_median", r.ms_median},
                    {"ms_min", r.ms_min},
                    {"tflops", r.tflops},
                    {"gbps", r.gbps},
                    // nlohmann writes a non-finite double as null; a failed check is also reported on stderr
                    {"max_abs_err", r.check ? nlohmann::ordered_json(r.check->max_abs_err) : nlohmann::ordered_json(nullptr)},
                    // null when not checked: no --check, the fused path, or P too large for the reference
                    {"max_weight_err", r.check && r.check->weights_checked
                                           ? nlohmann::ordered_json(r.check->max_weight_err)
                                           : nlohmann::ordered_json(nullptr)}});
  }
  const nlohmann::ordered_json out = {
      {"device", device.name}, {"driver", driver_string(device)}, {"version", version()}, {"results", rows}};
  std::cout << out.dump(2) << "\n";
}

void print_table(const DeviceInfo& device, const BenchOptions& o, const std::vector<Result>& results) {
  std::printf("device %s | driver %s | vkattn %s\n", device.name.c_str(), driver_string(device).c_str(), version());
  std::printf("seed %llu; GPU timestamps, warm-up apart; FLOPs by the FlashAttention convention%s\n",
              static_cast<unsigned long long>(o.seed),
              o.counts_given ? "" : "; fewer iterations where the defaults would exceed --budget");
  std::printf("%5s %5s %5s %7s %7s %4s %4s %5s %13s %-20s %9s %4s %5s %10s %10s %9s %9s %12s\n", "batch", "heads",
              "kvh", "seq_q", "seq_k", "dqk", "dv", "dtype", "causal", "path", "dev_MiB", "rot", "iters", "ms_median",
              "ms_min", "TFLOP/s", "GB/s", "max_abs_err");
  for (const Result& r : results) {
    const AttentionProblem& p = r.problem;
    // "fused/rowwise x4": 4 key-range splits; "unfused/gemm +P c3": writes P, in 3 chunks.
    const std::string path = std::string(r.plan.path ? r.plan.path : "?") + "/" + (r.plan.kernel ? r.plan.kernel : "?") +
                             (r.weights ? " +P" : "") + (r.plan.splits > 1 ? " x" + std::to_string(r.plan.splits) : "") +
                             (r.plan.chunks > 1 ? " c" + std::to_string(r.plan.chunks) : "");
    char err[48] = "-";
    if (r.check) {
      const bool p_failed = r.check->weights_checked && !(r.check->max_weight_err <= r.check->tolerance);
      const double worst = std::max(r.check->max_abs_err, r.check->weights_checked ? r.check->max_weight_err : 0.0);
      std::snprintf(err, sizeof err, "%.3g%s", worst, r.check->passed() ? "" : p_failed ? " FAIL(P)" : " FAIL");
    }
    std::printf("%5lld %5lld %5lld %7lld %7lld %4lld %4lld %5s %13s %-20s %9.2f %4d %5d %10.4g %10.4g %9.4g %9.4g %12s\n",
                static_cast<long long>(p.batch), static_cast<long long>(p.heads), static_cast<long long>(p.kv_heads),
                static_cast<long long>(p.seq_q), static_cast<long long>(p.seq_k), static_cast<long long>(p.dim_qk),
                static_cast<long long>(p.dim_v), to_string(p.dtype), to_string(p.causal), path.c_str(),
                static_cast<double>(r.device_bytes) / (1024.0 * 1024.0), r.rotations, r.iters, r.ms_median, r.ms_min,
                r.tflops, r.gbps, err);
  }
  if (o.check && !results.empty() && results.front().check)
    std::printf("check: fp64 reference on up to 64 sampled rows; error normalised by max|V|%s; tolerance %g (%s)\n",
                results.front().weights ? ", and of P where the reference can afford it (max_abs_err shows the larger)" : "",
                results.front().check->tolerance, o.dtype.c_str());
  std::printf("dev_MiB: device buffers of one call (Q, K, V, O, P when written, workspace)\n");
}

int run(const BenchOptions& o) {
  const auto pairs = sequence_pairs(o);
  ContextOptions context_options;
  context_options.device = o.device;
  context_options.kernel = parse_kernel_variant(o.kernel);
  Context context(context_options);

  std::vector<Result> results;
  for (const auto& [seq_q, seq_k] : pairs) results.push_back(bench_one(context, o, seq_q, seq_k));
  if (o.json) print_json(context.device_info(), results);
  else print_table(context.device_info(), o, results);
  std::fflush(stdout);

  for (const Result& r : results) {
    if (r.check && !r.check->passed()) {
      const bool p_failed = r.check->weights_checked && !(r.check->max_weight_err <= r.check->tolerance);
      char message[256];
      std::snprintf(message, sizeof message,
                    "check failed: seq_q %lld seq_k %lld: %s %.3g exceeds the %s tolerance %g (seed %llu)",
                    static_cast<long long>(r.problem.seq_q), static_cast<long long>(r.problem.seq_k),
                    p_failed ? "max_weight_err" : "max_abs_err", p_failed ? r.check->max_weight_err : r.check->max_abs_err,
                    to_string(r.problem.dtype), r.check->tolerance, static_cast<unsigned long long>(o.seed));
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
  app->add_option("--batch", o->batch, "Batch size")->capture_default_str()->check(kPositive);
  app->add_option("--heads", o->heads, "Query heads")->capture_default_str()->check(kPositive);
  app->add_option("--kv-heads", o->kv_heads, "Key/value heads (GQA/MQA; default: heads)")->check(kPositive);
  app->add_option("--seq-q", o->seq_q, "Query sequence length(s), e.g. 512,1024,2048")
      ->delimiter(',')
      ->capture_default_str()
      ->check(kPositive);
  app->add_option("--seq-k", o->seq_k, "Key sequence length(s) (default: seq-q)")->delimiter(',')->check(kPositive);
  app->add_option("--dim", o->dim, "Head dim of Q and K (1..256)")->capture_default_str()->check(kPositive);
  app->add_option("--dim-v", o->dim_v, "Head dim of V and O (default: dim)")->check(kPositive);
  app->add_option("--dtype", o->dtype, "Storage dtype")->capture_default_str()->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--causal", o->causal, "Causal mask alignment")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "top-left", "bottom-right"}));
  CLI::Option* warmup =
      app->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str()->check(CLI::Range(0, 1000000));
  CLI::Option* iters = app->add_option("--iters", o->iters, "Timed runs (median and minimum reported)")
                           ->capture_default_str()
                           ->check(kPositive);
  app->add_option("--budget", o->budget_s,
                  "Without --warmup/--iters: seconds of GPU time the timed runs may take (fewer runs beyond it)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  app->add_flag("--check", o->check, "Compare with the fp64 CPU reference (sampled rows); fail beyond tolerance");
  app->add_flag("--json", o->json, "Print JSON instead of a table");
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  app->add_option("--kernel", o->kernel, "Fused-kernel variant (auto: rowwise on CPU devices, tiled on GPUs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tiled", "rowwise"}));
  app->add_option("--path", o->path,
                  "auto/fused: the fused kernels; unfused: the three-stage path, writing the weights P (B,H,Sq,Sk)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fused", "unfused"}));
  return {app, [o, warmup, iters]() {
            o->counts_given = warmup->count() > 0 || iters->count() > 0;
            return run(*o);
          }};
}

}  // namespace vkattn::cli
