// Output files that appear whole or not at all. `vkattn run` writes O and LSE only after every step
// succeeded; each goes to a temporary name in the target directory first and is renamed into place,
// so an interrupted or failed run never leaves a partial .npy where a user (or a script) expects one.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace vkattn::cli {

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  // Removes any temporary file not yet committed.
  ~OutputFiles();

  // Throws vkattn::Error naming `path` when it cannot be written: its directory is missing or it is
  // a directory. Called before any work, so a typo in --out fails in milliseconds, not after a run.
  static void check_destination(const std::string& path);
  // Checks every (flag, path) with a non-empty path (check_destination) and that no two flags name the
  // same file; throws vkattn::Error naming both flags.
  static void check_destinations(const std::vector<std::pair<std::string, std::string>>& flag_paths);
  // Writes `bytes` to a temporary file next to `path` (throws vkattn::Error naming `path`).
  void stage(const std::string& path, std::span<const std::byte> bytes);
  // For writers that want a file name rather than bytes (libpng): `write` is called with the
  // temporary name to create. Its errors are rethrown naming `path` instead of the temporary.
  void stage_with(const std::string& path, const std::function<void(const std::string& temp)>& write);
  // Renames every staged file to its final name.
  void commit();

 private:
  struct Staged {
    std::string temp, path;
  };
  std::string temp_name(const std::string& path) const;
  std::vector<Staged> staged_;
};

}  // namespace vkattn::cli
