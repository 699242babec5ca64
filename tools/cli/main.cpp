// `vkattn`: list devices, run attention (or a multi-head attention layer) on .npy files, merge partial
// results, benchmark.
// Every failure ends as one line "vkattn: error: <message>" on stderr and a non-zero exit code (1 for
// errors, 2 for usage errors), so scripts can rely on stdout holding only results.
#include <CLI/CLI.hpp>

#include <exception>
#include <new>
#include <iostream>
#include <string>
#include <vector>

#include "cli_numbers.hpp"
#include "commands.hpp"
#include "usage_error.hpp"
#include "vkattn/error.hpp"
#include "vkattn/version.hpp"

namespace {

int report(const std::string& message, int code) {
  // Keep it to one line even when a message carries newlines (CLI11 and driver messages may).
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::cerr << "vkattn: error: " << line << "\n";
  return code;
}

int run(int argc, char** argv) {
  CLI::App app{"vkattn: scaled dot-product attention on any Vulkan device", "vkattn"};
  app.set_version_flag("--version", std::string("vkattn ") + vkattn::version());
  app.require_subcommand(1);
  app.fallthrough(false);

  std::vector<vkattn::cli::Command> commands = {
      vkattn::cli::add_devices_command(app),
      vkattn::cli::add_run_command(app),
      vkattn::cli::add_bench_command(app),
      vkattn::cli::add_mha_command(app),
      vkattn::cli::add_prepare_command(app),
      vkattn::cli::add_conform_command(app),
      vkattn::cli::add_merge_command(app),
  };
  vkattn::cli::make_values_strict(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version: CLI11 prints them (help of the subcommand)
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string help = "vkattn --help";
    for (const auto& command : commands)
      if (command.app->parsed()) help = "vkattn " + command.app->get_name() + " --help";
    return report(e.what() + std::string(" (see ") + help + ")", 2);
  }

  for (auto& command : commands)
    if (command.app->parsed()) return command.run();
  return report("no subcommand given (see vkattn --help)", 2);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const vkattn::cli::UsageError& e) {
    return report(e.what(), 2);
  } catch (const vkattn::Error& e) {
    return report(e.what(), 1);
  } catch (const std::bad_alloc&) {
    return report("out of host memory (the problem or an input file is too large for this machine)", 1);
  } catch (const std::exception& e) {
    return report(e.what(), 1);
  } catch (...) {
    return report("unknown failure", 1);
  }
}
