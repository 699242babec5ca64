// `vkattn conform`: the conformance sweep on the user's device against the fp64 CPU reference — the
// same cases as the doctest suites (conform/catalog.hpp), the multi-head layer's and the backward
// pass's included, on every path the library has — with a table per feature group, the failing cases and a command that
// reproduces each.
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cli_numbers.hpp"
#include "commands.hpp"
#include "conform/catalog.hpp"
#include "conform/backward_case.hpp"
#include "conform/device_profiles.hpp"
#include "conform/layer_case.hpp"
#include "conform_report.hpp"
#include "usage_error.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

struct ConformOptions {
  std::string device;
  std::vector<std::string> paths = {"all"};
  std::vector<std::string> filters;
  std::string profile;  // --profile: a device profile's id; "" for the device's own plans
  uint64_t seed = conform::kDefaultBaseSeed;
  bool quick = false, json = false, list = false, validation = false;
  std::string shard;  // "K/N": on every path, the K-th of N contiguous parts of the cases; "" = all
};

// --shard K/N -> (K - 1, N): 1 <= K <= N, both plain decimal (std::stoul alone would read " 1",
// "+1" and "-1", the last as 2^64 - 1).
std::pair<std::size_t, std::size_t> parse_shard(const std::string& text) {
  const std::string not_k_n = "--shard: '" + text + "' is not K/N (e.g. 1/2)";
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos) throw Error(not_k_n);
  const auto number = [&](std::string_view part) {
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (!integer_syntax_error(part, false).empty() || ec != std::errc() || end != part.data() + part.size())
      throw Error(not_k_n);
    return value;
  };
  const std::size_t k = number(std::string_view(text).substr(0, slash));
  const std::size_t n = number(std::string_view(text).substr(slash + 1));
  if (n < 1 || k < 1 || k > n) throw Error("--shard: '" + text + "' needs 1 <= K <= N");
  return {k - 1, n};
}

// Whether the subgroup kernel (one subgroup per workgroup, shuffles) runs on `device`: what
// KernelVariant::subgroup needs (context.hpp).
bool runs_subgroup_kernel(const DeviceInfo& device) {
  return device.subgroup_shuffle && device.subgroup_size >= 1 && device.min_subgroup_size == device.subgroup_size &&
         device.max_subgroup_size == device.subgroup_size;
}

// How one path label runs: the kernel variant of its Context and the path of each call.
struct PathSpec {
  std::string label;
  KernelVariant kernel;
  AttentionPath path;
  std::string option;  // its --path name (a failure's reproducing command)
};

// "all" and "fused" include the subgroup kernel, lavapipe's default: on a device that cannot run it
// (run() checks), its runs are reported skipped. The backward's cases map these onto its two kernel
// forms through the same KernelVariant (conform/backward_case.hpp): fused/tiled and fused/rowwise run
// the portable form, fused/subgroup the subgroup form, fused/auto the plan's pick, and unfused the
// forward on the three-stage path with its weights, then the three-stage backward.
std::vector<PathSpec> selected_paths(const std::vector<std::string>& names) {
  const PathSpec tiled{"fused/tiled", KernelVariant::tiled, AttentionPath::fused, "fused-tiled"};
  const PathSpec rowwise{"fused/rowwise", KernelVariant::rowwise, AttentionPath::fused, "fused-rowwise"};
  const PathSpec subgroup{"fused/subgroup", KernelVariant::subgroup, AttentionPath::fused, "fused-subgroup"};
  const PathSpec unfused{"unfused", KernelVariant::automatic, AttentionPath::unfused, "unfused"};
  const PathSpec automatic{"fused/auto", KernelVariant::automatic, AttentionPath::fused, "fused-auto"};
  std::vector<PathSpec> specs;
  const auto add = [&](const PathSpec& p) {
    for (const PathSpec& s : specs)
      if (s.label == p.label) return;
    specs.push_back(p);
  };
  for (const std::string& name : names) {
    if (name == "all") {
      add(tiled), add(rowwise), add(subgroup), add(unfused);
    } else if (name == "fused") {
      add(tiled), add(rowwise), add(subgroup);
    } else if (name == "fused-tiled") {
      add(tiled);
    } else if (name == "fused-rowwise") {
      add(rowwise);
    } else if (name == "fused-subgroup") {
      add(subgroup);
    } else if (name == "fused-auto") {
      add(automatic);
    } else {
      add(unfused);  // CLI11 has checked the name
    }
  }
  return specs;
}

bool has_glob(const std::string& pattern) { return pattern.find_first_of("*?[") != std::string::npos; }

// A filter selects a case by its id ("sweep-f16/17"), or a whole section by name ("long-decode"); with
// *, ? or [ it is a shell pattern matched against the id ("masks-*", "*/0").
bool selected(const std::vector<std::string>& filters, const std::string& section, const std::string& id) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    if (has_glob(f) ? fnmatch(f.c_str(), id.c_str(), 0) == 0 : (f == id || f == section)) return true;
  }
  return false;
}

