#include "bench_output.hpp"
#include "modifier_options.hpp"
#include "per_head_options.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "vkattn/version.hpp"

namespace vkattn::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string driver_string(const DeviceInfo& d) {
  return d.driver_info.empty() ? d.driver_name : d.driver_name + " " + d.driver_info;
}

// A skipped row reports the path it would have taken: automatic without weights is the fused path.
const char* path_name(const BenchResult& r) {
  if (!r.skipped) return r.plan.path ? r.plan.path : "";
  return r.shape.path == AttentionPath::unfused ? "unfused" : "fused";
}

// Measured values of a skipped row are null: nothing was measured.
template <typename T>
Json measured(const BenchResult& r, T value) {
  return r.skipped ? Json(nullptr) : Json(value);
}

// One result with the keys bench/benchlib.py and bench/report.py read (keep them), then a few more.
Json first_dispatches_json(const BenchResult& r) {
  Json out = Json::array();
  for (const PipelineFirstDispatch& p : r.first_dispatches)
    out.push_back({{"pipeline", p.pipeline}, {"build_ms", p.build_ms}, {"first_ms", p.first_ms}, {"warm_ms", p.warm_ms}});
  return out;
}

Json result_json(const BenchResult& r) {
  const BenchShape& s = r.shape;
  const AttentionOptions& o = s.options;
  const bool checked = r.check.has_value();
  Json j = Json{{"batch", s.batch},
              {"heads", s.heads},
              {"kv_heads", s.kv_heads},
              {"seq_q", s.seq_q},
              {"seq_k", s.seq_k},
              {"dim_qk", s.dim_qk},
              {"dim_v", s.dim_v},
              {"dtype", to_string(r.dtype)},
              {"causal", to_string(s.options.causal)}};
  add_modifier_option_fields(o, j);
  for (PerHeadTensor t : kPerHeadTensors) j[to_string(t)] = s.per_head[t];  // given or not
  j.update(Json{
              // "dense", "paged 16" or "varlen"; kv_lengths: null without --lengths or --varlen (seq_k is
              // their maximum); q_lengths: each sequence's queries with --varlen (seq_q their maximum), else null
              {"layout", layout_name(s)},
              {"page_size", s.page_size > 0 ? Json(s.page_size) : Json(nullptr)},
              {"kv_lengths", s.kv_lengths.empty() ? Json(nullptr) : Json(s.kv_lengths)},
              {"q_lengths", s.q_lengths.empty() ? Json(nullptr) : Json(s.q_lengths)},
              {"path", path_name(r)},
              {"kernel", r.skipped ? Json(nullptr) : Json(r.plan.kernel ? r.plan.kernel : "")},
              {"splits", measured(r, r.plan.splits)},
              {"chunks", measured(r, r.plan.chunks)},
              {"weights", s.path == AttentionPath::unfused},
              // the backward pass (--backward): timed alone, credited 2.5x the forward's FLOPs
              {"backward", r.backward},
              {"device_bytes", measured(r, r.device_bytes)},
              {"workspace_bytes", measured(r, r.plan.workspace_bytes)},
              {"peak_device_bytes", measured(r, r.peak_device_bytes)},
              {"ms_median", measured(r, r.ms_median)},
              {"ms_min", measured(r, r.ms_min)},
              {"tflops", measured(r, r.tflops)},
              {"gbps", measured(r, r.gbps)},
              // nlohmann writes a non-finite double as null; a failed check is also reported on stderr
              {"max_err_over_max_v", checked ? Json(r.check->max_err_over_max_v) : Json(nullptr)},
              // null when not checked: no --check, the fused path, or P too large for the reference
              {"max_weight_err", checked && r.check->weights_checked ? Json(r.check->max_weight_err) : Json(nullptr)},
              {"status", r.skipped ? "skipped" : "ok"},
              {"reason", r.skipped ? Json(r.reason) : Json(nullptr)},
              {"rotations", measured(r, r.rotations)},
              {"rotated_input_bytes", measured(r, r.rotated_input_bytes)},
              {"iters", measured(r, r.iters)},
              {"first_run_ms", measured(r, r.first_run_ms)},
              {"first_run_pipelines", measured(r, r.first_run_pipelines)},
              // Each pipeline: host ms building it, GPU ms of its first dispatch in the first run and
              // of the same dispatch in the run after it (on lavapipe build + first - warm is its
              // translation and JIT compile); [] when the first run built no pipeline
              {"first_dispatches", first_dispatches_json(r)},
              // null without --host-time
              {"host_us_record_median", r.host_record ? Json(r.host_record->us_median) : Json(nullptr)},
              {"host_us_record_min", r.host_record ? Json(r.host_record->us_min) : Json(nullptr)},
              {"host_us_prepared_median", r.host_prepared ? Json(r.host_prepared->us_median) : Json(nullptr)},
              {"host_us_prepared_min", r.host_prepared ? Json(r.host_prepared->us_min) : Json(nullptr)},
              // Bytes of K and V the call reads (each sequence's keys) and their GB/s over the median time;
              // null without --copy: GB/s of copies of as many bytes by vkCmdCopyBuffer and by a copy
              // shader (median times), timed in the same run
              {"kv_bytes", measured(r, r.kv_bytes)},
              {"kv_gbps", measured(r, gb_per_s(r.kv_bytes, r.ms_median))},
              {"copy_transfer_gbps", r.copy ? Json(gb_per_s(r.copy->bytes, r.copy->transfer_ms_median)) : Json(nullptr)},
              {"copy_shader_gbps", r.copy ? Json(gb_per_s(r.copy->bytes, r.copy->shader_ms_median)) : Json(nullptr)}});
  return j;
}

