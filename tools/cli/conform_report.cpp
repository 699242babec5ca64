#include "conform_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "vkattn/version.hpp"

namespace vkattn::cli {
namespace {

// Counts of case runs: a case runs once per path, so a case checked on 3 paths counts 3 here.
struct Stats {
  int runs = 0, passed = 0, failed = 0, skipped = 0;
  double worst = 0.0;  // over the runs that ran
};

// Feature groups in print order, each with its values in the order first seen.
class FeatureTable {
 public:
  void add(const std::string& group, const std::string& value, const conform::CaseResult& r) {
    auto g = std::find_if(groups_.begin(), groups_.end(), [&](const auto& x) { return x.first == group; });
    if (g == groups_.end()) g = groups_.insert(groups_.end(), {group, {}});
    auto v = std::find_if(g->second.begin(), g->second.end(), [&](const auto& x) { return x.first == value; });
    if (v == g->second.end()) v = g->second.insert(g->second.end(), {value, Stats{}});
    Stats& s = v->second;
    ++s.runs;
    if (r.outcome == conform::Outcome::passed) ++s.passed;
    if (r.outcome == conform::Outcome::failed) ++s.failed;
    if (r.outcome == conform::Outcome::skipped) ++s.skipped;
    s.worst = std::max(s.worst, r.worst);
  }
  const auto& groups() const { return groups_; }
  // Values in name order, except where the order of first appearance means something (paths and
  // sections come in the order they ran).
  void sort_values() {
    for (auto& [group, values] : groups_)
      if (group != "path" && group != "section")
        std::sort(values.begin(), values.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }

 private:
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, Stats>>>> groups_;
};

FeatureTable tabulate(const std::vector<ConformRun>& runs) {
  FeatureTable table;
  for (const ConformRun& run : runs) {
    table.add("path", run.path, run.result);
    table.add("section", run.section, run.result);
    for (const auto& [group, value] : run.features) table.add(group, value, run.result);
  }
  table.sort_values();
  return table;
}

Stats totals(const std::vector<ConformRun>& runs) {
  FeatureTable table;
  for (const ConformRun& run : runs) table.add("all", "all", run.result);
  return table.groups().empty() ? Stats{} : table.groups()[0].second[0].second;
}

// Distinct cases among the runs (each case runs once per path).
int distinct_cases(const std::vector<ConformRun>& runs) {
  std::vector<std::string> ids;
  for (const ConformRun& run : runs) ids.push_back(run.id);
  std::sort(ids.begin(), ids.end());
  return static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

std::string driver_string(const DeviceInfo& d) {
  return d.driver_info.empty() ? d.driver_name : d.driver_name + " " + d.driver_info;
}

std::string join(const std::vector<std::string>& xs, const char* sep) {
  std::string s;
  for (const std::string& x : xs) s += (s.empty() ? "" : sep) + x;
  return s;
}

// The first `lines` lines of `text`, indented.
std::string head(const std::string& text, int lines, const char* indent) {
  std::istringstream in(text);
  std::string line, out;
  int n = 0;
  while (std::getline(in, line)) {
    if (n++ == lines) {
      out += std::string(indent) + "...\n";
      break;
    }
    out += indent + line + "\n";
  }
  return out;
}

// The skipped runs grouped by their reason, in the order first met: how many, and the first run.
struct SkipGroup {
  std::string reason;
  int runs = 0;
  std::string first;  // "<id> on <path>"
};

std::vector<SkipGroup> skip_groups(const std::vector<ConformRun>& runs) {
  std::vector<SkipGroup> groups;
  for (const ConformRun& run : runs) {
    if (run.result.outcome != conform::Outcome::skipped) continue;
    const std::string& reason = run.result.skip_reason;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const SkipGroup& x) { return x.reason == reason; });
    if (g == groups.end()) g = groups.insert(groups.end(), {reason, 0, run.id + " on " + run.path});
    ++g->runs;
  }
  return groups;
}

}  // namespace

void print_conform_report(std::FILE* out, const DeviceInfo& device, const ConformSetup& setup,
                          const std::vector<ConformRun>& runs) {
  std::fprintf(out, "device %s | driver %s | vkattn %s\n", device.name.c_str(), driver_string(device).c_str(), version());
  std::fprintf(out, "%s sweep, seed %llu, paths %s%s%s\n", setup.quick ? "quick" : "full",
               static_cast<unsigned long long>(setup.seed), join(setup.paths, ", ").c_str(),
               setup.filters.empty() ? "" : ", filter ", join(setup.filters, " ").c_str());
  if (!setup.profile_id.empty())
    std::fprintf(out, "plans: as for %s (--profile %s), run on this device; a case whose plan does not fit it is "
                      "skipped, saying why\n",
                 setup.profile_name.c_str(), setup.profile_id.c_str());
  std::fprintf(out, "runs: a case on one path; worst: the largest error of a run (O, LSE, weights; a backward case's gradients) "
                    "as a fraction of its dtype's tolerance\n");
  const FeatureTable table = tabulate(runs);
  for (const auto& [group, values] : table.groups()) {
    std::fprintf(out, "\n%-34s %6s %7s %7s %8s %8s\n", group.c_str(), "runs", "passed", "failed", "skipped", "worst");
    for (const auto& [value, s] : values)
      std::fprintf(out, "  %-32s %6d %7d %7d %8d %8.3g%s\n", value.c_str(), s.runs, s.passed, s.failed, s.skipped,
                   s.worst, s.failed ? "  FAIL" : "");
  }
  const std::vector<SkipGroup> skips = skip_groups(runs);
  if (!skips.empty()) std::fprintf(out, "\nskipped runs, by reason (runs, the first of them)\n");
  for (const SkipGroup& g : skips)
    std::fprintf(out, "  %4d  %s (%s)\n", g.runs, g.reason.empty() ? "no reason given" : g.reason.c_str(), g.first.c_str());
  const Stats all = totals(runs);
  int shown = 0;
  for (const ConformRun& run : runs) {
    if (run.result.outcome != conform::Outcome::failed) continue;
    if (shown++ == 0) std::fprintf(out, "\nfailing cases\n");
    std::fprintf(out, "\nFAIL %s on %s: %s\n", run.id.c_str(), run.path.c_str(), run.description.c_str());
    for (const std::string& problem : run.result.problems) std::fputs(head(problem, 6, "  ").c_str(), out);
    std::fprintf(out, "  reproduce: %s\n", run.reproduce.c_str());
  }
  const int cases = distinct_cases(runs);
  std::fprintf(out, "\n%d runs (%d case%s on %zu path%s): %d passed, %d failed, %d skipped; worst %.3g of tolerance\n",
               all.runs, cases, cases == 1 ? "" : "s", setup.paths.size(), setup.paths.size() == 1 ? "" : "s",
               all.passed, all.failed, all.skipped, all.worst);
}

nlohmann::ordered_json conform_report_json(const DeviceInfo& device, const ConformSetup& setup,
                                           const std::vector<ConformRun>& runs) {
  using json = nlohmann::ordered_json;
  const auto stats_json = [](const Stats& s) {
    return json{{"runs", s.runs}, {"passed", s.passed}, {"failed", s.failed}, {"skipped", s.skipped}, {"worst", s.worst}};
  };
  json groups = json::object();
  const FeatureTable table = tabulate(runs);
  for (const auto& [group, values] : table.groups()) {
    json rows = json::array();
    for (const auto& [value, s] : values) {
      json row = {{"value", value}};
      row.update(stats_json(s));
      rows.push_back(row);
    }
    groups[group] = rows;
  }
  json failures = json::array(), run_list = json::array();
  for (const ConformRun& run : runs) {
    const char* outcome = run.result.outcome == conform::Outcome::passed   ? "passed"
                          : run.result.outcome == conform::Outcome::failed ? "failed"
                                                                            : "skipped";
    json entry = {{"id", run.id},
                  {"path", run.path},
                  {"outcome", outcome},
                  {"worst", run.result.worst},
                  {"seconds", run.result.seconds}};
    if (run.result.outcome == conform::Outcome::skipped) entry["skip_reason"] = run.result.skip_reason;
    run_list.push_back(entry);
    if (run.result.outcome == conform::Outcome::failed)
      failures.push_back({{"id", run.id},
                          {"path", run.path},
                          {"case", run.description},
                          {"seed", run.seed},
                          {"problems", run.result.problems},
                          {"reproduce", run.reproduce}});
  }
  return json{{"vkattn", version()},
              {"device", device.name},
              {"device_type", to_string(device.type)},
              {"driver", driver_string(device)},
              {"vulkan", device.api_version_string()},
              {"seed", setup.seed},
              {"quick", setup.quick},
              {"filters", setup.filters},
              {"paths", setup.paths},
              {"profile", setup.profile_id.empty() ? json(nullptr) : json(setup.profile_id)},
              {"summary", [&] {
                 json summary = stats_json(totals(runs));
                 summary["cases"] = distinct_cases(runs);
                 return summary;
               }()},
              {"groups", groups},
              {"failures", failures},
              {"runs", run_list}};
}

}  // namespace vkattn::cli