struct SelectedCase {
  std::string id, section;
  std::variant<conform::AttentionCase, conform::LayerCase, conform::ServingCase, conform::BackwardCase> c;

  std::string description() const {
    return std::visit([](const auto& x) { return conform::describe(x); }, c);
  }
  conform::CaseResult run(Context& context, const conform::RunOptions& options) const {
    if (const auto* layer = std::get_if<conform::LayerCase>(&c)) return conform::run_layer_case(context, *layer, options);
    if (const auto* serving = std::get_if<conform::ServingCase>(&c))
      return conform::run_serving_case(context, *serving, options);
    if (const auto* backward = std::get_if<conform::BackwardCase>(&c))
      return conform::run_backward_case(context, *backward, options);
    return conform::run_case(context, std::get<conform::AttentionCase>(c), options);
  }
};

std::vector<SelectedCase> select_cases(const ConformOptions& o) {
  std::vector<SelectedCase> cases;
  for (conform::CaseSection& s : conform::catalog(o.seed)) {
    std::vector<std::size_t> indices = s.quick;
    if (!o.quick || !o.filters.empty()) {  // a filter names cases to run, quick or not
      indices.clear();
      for (std::size_t i = 0; i < s.size(); ++i) indices.push_back(i);
    }
    for (std::size_t i : indices) {
      const std::string id = s.name + "/" + std::to_string(i);
      if (!selected(o.filters, s.name, id)) continue;
      if (!s.layer_cases.empty()) cases.push_back({id, s.name, s.layer_cases[i]});
      else if (!s.serving_cases.empty()) cases.push_back({id, s.name, s.serving_cases[i]});
      else if (!s.backward_cases.empty()) cases.push_back({id, s.name, s.backward_cases[i]});
      else cases.push_back({id, s.name, s.cases[i]});
    }
  }
  if (cases.empty()) {
    std::string f;
    for (const std::string& x : o.filters) f += (f.empty() ? "" : " ") + x;
    throw UsageError("conform: --filter " + f + " matches no case (vkattn conform --list shows the case ids)");
  }
  return cases;
}

std::string reproduce_command(const ConformOptions& o, const SelectedCase& c, const PathSpec& path) {
  std::string cmd = "vkattn conform --filter " + c.id + " --path " + path.option + " --seed " + std::to_string(o.seed);
  if (!o.device.empty()) cmd += " --device '" + o.device + "'";
  if (o.validation) cmd += " --validation";
  if (!o.profile.empty()) cmd += " --profile " + o.profile;
  return cmd;
}

// Validation messages of one Context, collected for the case that caused them. The layer may call
// from driver threads, hence the mutex.
struct MessageSink {
  std::mutex mutex;
  std::vector<std::string> messages;
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(messages, {});
  }
};

