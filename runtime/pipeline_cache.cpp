#include "pipeline_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "vkattn/error.hpp"

namespace vkattn::detail {

namespace {

constexpr char kMagic[8] = {'V', 'K', 'A', 'T', 'T', 'N', 'P', 'C'};
constexpr uint32_t kFormatVersion = 1;

struct FileHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t payload_size;
  uint64_t payload_hash;
};
static_assert(sizeof(FileHeader) == 32);

uint64_t fnv1a(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

}  // namespace

bool pipeline_cache_data_matches(std::span<const uint8_t> data, const VkPhysicalDeviceProperties& device) {
  VkPipelineCacheHeaderVersionOne header;
  static_assert(sizeof header == 16 + VK_UUID_SIZE);
  if (data.size() < sizeof header) return false;
  std::memcpy(&header, data.data(), sizeof header);
  return header.headerSize >= sizeof header && header.headerSize <= data.size() &&
         header.headerVersion == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && header.vendorID == device.vendorID &&
         header.deviceID == device.deviceID &&
         std::memcmp(header.pipelineCacheUUID, device.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

std::vector<uint8_t> read_pipeline_cache_file(const std::string& path, const VkPhysicalDeviceProperties& device,
                                              std::string& note) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    note = "no pipeline cache file '" + path + "': starting empty";
    return {};
  }
  std::vector<uint8_t> bytes;
  try {
    std::ifstream in;
    if (status.type() == std::filesystem::file_type::regular) in.open(path, std::ios::binary);
    if (!in.is_open()) {
      note = "pipeline cache file '" + path + "' is not a readable file: ignored";
      return {};
    }
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw std::ios_base::failure("read");
  } catch (const std::exception&) {  // std::bad_alloc included: a cache is never worth failing for
    note = "pipeline cache file '" + path + "' could not be read: ignored";
    return {};
  }
  FileHeader header;
  if (bytes.size() < sizeof header || (std::memcpy(&header, bytes.data(), sizeof header),
                                       std::memcmp(header.magic, kMagic, sizeof kMagic) != 0)) {
    note = "'" + path + "' is not a vkattn pipeline cache file: ignored";
    return {};
  }
  const std::span<const uint8_t> payload = std::span<const uint8_t>(bytes).subspan(sizeof header);
  if (header.format_version != kFormatVersion) {
    note = "pipeline cache file '" + path + "' has format version " + std::to_string(header.format_version) +
           " (expected " + std::to_string(kFormatVersion) + "): ignored";
    return {};
  }
  if (header.payload_size != payload.size() || fnv1a(payload) != header.payload_hash) {
    note = "pipeline cache file '" + path + "' is truncated or corrupt: ignored";
    return {};
  }
  if (!pipeline_cache_data_matches(payload, device)) {
    note = "pipeline cache file '" + path + "' was written for another device or driver: ignored";
    return {};
  }
  note = "loaded pipeline cache file '" + path + "' (" + std::to_string(payload.size()) + " bytes)";
  return {payload.begin(), payload.end()};
}

namespace {

// Where a cache file may be written: the name to rename over (a symlink is followed, so the link
// stays a link and its target gets the cache) and the permission bits the file gets. Refuses — before
// anything is written — a path naming something that is not a regular file (a device or FIFO would
// be replaced by a regular file otherwise), an existing file this process may not write, and one
// with no write permission bit at all (a protection, honoured even for root).
struct CacheDestination {
  std::string final;
  mode_t mode = 0666;
  bool replace = false;
};

CacheDestination cache_destination(const std::string& path) {
  namespace fs = std::filesystem;
  auto refuse = [&](const std::string& why) { throw Error("save_pipeline_cache: '" + path + "' " + why); };
  CacheDestination d;
  std::error_code ec;
  d.final = path;
  if (fs::is_symlink(fs::symlink_status(path, ec))) {
    const fs::path resolved = fs::weakly_canonical(path, ec);
    if (ec) refuse("is a symlink that cannot be resolved: " + ec.message());
    d.final = resolved.string();
  }
  struct stat st {};
  if (::stat(d.final.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) refuse("is not a regular file; a pipeline cache is written to a file");
    if ((st.st_mode & 0222) == 0 || ::access(d.final.c_str(), W_OK) != 0)
      refuse("is not writable by this process; it was left unchanged");
    d.mode = st.st_mode & 07777;
    d.replace = true;
  } else if (errno != ENOENT) {
    refuse(std::string("cannot be inspected: ") + std::strerror(errno));
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    d.mode = 0666 & ~mask;
  }
  return d;
}

}  // namespace

void write_pipeline_cache_file(const std::string& path, std::span<const uint8_t> payload) {
  if (path.empty()) throw Error("save_pipeline_cache: the path is empty");
  FileHeader header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.format_version = kFormatVersion;
  header.payload_size = payload.size();
  header.payload_hash = fnv1a(payload);

  const CacheDestination destination = cache_destination(path);
  // The temporary file sits next to the target so that the rename stays within one file system;
  // mkstemp gives it a name no other process (or thread) is using.
  const std::filesystem::path final_path(destination.final);
  std::string tmp = (final_path.has_parent_path() ? final_path.parent_path() : std::filesystem::path("."))
                        .append("." + final_path.filename().string() + ".vkattn-XXXXXX")
                        .string();
  auto fail = [&](const std::string& what, bool created) {
    const std::string reason = errno ? std::string(": ") + std::strerror(errno) : std::string();
    if (created) ::unlink(tmp.c_str());
    throw Error("save_pipeline_cache: cannot " + what + reason);
  };
  errno = 0;
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail("create a temporary file for '" + path + "'", false);
  ::fchmod(fd, destination.mode);
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    fail("write '" + tmp + "' (for '" + path + "')", true);
  }
  const bool written = std::fwrite(&header, sizeof header, 1, f) == 1 &&
                       (payload.empty() || std::fwrite(payload.data(), payload.size(), 1, f) == 1) &&
                       std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int saved_errno = errno;
  const bool closed = std::fclose(f) == 0;
  errno = written ? errno : saved_errno;
  if (!written || !closed) fail("write '" + tmp + "' (for '" + path + "')", true);
  errno = 0;
  if (std::rename(tmp.c_str(), destination.final.c_str()) != 0)
    fail("rename '" + tmp + "' to '" + destination.final + "'", true);
}

}  // namespace vkattn::detail
