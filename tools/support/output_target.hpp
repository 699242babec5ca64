// What an output path names, and so how an output may be written there without harming what the
// caller owns. A missing path or a regular file is replaced atomically (a temporary in the same
// directory renamed over it); a symlink is followed first, so the link stays a link and its target
// gets the new contents. A character device or a FIFO is written through, as `cp x /dev/null` does;
// it is never replaced by a regular file. Anything else (a directory, a block device, a socket), an
// existing file this user may not write or that has no write permission bit at all (mode 0444: a
// protection, honoured even for root), and a file in a sticky directory that rename(2) would refuse
// to replace are refused with an Error naming the path.
#pragma once

#include <sys/types.h>

#include <string>

namespace vkattn::cli {

struct OutputTarget {
  enum class Kind { create, replace, write_through };
  Kind kind = Kind::create;
  std::string path;      // as given (write-through opens this: /dev/fd/N works that way)
  std::string final;     // create/replace: the name renamed over, symlinks resolved
  mode_t mode = 0;       // replace: the existing file's permission bits, kept
  uid_t uid = 0;         // replace: its owner, kept when running as root
  gid_t gid = 0;
  bool exists = false;   // replace/write_through: st_dev/st_ino are meaningful
  dev_t dev = 0;
  ino_t ino = 0;
};

// Throws vkattn::Error naming `path` when an output cannot be written there (see above).
OutputTarget inspect_output(const std::string& path);

}  // namespace vkattn::cli