Json fits_json(const std::vector<Fit>& fits) {
  Json out = Json::array();
  for (const Fit& f : fits)
    out.push_back({{"path", f.path}, {"metric", f.metric}, {"exponent", f.exponent}, {"points", f.points}});
  return out;
}

const Fit* find_fit(const std::vector<Fit>& fits, const std::string& path, const std::string& metric) {
  for (const Fit& f : fits)
    if (f.path == path && f.metric == metric) return &f;
  return nullptr;
}

// RFC 4180: quote a field holding a comma, a quote or a line break; double the quotes inside.
std::string csv_field(const Json& value) {
  std::string text;
  if (value.is_null()) return text;
  if (value.is_string()) text = value.get<std::string>();
  else text = value.dump();
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

// The processor of a CPU device; null for other devices.
Json host_cpu_json(const BenchReport& report) { return report.host_cpu.empty() ? Json(nullptr) : Json(report.host_cpu); }

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

void print_json(const BenchReport& report) {
  Json rows = Json::array();
  for (const BenchResult& r : report.results) rows.push_back(result_json(r));
  const Json out = {{"device", report.device.name},
                    {"driver", driver_string(report.device)},
                    {"host_cpu", host_cpu_json(report)},
                    {"version", version()},
                    {"sweep", report.sweep ? Json(to_string(*report.sweep)) : Json(nullptr)},
                    {"reduced", report.reduced},
                    {"grid", report.sweep ? Json(report.grid_note) : Json(nullptr)},
                    {"seed", report.seed},
                    {"results", rows},
                    {"fits", fits_json(report.fits)}};
  std::cout << out.dump(2) << "\n";
}

void print_csv(const BenchReport& report) {
  const Json run = {{"device", report.device.name},
                    {"driver", driver_string(report.device)},
                    {"host_cpu", host_cpu_json(report)},
                    {"version", version()},
                    {"sweep", report.sweep ? Json(to_string(*report.sweep)) : Json(nullptr)},
                    {"reduced", report.reduced}};
  // The keys of a result never depend on its values (skipped rows hold nulls), so any row's keys
  // make the header; one built from an empty result serves when there are no rows.
  const Json keys = result_json(BenchResult{});
  std::string header;
  for (const auto& [key, value] : run.items()) header += key + ",";
  for (const auto& [key, value] : keys.items()) header += key + ",";
  std::cout << header << "time_exponent,memory_exponent\n";
  for (const BenchResult& r : report.results) {
    std::string line;
    for (const auto& [key, value] : run.items()) line += csv_field(value) + ",";
    const Json row = result_json(r);  // named: items() of a temporary would dangle in the loop
    for (const auto& [key, value] : row.items()) line += csv_field(value) + ",";
    // The scaling fit of this row's path, on every row of that path; empty for other sweeps.
    const std::string path = path_name(r);
    const Fit* time = find_fit(report.fits, path, "ms_median");
    const Fit* memory = find_fit(report.fits, path, "peak_device_bytes");
    line += (time ? Json(time->exponent).dump() : "") + "," + (memory ? Json(memory->exponent).dump() : "");
    std::cout << line << "\n";
  }
}

namespace {

// The run's device, host, seed and the score modifiers (the run's, the same for every shape).
void print_run_header(const BenchReport& report) {
  const DeviceInfo& device = report.device;
  std::printf("device %s | driver %s | vkattn %s\n", device.name.c_str(), driver_string(device).c_str(), version());
  if (!report.host_cpu.empty()) std::printf("host CPU %s\n", report.host_cpu.c_str());
  if (report.sweep) std::printf("sweep %s\n", report.grid_note.c_str());
  std::printf("seed %llu; GPU timestamps, warm-up apart; FLOPs: 2*(dqk+dv) per visible (query, key) pair, causal and "
              "windows counted exactly%s\n",
              static_cast<unsigned long long>(report.seed),
              report.counts_given ? "" : "; fewer iterations where the counts would exceed --budget");
  if (!report.results.empty()) {  // the modifiers are the run's, the same for every shape
    const BenchShape& s = report.results.front().shape;
    std::string text = modifier_options_text(s.options);
    for (PerHeadTensor t : kPerHeadTensors)
      if (s.per_head[t]) text += std::string(" ") + per_head_bench_label(t);
    if (!text.empty()) std::printf("score modifiers:%s\n", text.c_str());
  }
}

// Whether some shape's weights were checked: only then is there a P column.
bool any_weights_checked(const BenchReport& report) {
  bool any_weights = false;
  for (const BenchResult& r : report.results) any_weights = any_weights || (r.check && r.check->weights_checked);
  return any_weights;
}

// The first shape's check, whose tolerance the footnote gives; none when no shape was checked.
const CheckResult* first_check_of(const BenchReport& report) {
  for (const BenchResult& r : report.results)
    if (!r.skipped && r.check) return &*r.check;
  return nullptr;
}

// The table: one row per shape.
void print_shape_rows(const BenchReport& report, bool any_weights) {
  // O's error is normalised by max|V| (O is a convex combination of V's rows); P's is absolute (it is
  // a probability). The P column appears only when some shape's weights were checked.
  std::printf("%5s %5s %5s %7s %7s %4s %4s %5s %13s %-9s %-20s %9s %9s %4s %5s %10s %10s %9s %9s %9s %13s %13s%s\n",
              "batch", "heads", "kvh", "seq_q", "seq_k", "dqk", "dv", "dtype", "causal", "layout", "path", "dev_MiB",
              "peak_MiB", "rot", "iters", "ms_median", "ms_min", "TFLOP/s", "GB/s", "kv_GB/s", "first_ms(pl)", "O_err/max|V|",
              any_weights ? "     P_abs_err" : "");
  for (const BenchResult& r : report.results) {
    const BenchShape& s = r.shape;
    std::printf("%5lld %5lld %5lld %7lld %7lld %4lld %4lld %5s %13s %-9s ", static_cast<long long>(s.batch),
                static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads), static_cast<long long>(s.seq_q),
                static_cast<long long>(s.seq_k), static_cast<long long>(s.dim_qk), static_cast<long long>(s.dim_v),
                to_string(r.dtype), to_string(s.options.causal), layout_name(s).c_str());
    if (r.skipped) {
      std::printf("%-20s skipped: %s\n", path_name(r), r.reason.c_str());
      continue;
    }
    // "fused/rowwise x4": 4 key-range splits; "unfused/gemm +P c3": writes P, in 3 chunks.
    const std::string path = std::string(path_name(r)) + "/" + (r.plan.kernel ? r.plan.kernel : "?") +
                             (r.weights ? " +P" : "") + (r.plan.splits > 1 ? " x" + std::to_string(r.plan.splits) : "") +
                             (r.plan.chunks > 1 ? " c" + std::to_string(r.plan.chunks) : "");
    char err[48] = "-", weight_err[48] = "-";
    if (r.check) {
      const bool o_failed = !(r.check->max_err_over_max_v <= r.check->tolerance);
      std::snprintf(err, sizeof err, "%.3g%s", r.check->max_err_over_max_v, o_failed ? " FAIL" : "");
      if (r.check->weights_checked) {
        const bool p_failed = !(r.check->max_weight_err <= r.check->tolerance);
        std::snprintf(weight_err, sizeof weight_err, "%.3g%s", r.check->max_weight_err, p_failed ? " FAIL" : "");
      }
    }
    char first[48];
    std::snprintf(first, sizeof first, "%.1f(%d)", r.first_run_ms, r.first_run_pipelines);
    std::printf("%-20s %9.2f %9.2f %4d %5d %10.4g %10.4g %9.4g %9.4g %9.4g %13s %13s", path.c_str(), mib(r.device_bytes),
                mib(r.peak_device_bytes), r.rotations, r.iters, r.ms_median, r.ms_min, r.tflops, r.gbps,
                gb_per_s(r.kv_bytes, r.ms_median), first, err);
    if (any_weights) std::printf(" %13s", weight_err);
    std::printf("\n");
  }
}

// What the check compared, and its tolerance (when some shape was checked).
void print_check_note(const BenchReport& report, bool any_weights) {
  bool any_paged = false, any_varlen_check = false;
  for (const BenchResult& r : report.results) {
    any_paged = any_paged || (r.check && r.shape.page_size > 0);
    any_varlen_check = any_varlen_check || (r.check && r.shape.varlen);
  }
  const char* serving_check = any_paged && any_varlen_check
                                  ? " (paged and varlen: reference::paged_attention and reference::varlen_attention on "
                                    "every row of every sequence, or of the first and last where all would take too long)"
                              : any_paged ? " (paged: reference::paged_attention on every row of every sequence, or of "
                                            "the first and last where all would take too long)"
                              : any_varlen_check ? " (varlen: reference::varlen_attention on every row of every sequence, "
                                                   "or of the first and last where all would take too long)"
                                                 : "";
  if (const CheckResult* first_check = first_check_of(report))
    std::printf("check: fp64 reference on up to 64 sampled rows%s; O_err/max|V|: max |O - O_ref| / max|V|%s; "
                "tolerance %g\n",
                serving_check,
                any_weights ? "; P_abs_err: max |P - P_ref| where the reference can afford P" : "",
                first_check->tolerance);
}

// What the columns measured, and the sequence lengths.
void print_column_notes(const BenchReport& report) {
  bool any_varlen = false;
  for (const BenchResult& r : report.results) any_varlen = any_varlen || r.shape.varlen;
  std::printf("dev_MiB: device buffers of one call, computed (Q, K, V, O, P when written, planned workspace); "
              "peak_MiB: measured peak of the device memory allocated for the shape, rotated input copies excluded\n");
  std::printf("kv_GB/s: bytes of K and V read (each sequence's keys x kv heads x (dqk+dv) x element size) over the "
              "median time; layout: dense K/V, or paged N: a cache of N-token pages (a pool just big enough, handed "
              "out shuffled) read through a block table%s\n",
              any_varlen ? ", or varlen: the sequences packed end to end (cu_seqlens), each with its own query and "
                           "key counts, causal aligned per sequence"
                         : "");
  const auto list_text = [](const std::vector<int64_t>& lengths) {
    std::string text;
    for (const int64_t len : lengths) {
      if (!text.empty()) text += ',';
      text += std::to_string(len);
    }
    return text;
  };
  for (const BenchResult& r : report.results) {  // --lengths: the same for every shape of the run
    if (r.shape.kv_lengths.empty() || r.shape.varlen) continue;
    std::printf("kv lengths (seq_k is their maximum): %s\n", list_text(r.shape.kv_lengths).c_str());
    break;
  }
  for (const BenchResult& r : report.results)  // --varlen: drawn per shape (or --lengths)
    if (r.shape.varlen)
      std::printf("kv lengths (seq_k is their maximum): %s; q lengths (seq_q is their maximum): %s\n",
                  list_text(r.shape.kv_lengths).c_str(), list_text(r.shape.q_lengths).c_str());
  std::printf("first_ms(pl): host time of the shape's first run, which built pl pipelines; on lavapipe they "
              "JIT-compile at that first dispatch unless Mesa's shader cache holds them already\n");
}

// Each shape's pipelines: build time and first dispatch.
void print_pipeline_times(const BenchReport& report) {
  for (const BenchResult& r : report.results) {
    if (r.first_dispatches.empty()) continue;
    std::string text;
    for (const PipelineFirstDispatch& p : r.first_dispatches) {
      char entry[256];
      std::snprintf(entry, sizeof entry, "%s%s: build %.1f + first dispatch %.1f - warm %.1f = %.1f ms", text.empty() ? "" : "; ",
                    p.pipeline.c_str(), p.build_ms, p.first_ms, p.warm_ms, p.build_ms + p.first_ms - p.warm_ms);
      text += entry;
    }
    std::printf("pipelines (seq_q %lld seq_k %lld; host time building each, GPU time of its first dispatch and of "
                "the same dispatch in the next run; on lavapipe the total is its translation and JIT compile): %s\n",
                static_cast<long long>(r.shape.seq_q), static_cast<long long>(r.shape.seq_k), text.c_str());
  }
}

// Each shape's host time per call, where measured.
void print_host_times(const BenchReport& report) {
  for (const BenchResult& r : report.results)
    if (r.host_record && r.host_prepared)
      std::printf("host time per call (seq_q %lld seq_k %lld): record_attention %.3f us median, %.3f us min; "
                  "PreparedAttention::record %.3f us median, %.3f us min (%d rounds of %d calls each, alternated, "
                  "recorded into one command buffer, never submitted)\n",
                  static_cast<long long>(r.shape.seq_q), static_cast<long long>(r.shape.seq_k), r.host_record->us_median,
                  r.host_record->us_min, r.host_prepared->us_median, r.host_prepared->us_min, r.host_record->rounds,
                  r.host_record->calls_per_round);
}

// Each shape's K/V read rate against plain copies, where measured.
void print_copy_comparisons(const BenchReport& report) {
  for (const BenchResult& r : report.results) {
    if (!r.copy) continue;
    const CopyTiming& c = *r.copy;
    const double kv = gb_per_s(r.kv_bytes, r.ms_median), transfer = gb_per_s(c.bytes, c.transfer_ms_median),
                 shader = gb_per_s(c.bytes, c.shader_ms_median);
    std::printf("copy (seq_q %lld seq_k %lld): the call reads K and V (%.1f MiB) at %.3g GB/s (%.3g best); copying as many "
                "bytes: vkCmdCopyBuffer %.3g GB/s (%.3g best), the call at %.2f of it; a copy shader %.3g GB/s (%.3g "
                "best), the call at %.2f of it (medians of %d copies each, after the call's runs)\n",
                static_cast<long long>(r.shape.seq_q), static_cast<long long>(r.shape.seq_k), mib(r.kv_bytes), kv,
                gb_per_s(r.kv_bytes, r.ms_min), transfer, gb_per_s(c.bytes, c.transfer_ms_min),
                transfer > 0 ? kv / transfer : 0.0, shader, gb_per_s(c.bytes, c.shader_ms_min),
                shader > 0 ? kv / shader : 0.0, c.iters);
  }
}

// The scaling sweep's fits of time and memory against the sequence length.
void print_fits(const BenchReport& report) {
  for (const std::string path : {"fused", "unfused"}) {
    const Fit* time = find_fit(report.fits, path, "ms_median");
    const Fit* memory = find_fit(report.fits, path, "peak_device_bytes");
    if (!time && !memory) {
      if (report.sweep == Sweep::scaling)
        std::printf("fit %s: no exponent, fewer than %d of its sequence lengths ran\n", path.c_str(), kMinFitPoints);
      continue;
    }
    std::printf("fit %s:", path.c_str());
    if (time) std::printf(" time ~ seq^%.2f", time->exponent);
    if (memory) std::printf("%s memory ~ seq^%.2f", time ? "," : "", memory->exponent);
    std::printf(" (least squares on log-log, %d points)\n", time ? time->points : memory->points);
  }
}

}  // namespace

void print_table(const BenchReport& report) {
  print_run_header(report);
  const bool any_weights = any_weights_checked(report);
  print_shape_rows(report, any_weights);
  print_check_note(report, any_weights);
  print_column_notes(report);
  print_pipeline_times(report);
  print_host_times(report);
  print_copy_comparisons(report);
  print_fits(report);
}

}  // namespace vkattn::cli
