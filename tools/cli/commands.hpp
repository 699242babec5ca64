// The subcommands of the `vkattn` command line, one file each. Each adds its CLI11 subcommand (with
// its options, held by the returned closure, so nothing is global) and returns what to run when the
// user chose it. Actions throw vkattn::Error / std::exception; main() turns those into one line.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace vkattn::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // returns the exit code
};

Command add_devices_command(CLI::App& parent);
Command add_run_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_mha_command(CLI::App& parent);
Command add_prepare_command(CLI::App& parent);
Command add_conform_command(CLI::App& parent);
Command add_merge_command(CLI::App& parent);

}  // namespace vkattn::cli
