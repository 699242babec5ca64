// `vkattn bench --sweep prefill|decode|scaling`: the preset grids of shapes, their reduced versions
// for CPU devices, and the growth exponents the scaling sweep fits.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench_result.hpp"
#include "vkattn/context.hpp"

namespace vkattn::cli {

enum class Sweep { prefill, decode, scaling };
const char* to_string(Sweep sweep);
Sweep parse_sweep(const std::string& name);  // throws Error

struct SweepGrid {
  std::vector<BenchShape> shapes;
  // The grid differs from the preset's full one: reduced for a CPU device, or cut by --max-seq.
  bool reduced = false;
  // One line on what the grid is, and how and why it was reduced.
  std::string note;
};

// A CPU device (lavapipe, or any device of type cpu) gets the reduced grids: the full ones would
// take hours there.
bool is_cpu_device(const DeviceInfo& device);

// The preset's shapes in the order they run. `max_seq` > 0 keeps only the shapes whose sequence
// length (prefill and scaling: seq; decode: seq_k) is at most max_seq; Error when that leaves none.
SweepGrid sweep_grid(Sweep sweep, bool cpu_device, int64_t max_seq);

// What the progress line shows for a shape, e.g. "prefill seq 2048 dim 64 causal".
std::string sweep_label(Sweep sweep, const BenchShape& shape);

// A fit needs this many distinct sequence lengths: two points always lie on a line, so an exponent
// from two says nothing about how the time or memory grows.
inline constexpr int kMinFitPoints = 3;

// The least-squares slope of log(y) against log(x): the exponent e of y ~ x^e. NaN with fewer than
// kMinFitPoints distinct x (or any x or y <= 0).
double fit_exponent(const std::vector<std::pair<double, double>>& points);

struct Fit {
  std::string path;    // "fused" | "unfused"
  std::string metric;  // "ms_median" | "peak_device_bytes"
  double exponent = 0.0;
  int points = 0;
};

// For the scaling sweep: per path (in the order the paths first appear), the exponent of time and of
// measured peak memory against seq over the rows that ran. A path with fewer than kMinFitPoints
// such rows has no fit.
std::vector<Fit> fit_scaling(const std::vector<BenchResult>& results);

}  // namespace vkattn::cli
