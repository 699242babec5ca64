#include "output_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

namespace fs = std::filesystem;

std::string errno_text() { return std::strerror(errno); }

// The mode a new file gets from open(2) (0666 less the umask), which mkstemp's 0600 would not give.
mode_t new_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

bool write_all(int fd, const std::byte* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Copies the staged temporary into an open device/FIFO.
bool copy_to(const std::string& temp, int out) {
  const int in = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return false;
  std::byte buffer[1 << 16];
  bool ok = true;
  while (ok) {
    const ssize_t n = ::read(in, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    ok = write_all(out, buffer, static_cast<std::size_t>(n));
  }
  const int saved = errno;
  ::close(in);
  errno = saved;
  return ok;
}

bool same_file(const OutputTarget& a, const OutputTarget& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  if (a.exists != b.exists) return false;
  std::error_code ec;
  const fs::path x = fs::weakly_canonical(a.final, ec), y = fs::weakly_canonical(b.final, ec);
  return x == y;
}

}  // namespace

OutputFiles::~OutputFiles() {
  for (const Staged& s : staged_) {
    if (s.fd >= 0) ::close(s.fd);
    if (!s.temp.empty() && !s.renamed) ::unlink(s.temp.c_str());
    if (!s.backup.empty()) ::unlink(s.backup.c_str());
  }
}

void OutputFiles::check_destination(const std::string& path) { inspect_output(path); }

void OutputFiles::check_destinations(const FlagPaths& outputs, const FlagPaths& inputs) {
  std::vector<std::pair<std::string, OutputTarget>> seen;
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    OutputTarget target = inspect_output(path);
    // Two outputs written through to one device or FIFO (`--out /dev/null --lse /dev/null`) are
    // written one after the other, as `cat a b > /dev/null` would; two renamed over one file would
    // lose the first.
    const bool both_write_through = target.kind == OutputTarget::Kind::write_through;
    for (const auto& [other_flag, other] : seen)
      if (!both_write_through && same_file(other, target))
        throw Error(other_flag + " and " + flag + " name the same file (" + path + ")");
    seen.emplace_back(flag, std::move(target));
  }
  for (const auto& [flag, path] : inputs) {
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0) continue;  // reading it will say what is wrong
    for (const auto& [out_flag, out] : seen)
      if (out.exists && out.dev == st.st_dev && out.ino == st.st_ino)
        throw Error(out_flag + " (" + out.path + ") and " + flag + " (" + path +
                    ") name the same file; refusing to overwrite an input");
  }
}

OutputFiles::Staged& OutputFiles::add(const std::string& path) {
  Staged s;
  s.target = inspect_output(path);
  // Same directory as the final name, so the rename stays within one file system; a device or FIFO
  // is written from a temporary in $TMPDIR (its own directory, /dev, is not ours to write).
  std::string pattern;
  if (s.target.kind == OutputTarget::Kind::write_through) {
    pattern = (fs::temp_directory_path() / "vkattn-out-XXXXXX").string();
  } else {
    const fs::path final(s.target.final);
    const fs::path dir = final.has_parent_path() ? final.parent_path() : fs::path(".");
    std::string name = ".";  // hidden, and named after its output for whoever finds one left over
    name += final.filename().string();
    name += ".vkattn-XXXXXX";
    pattern = (dir / name).string();
  }
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw Error(path + ": cannot create a temporary file " + pattern + ": " + errno_text());
  s.temp = pattern;
  staged_.push_back(std::move(s));
  Staged& staged = staged_.back();
  // A replaced file keeps its permissions (and, for root, its owner); a new one gets open(2)'s.
  const bool replace = staged.target.kind == OutputTarget::Kind::replace;
  ::fchmod(fd, replace ? staged.target.mode : new_file_mode());
  if (replace && ::geteuid() == 0 && ::fchown(fd, staged.target.uid, staged.target.gid) != 0) {
    // Best effort: the contents matter more than the owner.
  }
  ::close(fd);
  return staged;
}

