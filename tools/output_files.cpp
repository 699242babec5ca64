#include "output_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "vkattn/error.hpp"

namespace vkattn::cli {

OutputFiles::~OutputFiles() {
  for (const Staged& s : staged_) std::remove(s.temp.c_str());
}

void OutputFiles::check_destination(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (path.empty()) throw Error("output path is empty");
  if (fs::is_directory(target, ec)) throw Error(path + ": is a directory");
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) throw Error(path + ": directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK) != 0) throw Error(path + ": directory " + parent.string() + " is not writable");
}

void OutputFiles::stage(const std::string& path, std::span<const std::byte> bytes) {
  // Same directory as the target so the rename cannot cross file systems; the pid keeps two
  // concurrent runs writing the same output from sharing a temporary.
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(staged_.size());
  staged_.push_back({temp, path});
  std::ofstream file(temp, std::ios::binary | std::ios::trunc);
  if (!file) throw Error(path + ": cannot write: " + std::strerror(errno));
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) throw Error(path + ": write failed (disk full?)");
}

void OutputFiles::commit() {
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    if (std::rename(staged_[i].temp.c_str(), staged_[i].path.c_str()) != 0) {
      const int error = errno;
      staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i));
      throw Error(staged_.front().path + ": cannot rename into place: " + std::strerror(error));
    }
  }
  staged_.clear();
}

}  // namespace vkattn::cli
