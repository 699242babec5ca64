// The report of `vkattn conform`: per-feature tables (cases, passed, worst error as a fraction of its
// tolerance), the failing cases with a command that reproduces each, and the same as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "conform/case_runner.hpp"
#include "vkattn/context.hpp"

namespace vkattn::cli {

// One case run on one path.
struct ConformRun {
  std::string id;       // "<section>/<index>"
  std::string section;  // the catalog section
  std::string path;     // "fused/tiled", "fused/rowwise" or "unfused"
  std::string description;  // conform::describe of the case, seed included
  uint64_t seed = 0;        // the case's own seed
  std::vector<std::pair<std::string, std::string>> features;  // conform::features of the case
  conform::CaseResult result;
  std::string reproduce;  // a command line that runs this case alone
};

// What the run was: printed at the head of the report and stored in the JSON.
struct ConformSetup {
  uint64_t seed = 0;
  bool quick = false;
  std::vector<std::string> filters;
  std::vector<std::string> paths;
  // --profile: the device profile whose plans ran (conform/device_profiles.hpp); empty for the device's own.
  std::string profile_id, profile_name;
};

// The tables, one per feature group (dtype, mask, heads, layout, seq, dim, traps, layer, path, section),
// then the failing cases. `out` is stdout in the command.
void print_conform_report(std::FILE* out, const DeviceInfo& device, const ConformSetup& setup,
                          const std::vector<ConformRun>& runs);

nlohmann::ordered_json conform_report_json(const DeviceInfo& device, const ConformSetup& setup,
                                           const std::vector<ConformRun>& runs);

}  // namespace vkattn::cli
