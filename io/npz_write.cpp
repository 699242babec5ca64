// The ZIP layout (APPNOTE.TXT), stored members only: per member a local header (PK\3\4), its name and
// data; then the central directory (PK\1\2 per member) and the end record (PK\5\6). Times are the
// DOS epoch (1980-01-01), so the same arrays give the same bytes.
#include "npz_write.hpp"

#include <zlib.h>

#include <cstdint>
#include <limits>
#include <set>

#include "vkattn/error.hpp"

namespace vkattn::npz {
namespace {

void put16(std::vector<std::byte>& out, uint32_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(std::byte((v >> (8 * i)) & 0xff));
}
void put32(std::vector<std::byte>& out, uint64_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(std::byte((v >> (8 * i)) & 0xff));
}
void put(std::vector<std::byte>& out, const std::string& s) {
  for (char c : s) out.push_back(std::byte(static_cast<unsigned char>(c)));
}

// The fields a local header and a central record share, from "version needed" to the name's length.
void common(std::vector<std::byte>& out, uint32_t crc, uint64_t size, const std::string& name) {
  put16(out, 20);         // version needed: 2.0
  put16(out, 0);          // flags
  put16(out, 0);          // method: stored
  put16(out, 0);          // time 00:00:00
  put16(out, (0 << 9) | (1 << 5) | 1);  // date 1980-01-01
  put32(out, crc);
  put32(out, size);       // compressed
  put32(out, size);       // uncompressed
  put16(out, uint32_t(name.size()));
  put16(out, 0);          // extra field length
}

}  // namespace

std::vector<std::byte> serialize(const std::vector<Member>& members) {
  constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
  std::set<std::string> names;
  std::vector<std::byte> out, directory;
  for (const auto& [array, data] : members) {
    if (array.empty()) throw Error("npz: an array has an empty name");
    if (!names.insert(array).second) throw Error("npz: array '" + array + "' given twice");
    const std::string name = array + ".npy";
    const uint64_t at = out.size();
    if (data.size() >= kMax || at >= kMax || name.size() > 0xffff)
      throw Error("npz: the archive outgrows 4 GiB at array '" + array + "' (ZIP64 is not written)");
    const uint32_t crc =
        static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data.data()), data.size()));
    put32(out, 0x04034b50);
    common(out, crc, data.size(), name);
    put(out, name);
    out.insert(out.end(), data.begin(), data.end());

    put32(directory, 0x02014b50);
    put16(directory, 20);  // version made by: 2.0, MS-DOS attributes
    common(directory, crc, data.size(), name);
    put16(directory, 0);   // comment length
    put16(directory, 0);   // disk number
    put16(directory, 0);   // internal attributes
    put32(directory, 0);   // external attributes
    put32(directory, at);  // the local header's offset
    put(directory, name);
  }
  const uint64_t directory_at = out.size();
  if (directory_at + directory.size() >= kMax || members.size() > 0xffff)
    throw Error("npz: the archive outgrows 4 GiB or 65535 arrays (ZIP64 is not written)");
  out.insert(out.end(), directory.begin(), directory.end());
  put32(out, 0x06054b50);
  put16(out, 0);  // this disk
  put16(out, 0);  // the directory's disk
  put16(out, uint32_t(members.size()));
  put16(out, uint32_t(members.size()));
  put32(out, directory.size());
  put32(out, directory_at);
  put16(out, 0);  // comment length
  return out;
}

}  // namespace vkattn::npz
