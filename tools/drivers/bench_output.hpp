// What `vkattn bench` prints on stdout: a table for people (default), JSON (--json) or CSV (--csv)
// for scripts. JSON and CSV carry the same fields: each CSV row is a JSON result flattened, with the
// run's device, driver, version and sweep repeated on every row so a row stands on its own
// (CUTLASS profiler style), and the scaling fits as two columns of each row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_result.hpp"
#include "bench_sweep.hpp"
#include "vkattn/context.hpp"

namespace vkattn::cli {

struct BenchReport {
  DeviceInfo device;
  std::string host_cpu;        // a CPU device's processor (host_cpu_description()); "" for other devices
  std::optional<Sweep> sweep;  // none: the shapes came from --seq-q, --heads, ...
  bool reduced = false;        // SweepGrid::reduced
  std::string grid_note;       // SweepGrid::note; "" without --sweep
  std::vector<BenchResult> results;
  std::vector<Fit> fits;       // scaling only
  uint64_t seed = 1;
  bool counts_given = false;   // --warmup/--iters were given: honoured exactly, no time budget
};

void print_table(const BenchReport& report);
void print_json(const BenchReport& report);
void print_csv(const BenchReport& report);

}  // namespace vkattn::cli