void OutputFiles::stage(const std::string& path, std::span<const std::byte> bytes) {
  const Staged& s = add(path);
  const int fd = ::open(s.temp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot write: " + errno_text());
  const bool ok = write_all(fd, bytes.data(), bytes.size());
  const int saved = errno;
  if (::close(fd) != 0 || !ok) throw Error(path + ": write failed: " + std::strerror(ok ? errno : saved));
}

void OutputFiles::stage_with(const std::string& path, const std::function<void(const std::string& temp)>& write) {
  const std::string temp = add(path).temp;
  try {
    write(temp);
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.compare(0, temp.size(), temp) == 0) message.replace(0, temp.size(), path);
    throw Error(message);
  }
}

void OutputFiles::roll_back() {
  for (Staged& s : staged_) {
    if (!s.renamed) continue;
    if (!s.backup.empty()) {
      if (::rename(s.backup.c_str(), s.target.final.c_str()) == 0) s.backup.clear();
    } else {
      ::unlink(s.target.final.c_str());
    }
    s.renamed = false;
    s.temp.clear();  // it is gone: renamed into place, then replaced or removed
  }
}

void OutputFiles::commit() {
  // 1. Nothing changes yet: every destination is checked again (the run may have taken minutes),
  //    every device/FIFO is opened and every existing file gets a backup link.
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    Staged& s = staged_[i];
    const OutputTarget now = inspect_output(s.target.path);
    if (now.kind != s.target.kind || now.final != s.target.final)
      throw Error(s.target.path + ": changed while the command ran; nothing was written");
    if (now.kind == OutputTarget::Kind::write_through) {
      s.fd = ::open(now.path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (s.fd < 0 && errno == ENXIO)
        throw Error(now.path + ": is a FIFO with no reader (start the reader first); nothing was written");
      if (s.fd < 0) throw Error(now.path + ": cannot open for writing: " + errno_text() + "; nothing was written");
      ::fcntl(s.fd, F_SETFL, ::fcntl(s.fd, F_GETFL) & ~O_NONBLOCK);  // a slow reader is waited for
    } else if (now.kind == OutputTarget::Kind::replace) {
      const std::string backup = s.temp + ".old";
      if (::link(now.final.c_str(), backup.c_str()) != 0)
        throw Error(now.path + ": cannot keep a backup while replacing it (" + errno_text() + "); nothing was written");
      s.backup = backup;
    }
  }
  // 2. The renames; a failure puts back every file renamed over so far.
  for (Staged& s : staged_) {
    if (s.target.kind == OutputTarget::Kind::write_through) continue;
    if (::rename(s.temp.c_str(), s.target.final.c_str()) != 0) {
      const std::string error = errno_text();
      roll_back();
      throw Error(s.target.path + ": cannot rename into place: " + error + "; no output was changed");
    }
    s.renamed = true;
  }
  // 3. The devices/FIFOs last: what they received cannot be taken back. A reader that goes away is
  //    an error here, not a SIGPIPE that would end the process with the renames half undone.
  const auto old_handler = std::signal(SIGPIPE, SIG_IGN);
  for (Staged& s : staged_) {
    if (s.fd < 0) continue;
    const bool ok = copy_to(s.temp, s.fd);
    const std::string error = errno_text();
    if (::close(s.fd) != 0 && ok) {
      s.fd = -1;
      roll_back();
      std::signal(SIGPIPE, old_handler);
      throw Error(s.target.path + ": write failed: " + errno_text() + "; the other outputs were left unchanged");
    }
    s.fd = -1;
    if (!ok) {
      roll_back();
      std::signal(SIGPIPE, old_handler);
      throw Error(s.target.path + ": write failed: " + error + "; the other outputs were left unchanged");
    }
  }
  std::signal(SIGPIPE, old_handler);
  // 4. Done: the backups and the devices' temporaries go (the destructor removes them).
  for (Staged& s : staged_)
    if (s.renamed) s.temp.clear();
}

}  // namespace vkattn::cli
