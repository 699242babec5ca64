// Output files that appear whole or not at all. `vkattn run` writes O and LSE only after every step
// succeeded; each goes to a temporary name in the target directory first and is renamed into place,
// so an interrupted or failed run never leaves a partial .npy where a user (or a script) expects one.
#pragma once

#include <cstddef>
#include <span>
#include <string>
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
  // Writes `bytes` to a temporary file next to `path` (throws vkattn::Error naming `path`).
  void stage(const std::string& path, std::span<const std::byte> bytes);
  // Renames every staged file to its final name.
  void commit();

 private:
  struct Staged {
    std::string temp, path;
  };
  std::vector<Staged> staged_;
};

}  // namespace vkattn::cli
