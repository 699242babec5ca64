// `vkattn bench`'s command-line options (docs/command-line.md, "vkattn bench"), registered into
// BenchOptions in the order --help lists them.
#pragma once

#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"

namespace vkattn::cli {

// The options whose presence, not only their value, the command looks at.
struct GivenOptions {
  std::vector<CLI::Option*> shape_options;  // any of them given: named in the --sweep refusal
  CLI::Option* dtype = nullptr;
  CLI::Option* warmup = nullptr;
  CLI::Option* iters = nullptr;
  CLI::Option* budget = nullptr;
};

GivenOptions add_bench_options(CLI::App* app, BenchOptions* o);

}  // namespace vkattn::cli