int run(const ConformOptions& o) {
  const std::vector<SelectedCase> cases = select_cases(o);
  if (o.list) {
    for (const SelectedCase& c : cases) std::printf("%-24s %s\n", c.id.c_str(), c.description().c_str());
    return 0;
  }
  const std::vector<PathSpec> paths = selected_paths(o.paths);
  const conform::DeviceProfile* profile = o.profile.empty() ? nullptr : &conform::find_device_profile(o.profile);
  const bool progress = isatty(fileno(stderr)) != 0;
  // --shard: on every path the same contiguous part of the cases (neighbouring cases share their
  // pipelines more often than cases far apart), so that the parts take about as long as each other.
  std::size_t first = 0, end = cases.size();
  if (!o.shard.empty()) {
    const auto [k, n] = parse_shard(o.shard);
    first = cases.size() * k / n;
    end = cases.size() * (k + 1) / n;
    if (first == end)
      throw UsageError("--shard " + o.shard + ": part of " + std::to_string(cases.size()) +
                  " cases is empty; use fewer parts");
  }
  const std::size_t total = (end - first) * paths.size();

  ConformSetup setup;
  setup.seed = o.seed;
  setup.quick = o.quick;
  setup.filters = o.filters;
  if (profile) setup.profile_id = profile->id, setup.profile_name = profile->info.name;
  std::vector<ConformRun> runs;
  std::optional<DeviceInfo> device;
  for (std::size_t p = 0; p < paths.size(); ++p) {
    const PathSpec& path = paths[p];
    setup.paths.push_back(path.label);
    auto sink = std::make_shared<MessageSink>();
    ContextOptions options;
    options.device = o.device;
    options.kernel = path.kernel;
    options.validation = o.validation;
    if (o.validation)
      options.on_validation_message = [sink](const std::string& m) {
        std::lock_guard<std::mutex> lock(sink->mutex);
        sink->messages.push_back(m);
      };
    // Each case's calls also check their own barriers (a missing one fails the case as an Error),
    // as the test suite's do: on devices that give right answers without a barrier, nothing else would.
    options.check_barriers = true;
    Context context(options);
    device = context.device_info();
    // The subgroup kernel needs the device's (or the profile's plans') subgroups to be the workgroup.
    std::string no_subgroup;
    if (path.kernel == KernelVariant::subgroup) {
      if (!runs_subgroup_kernel(*device))
        no_subgroup = "the subgroup kernel does not run on " + device->name +
                      " (no subgroup shuffles, or subgroups of more than one size)";
      else if (profile && profile->info.subgroup_size != device->subgroup_size)
        no_subgroup = "the profile's subgroup kernel is planned for " + std::to_string(profile->info.subgroup_size) +
                      "-lane subgroups, this device has " + std::to_string(device->subgroup_size);
    }
    conform::RunOptions run_options;
    run_options.path = path.path;
    if (profile) run_options.profile = &profile->info;
    if (o.validation) run_options.take_validation_messages = [sink] { return sink->take(); };
    for (std::size_t i = first; i < end; ++i) {
      const SelectedCase& c = cases[i];
      if (progress)
        std::fprintf(stderr, "\r\033[K[%zu/%zu] %s on %s", runs.size() + 1, total, c.id.c_str(), path.label.c_str());
      ConformRun run;
      run.id = c.id;
      run.section = c.section;
      run.path = path.label;
      run.description = c.description();
      std::visit(
          [&](const auto& x) {
            run.seed = x.seed;
            run.features = conform::features(x);
          },
          c.c);
      if (no_subgroup.empty()) {
        run.result = c.run(context, run_options);
      } else {
        run.result.outcome = conform::Outcome::skipped;
        run.result.skip_reason = no_subgroup;
      }
      run.reproduce = reproduce_command(o, c, path);
      runs.push_back(std::move(run));
    }
  }
  if (progress) std::fprintf(stderr, "\r\033[K");

  if (o.json) std::cout << conform_report_json(*device, setup, runs).dump(2) << "\n";
  else print_conform_report(stdout, *device, setup, runs);
  std::fflush(stdout);
  std::size_t failed = 0;
  for (const ConformRun& r : runs) failed += r.result.outcome == conform::Outcome::failed;
  if (failed)
    throw Error("conform: " + std::to_string(failed) + " of " + std::to_string(runs.size()) +
                " case runs failed on " + device->name + " (the report lists each with a command that reproduces it)");
  return 0;
}

}  // namespace

Command add_conform_command(CLI::App& parent) {
  auto o = std::make_shared<ConformOptions>();
  CLI::App* app = parent.add_subcommand(
      "conform", "Check this device against the fp64 CPU reference: the conformance sweep on every path");
  app->add_flag("--quick", o->quick, "A spread of the cases over every axis (about a minute on lavapipe)");
  app->add_option("--seed", o->seed, "Base seed every case's inputs derive from")->capture_default_str();
  app->add_option("--filter", o->filters,
                  "Run only these cases: a case id (sweep-f16/17), a section (long-decode) or a shell pattern "
                  "matched against ids (masks-*); repeatable; runs them whether or not --quick would")
      ->take_all();
  app->add_option("--path", o->paths,
                  "Paths to check (repeatable): all, fused (the three fused kernels), fused-tiled, fused-rowwise, "
                  "fused-subgroup, unfused; fused-auto: the fused kernel each case's plan picks on this device "
                  "(not part of all). Backward cases: tiled and rowwise run its portable kernels, subgroup its "
                  "subgroup form, auto the plan's pick, unfused the three-stage forward and backward")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::IsMember({"all", "fused", "fused-tiled", "fused-rowwise", "fused-subgroup", "fused-auto", "unfused"}));
  app->add_option("--shard", o->shard,
                  "K/N: run only the K-th of N contiguous parts of the cases, on every path, e.g. to spread a "
                  "run over processes")
      ->type_name("K/N")
      ->check(parsed_by("--shard", [](const std::string& s) { parse_shard(s); }));
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  app->add_option("--profile", o->profile,
                  "Run the attention, paged, packed and backward cases with the plans made for another device class (h100, rdna3, arc, apple, "
                  "mali, adreno, vulkan12-min, llvmpipe) on this device; cases whose plan does not fit it are skipped")
      ->check(parsed_by("--profile", [](const std::string& s) { conform::find_device_profile(s); }));
  app->add_flag("--validation", o->validation,
                "Enable the Khronos validation layer; any message it reports fails the case that caused it");
  app->add_flag("--json", o->json, "Print the report as JSON (device, driver, library version, every case run)");
  app->add_flag("--list", o->list, "List the selected case ids and what each is, and run nothing");
  return {app, [o]() { return run(*o); }};
}

}  // namespace vkattn::cli
