#include "output_target.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& path, const std::string& why) { throw Error(path + ": " + why); }

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Follows symlinks in the last component (a dangling link resolves to the name it points at, which
// the output then creates), so the rename replaces the link's target and never the link itself.
std::string resolve_links(const std::string& path) {
  fs::path current(path);
  for (int hops = 0; hops < 40; ++hops) {  // Linux's MAXSYMLINKS
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current.string();
    std::error_code ec;
    const fs::path target = fs::read_symlink(current, ec);
    if (ec) refuse(path, "cannot read symlink " + current.string() + ": " + ec.message());
    current = target.is_absolute() ? target : current.parent_path() / target;
  }
  refuse(path, "too many levels of symbolic links");
}

// The directory the rename happens in must exist and be writable; with the sticky bit (/tmp) only
// the owner of the file or of the directory (or root) may replace an existing file.
void check_directory(const std::string& path, const fs::path& final, const struct stat* existing) {
  const fs::path parent = final.has_parent_path() ? final.parent_path() : fs::path(".");
  struct stat dir {};
  if (::stat(parent.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode))
    refuse(path, "directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK | X_OK) != 0) refuse(path, "directory " + parent.string() + " is not writable");
  const uid_t me = ::geteuid();
  if (existing && (dir.st_mode & S_ISVTX) && me != 0 && existing->st_uid != me && dir.st_uid != me)
    refuse(path, "owned by another user in the sticky directory " + parent.string() + "; refusing to replace it");
}

}  // namespace

OutputTarget inspect_output(const std::string& path) {
  if (path.empty()) throw Error("output path is empty");
  OutputTarget t;
  t.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) refuse(path, std::string("cannot write: ") + std::strerror(errno));
    t.kind = OutputTarget::Kind::create;
    t.final = resolve_links(path);
    check_directory(path, t.final, nullptr);
    return t;
  }
  t.exists = true;
  t.dev = st.st_dev;
  t.ino = st.st_ino;
  if (S_ISDIR(st.st_mode)) refuse(path, "is a directory");
  if (S_ISBLK(st.st_mode)) refuse(path, "is a block device; outputs go to regular files, character devices or FIFOs");
  if (S_ISSOCK(st.st_mode)) refuse(path, "is a socket; outputs go to regular files, character devices or FIFOs");
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    if (::access(path.c_str(), W_OK) != 0) refuse(path, std::string("cannot write: ") + std::strerror(errno));
    t.kind = OutputTarget::Kind::write_through;
    return t;
  }
  if (!S_ISREG(st.st_mode)) refuse(path, "is not a regular file, character device or FIFO");
  // A file with no write bit is someone's protection: root could write it, but a tool should not.
  if ((st.st_mode & 0222) == 0)
    refuse(path, "is read-only (mode " + octal(st.st_mode) + "); refusing to replace it");
  if (::access(path.c_str(), W_OK) != 0)
    refuse(path, "exists and is not writable by this user (mode " + octal(st.st_mode) + "); refusing to replace it");
  t.kind = OutputTarget::Kind::replace;
  t.final = resolve_links(path);
  t.mode = st.st_mode & 07777;
  t.uid = st.st_uid;
  t.gid = st.st_gid;
  check_directory(path, t.final, &st);
  return t;
}

}  // namespace vkattn::cli
