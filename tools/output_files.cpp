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

std::string OutputFiles::temp_name(const std::string& path) const {
  // Same directory as the target so the rename cannot cross file systems; the pid keeps two
  // concurrent runs writing the same output from sharing a temporary.
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(staged_.size());
}

void OutputFiles::check_destinations(const std::vector<std::pair<std::string, std::string>>& flag_paths) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, fs::path>> seen;  // flag, normalised path
  for (const auto& [flag, path] : flag_paths) {
    if (path.empty()) continue;
    check_destination(path);
    std::error_code ec;
    fs::path normal = fs::weakly_canonical(path, ec);
    if (ec) normal = fs::path(path).lexically_normal();
    for (const auto& [other_flag, other] : seen)
      if (other == normal) throw Error(other_flag + " and " + flag + " name the same file (" + path + ")");
    seen.emplace_back(flag, normal);
  }
}

void OutputFiles::stage(const std::string& path, std::span<const std::byte> bytes) {
  const std::string temp = temp_name(path);
  staged_.push_back({temp, path});
  std::ofstream file(temp, std::ios::binary | std::ios::trunc);
  if (!file) throw Error(path + ": cannot write: " + std::strerror(errno));
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) throw Error(path + ": write failed (disk full?)");
}

void OutputFiles::stage_with(const std::string& path, const std::function<void(const std::string& temp)>& write) {
  const std::string temp = temp_name(path);
  staged_.push_back({temp, path});
  try {
    write(temp);
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.compare(0, temp.size(), temp) == 0) message.replace(0, temp.size(), path);
    throw Error(message);
  }
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
