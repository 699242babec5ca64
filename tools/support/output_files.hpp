// Output files that appear whole or not at all, and all of a command's outputs or none of them.
// `vkattn run` writes O and LSE only after every step succeeded. Each output is staged in a
// temporary file first; commit() then checks every destination again, opens every character
// device/FIFO (a FIFO without a reader is refused rather than waited on), links each existing
// regular file to a backup name, renames the staged files into place and finally writes through
// the devices/FIFOs. When any step fails, the renames already done are undone from the backups, so a
// failed command leaves every pre-existing output file unchanged (bytes already written through to
// a device or FIFO cannot be taken back). How each kind of path is treated: output_target.hpp.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "output_target.hpp"

namespace vkattn::cli {

// (flag, path) pairs, e.g. {"--out", "o.npy"}; an empty path means the option was not given.
using FlagPaths = std::vector<std::pair<std::string, std::string>>;

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  // Removes any temporary file or backup not yet committed, and undoes nothing else.
  ~OutputFiles();

  // Throws vkattn::Error naming `path` when an output cannot be written there (inspect_output).
  // Called before any work, so a typo in --out fails in milliseconds, not after a run.
  static void check_destination(const std::string& path);
  // Checks every output with a non-empty path, that no two outputs name the same file, and that no
  // output names an existing input (same device and inode: through ./, a symlink or a hard link);
  // throws vkattn::Error naming both flags.
  static void check_destinations(const FlagPaths& outputs, const FlagPaths& inputs = {});
  // Writes `bytes` to a temporary file for `path` (throws vkattn::Error naming `path`).
  void stage(const std::string& path, std::span<const std::byte> bytes);
  // For writers that want a file name rather than bytes (libpng): `write` is called with the
  // temporary name to fill. Its errors are rethrown naming `path` instead of the temporary.
  void stage_with(const std::string& path, const std::function<void(const std::string& temp)>& write);
  // Puts every staged output in place, all or none (see above).
  void commit();

 private:
  struct Staged {
    OutputTarget target;
    std::string temp;
    std::string backup;  // replace: a hard link to the old file while committing
    int fd = -1;         // write_through: the device/FIFO, opened before anything changes
    bool renamed = false;
  };
  Staged& add(const std::string& path);
  void roll_back();
  std::vector<Staged> staged_;
};

}  // namespace vkattn::cli
