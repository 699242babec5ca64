// .npz reader. Layout of a ZIP archive (APPNOTE.TXT): for each member a local file header
// (signature PK\3\4), its name, an extra field and the (possibly compressed) data; then the central
// directory, one record per member (PK\1\2) with the authoritative method, CRC-32 and sizes and the
// offset of the local header; then the end of central directory record (PK\5\6), preceded by a
// ZIP64 end record (PK\6\6) and its locator (PK\6\7) when a count or offset outgrows 16/32 bits.
// Sizes and offsets that do not fit 32 bits are 0xFFFFFFFF with the real value in the ZIP64 extra
// field (id 0x0001). numpy writes every member with force_zip64, so its local headers always carry
// that field while the central directory only does for large members.
#include "npz.hpp"
#include "npy_header.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "vkattn/error.hpp"

namespace vkattn::npz {
namespace {

constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::size_t kLocalSize = 30;
constexpr std::size_t kCentralSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr uint64_t kMaxDeflateRatio = 1032;

[[noreturn]] void fail(std::string_view name, const std::string& what) {
  throw Error(std::string(name) + ": " + what);
}

// Bounds-checked little-endian reads over the whole archive.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::string_view name) : bytes_(bytes), name_(name) {}

  std::size_t size() const { return bytes_.size(); }
  bool fits(uint64_t offset, uint64_t count) const {
    return offset <= bytes_.size() && count <= bytes_.size() - offset;
  }
  void need(uint64_t offset, uint64_t count, const std::string& what) const {
    if (!fits(offset, count)) fail(name_, "truncated archive (" + what + " lies past the end of the file)");
  }
  uint64_t le(uint64_t offset, std::size_t count) const {
    uint64_t value = 0;
    for (std::size_t i = 0; i < count; ++i) value |= static_cast<uint64_t>(bytes_[offset + i]) << (8 * i);
    return value;
  }
  uint16_t u16(uint64_t offset) const { return static_cast<uint16_t>(le(offset, 2)); }
  uint32_t u32(uint64_t offset) const { return static_cast<uint32_t>(le(offset, 4)); }
  uint64_t u64(uint64_t offset) const { return le(offset, 8); }
  std::span<const std::byte> span(uint64_t offset, uint64_t count) const {
    return bytes_.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(count));
  }
  std::string_view text(uint64_t offset, uint64_t count) const {
    return {reinterpret_cast<const char*>(bytes_.data()) + offset, static_cast<std::size_t>(count)};
  }

 private:
  std::span<const std::byte> bytes_;
  std::string_view name_;
};

struct Directory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Finds the end of central directory record (searching back over a comment of up to 64 KiB) and,
// when present, the ZIP64 end record it points to.
Directory find_directory(const Reader& r, std::string_view name) {
  if (r.size() < kEndSize) fail(name, "not a zip archive (too short for an end of central directory record)");
  std::size_t end = 0;
  bool found = false;
  const std::size_t lowest = r.size() - kEndSize > 0xffff ? r.size() - kEndSize - 0xffff : 0;
  for (std::size_t pos = r.size() - kEndSize + 1; pos-- > lowest;) {
    if (r.u32(pos) == kEndSignature && pos + kEndSize + r.u16(pos + 20) == r.size()) {
      end = pos;
      found = true;
      break;
    }
  }
  if (!found) fail(name, "not a zip archive (no end of central directory record; truncated?)");

  if (r.u16(end + 4) != 0 || r.u16(end + 6) != 0) fail(name, "multi-disk zip archives are not supported");
  Directory d;
  d.entries = r.u16(end + 10);
  d.size = r.u32(end + 12);
  d.offset = r.u32(end + 16);
  if (r.u16(end + 8) != d.entries) fail(name, "malformed zip archive (inconsistent entry counts)");

  // ZIP64: the locator sits right before the end record.
  if (end >= kZip64LocatorSize && r.u32(end - kZip64LocatorSize) == kZip64LocatorSignature) {
    const uint64_t locator = end - kZip64LocatorSize;
    if (r.u32(locator + 4) != 0 || r.u32(locator + 16) > 1) fail(name, "multi-disk zip archives are not supported");
    const uint64_t record = r.u64(locator + 8);
    r.need(record, kZip64EndSize, "the ZIP64 end of central directory record");
    if (record + kZip64EndSize > locator || r.u32(record) != kZip64EndSignature)
      fail(name, "malformed zip archive (bad ZIP64 end of central directory record)");
    if (r.u32(record + 16) != 0 || r.u32(record + 20) != 0) fail(name, "multi-disk zip archives are not supported");
    d.entries = r.u64(record + 32);
    if (r.u64(record + 24) != d.entries) fail(name, "malformed zip archive (inconsistent entry counts)");
    d.size = r.u64(record + 40);
    d.offset = r.u64(record + 48);
  } else if (d.entries == 0xffff || d.size == 0xffffffff || d.offset == 0xffffffff) {
    fail(name, "malformed zip archive (ZIP64 values without a ZIP64 end of central directory record)");
  }
  r.need(d.offset, d.size, "the central directory");
  if (d.offset + d.size > end) fail(name, "malformed zip archive (central directory overlaps its end record)");
  if (d.entries > d.size / kCentralSize) fail(name, "malformed zip archive (entry count does not fit the central directory)");
  return d;
}

struct Entry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_offset = 0;
};

// Replaces the 0xFFFFFFFF placeholders of `e` with the values of its ZIP64 extra field (id 1), which
// holds, in this order, only the fields whose 32-bit value is the placeholder.
void apply_zip64_extra(const Reader& r, uint64_t extra, uint64_t extra_size, Entry& e, bool offset_too,
                       const std::string& where) {
  const bool need_u = e.uncompressed == 0xffffffff, need_c = e.compressed == 0xffffffff;
  const bool need_o = offset_too && e.local_offset == 0xffffffff;
  uint64_t pos = extra;
  const uint64_t stop = extra + extra_size;
  while (stop - pos >= 4) {
    const uint16_t id = r.u16(pos);
    const uint16_t size = r.u16(pos + 2);
    if (size > stop - pos - 4) fail(where, "malformed zip extra field");
    if (id == 0x0001) {
      uint64_t field = pos + 4;
      const uint64_t field_end = field + size;
      auto take = [&](uint64_t& value) {
        if (field_end - field < 8) fail(where, "malformed ZIP64 extra field (too short)");
        value = r.u64(field);
        field += 8;
      };
      if (need_u) take(e.uncompressed);
      if (need_c) take(e.compressed);
      if (need_o) take(e.local_offset);
      return;
    }
    pos += 4 + size;
  }
  if (need_u || need_c || need_o) fail(where, "malformed zip entry (32-bit size placeholder without a ZIP64 extra field)");
}

std::string entry_label(std::string_view archive, std::string_view entry) {
  return std::string(archive) + ": entry '" + npy::printable(entry) + "'";
}

// Inflates a raw deflate stream into exactly `expected` bytes; more, fewer, trailing input or a
// corrupt stream is an Error. The output buffer is the declared size plus one spare byte that only
// a stream longer than declared can reach.
std::vector<std::byte> inflate_member(std::span<const std::byte> in, uint64_t expected, const std::string& where) {
  std::vector<std::byte> out(static_cast<std::size_t>(expected) + 1);
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) fail(where, "zlib inflateInit2 failed");
  constexpr std::size_t kChunk = std::size_t{1} << 30;  // avail_in / avail_out are 32-bit
  std::size_t in_pos = 0, out_pos = 0;
  std::string error;
  while (true) {
    if (z.avail_in == 0 && in_pos < in.size()) {
      const std::size_t chunk = std::min(in.size() - in_pos, kChunk);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + in_pos));
      z.avail_in = static_cast<uInt>(chunk);
      in_pos += chunk;
    }
    if (z.avail_out == 0 && out_pos < out.size()) {
      const std::size_t chunk = std::min(out.size() - out_pos, kChunk);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
      z.avail_out = static_cast<uInt>(chunk);
      out_pos += chunk;
    }
    const int status = inflate(&z, Z_NO_FLUSH);
    if (z.total_out > expected) {
      error = "decompressed data exceeds the declared size of " + std::to_string(expected) + " bytes";
      break;
    }
    if (status == Z_STREAM_END) {
      if (z.avail_in != 0 || in_pos < in.size()) error = "data after the end of the deflate stream";
      else if (z.total_out != expected)
        error = "decompressed size " + std::to_string(z.total_out) + " does not match the declared " +
                std::to_string(expected) + " bytes";
      break;
    }
    if (status == Z_BUF_ERROR && z.avail_in == 0 && in_pos >= in.size()) {
      error = "truncated deflate stream";
      break;
    }
    if (status != Z_OK && status != Z_BUF_ERROR) {
      error = std::string("corrupt deflate stream (") + (z.msg ? z.msg : "zlib error " + std::to_string(status)) + ")";
      break;
    }
    if (status == Z_BUF_ERROR && z.avail_in != 0 && z.avail_out != 0) {
      error = "corrupt deflate stream (no progress)";
      break;
    }
  }
  inflateEnd(&z);
  if (!error.empty()) fail(where, error);
  out.pop_back();
  return out;
}

// The first min(`want`, all) bytes of a raw deflate stream, for reading a member's .npy header
// before inflating the rest; a corrupt stream just gives fewer bytes (the full inflate says why).
std::vector<std::byte> inflate_prefix(std::span<const std::byte> in, std::size_t want) {
  std::vector<std::byte> out(want);
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) return {};
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  std::size_t in_pos = 0;
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(want);
  while (z.avail_out > 0) {
    if (z.avail_in == 0) {
      if (in_pos >= in.size()) break;
      const std::size_t chunk = std::min(in.size() - in_pos, kChunk);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + in_pos));
      z.avail_in = static_cast<uInt>(chunk);
      in_pos += chunk;
    }
    const int status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK) break;
  }
  out.resize(static_cast<std::size_t>(z.total_out));
  inflateEnd(&z);
  return out;
}

uint32_t crc_of(std::span<const std::byte> data) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  return static_cast<uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

}  // namespace

Arrays parse(std::span<const std::byte> bytes, std::string_view name, const NameCheck& check_name) {
  const Reader r(bytes, name);
  const Directory dir = find_directory(r, name);

  // The central directory, record by record.
  std::vector<Entry> entries;
  entries.reserve(static_cast<std::size_t>(dir.entries));
  uint64_t pos = dir.offset;
  const uint64_t dir_end = dir.offset + dir.size;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    if (dir_end - pos < kCentralSize || r.u32(pos) != kCentralSignature)
      fail(name, "malformed zip archive (bad central directory record " + std::to_string(i) + ")");
    Entry e;
    e.flags = r.u16(pos + 8);
    e.method = r.u16(pos + 10);
    e.crc = r.u32(pos + 16);
    e.compressed = r.u32(pos + 20);
    e.uncompressed = r.u32(pos + 24);
    const uint64_t name_size = r.u16(pos + 28), extra_size = r.u16(pos + 30), comment_size = r.u16(pos + 32);
    const uint16_t disk = r.u16(pos + 34);
    e.local_offset = r.u32(pos + 42);
    if (dir_end - pos - kCentralSize < name_size + extra_size + comment_size)
      fail(name, "malformed zip archive (central directory record " + std::to_string(i) + " overruns the directory)");
    e.name = std::string(r.text(pos + kCentralSize, name_size));
    const std::string where = entry_label(name, e.name);
    apply_zip64_extra(r, pos + kCentralSize + name_size, extra_size, e, true, where);
    if (disk != 0 && disk != 0xffff) fail(where, "multi-disk zip archives are not supported");
    entries.push_back(std::move(e));
    pos += kCentralSize + name_size + extra_size + comment_size;
  }

  // Every name first: an archive holding an array the caller does not expect is refused before any
  // member is inflated, however large it claims to be.
  if (check_name)
    for (const Entry& e : entries) {
      std::string key = e.name;
      if (key.size() > 4 && key.ends_with(".npy")) key.resize(key.size() - 4);
      check_name(key);
    }

  Arrays arrays;
  for (const Entry& e : entries) {
    const std::string where = entry_label(name, e.name);
    if (e.name.empty()) fail(where, "empty entry name");
    if ((e.flags & 0x0001) || (e.flags & 0x0040) || e.method == 99) fail(where, "encrypted entries are not supported");
    if (e.method != 0 && e.method != 8)
      fail(where, "unsupported compression method " + std::to_string(e.method) + " (supported: 0 stored, 8 deflate)");
    std::string key = e.name;
    if (key.size() > 4 && key.ends_with(".npy")) key.resize(key.size() - 4);
    if (arrays.count(key)) fail(where, "duplicate array name '" + npy::printable(key) + "'");

    // Sizes before any allocation: the compressed data must lie in the file, and the declared
    // uncompressed size must be possible for the method.
    if (e.compressed > r.size()) fail(where, "absurd compressed size " + std::to_string(e.compressed) + " (larger than the archive)");
    if (e.method == 0 && e.compressed != e.uncompressed)
      fail(where, "stored entry with compressed size " + std::to_string(e.compressed) + " != uncompressed size " +
                      std::to_string(e.uncompressed));
    if (e.method == 8 && (e.uncompressed > (e.compressed + 1) * kMaxDeflateRatio ||
                          e.uncompressed > static_cast<uint64_t>(r.size()) * kMaxDeflateRatio))
      fail(where, "absurd uncompressed size " + std::to_string(e.uncompressed) + " for " + std::to_string(e.compressed) +
                      " compressed bytes");
    if (e.uncompressed > std::numeric_limits<std::size_t>::max() / 2) fail(where, "absurd uncompressed size");

    // The local header: where the data starts (its extra field may differ from the central one).
    r.need(e.local_offset, kLocalSize, "the local header of entry '" + npy::printable(e.name) + "'");
    if (r.u32(e.local_offset) != kLocalSignature) fail(where, "malformed zip archive (bad local header signature)");
    const uint64_t local_name = r.u16(e.local_offset + 26), local_extra = r.u16(e.local_offset + 28);
    r.need(e.local_offset + kLocalSize, local_name + local_extra, "the local header of entry '" + npy::printable(e.name) + "'");
    if (r.text(e.local_offset + kLocalSize, local_name) != e.name)
      fail(where, "malformed zip archive (the local header names another entry)");
    if (r.u16(e.local_offset + 8) != e.method) fail(where, "malformed zip archive (local and central compression methods differ)");
    const uint64_t data = e.local_offset + kLocalSize + local_name + local_extra;
    r.need(data, e.compressed, "the data of entry '" + npy::printable(e.name) + "'");
    if (data + e.compressed > dir.offset) fail(where, "malformed zip archive (entry data overlaps the central directory)");
    const auto raw = r.span(data, e.compressed);

    std::vector<std::byte> member;
    std::span<const std::byte> content = raw;
    if (e.method == 8) {
      // The member's own .npy header must agree with its declared size before the rest is inflated:
      // a header of shape (2,) in front of a gigabyte of zeros is refused after at most ~1 MiB.
      constexpr uint64_t kHead = (uint64_t{1} << 20) + 16;  // npy's largest header and its preamble
      const std::vector<std::byte> head =
          inflate_prefix(raw, static_cast<std::size_t>(std::min<uint64_t>(e.uncompressed, kHead)));
      const uint64_t needed = npy::file_size_from_header(head, where);
      if (needed != e.uncompressed)
        fail(where, "declares " + std::to_string(e.uncompressed) + " uncompressed bytes, its .npy header needs " +
                        std::to_string(needed));
      member = inflate_member(raw, e.uncompressed, where);
      content = member;
    }
    const uint32_t crc = crc_of(content);
    if (crc != e.crc) {
      char text[64];
      std::snprintf(text, sizeof text, "CRC-32 mismatch (stored %08x, computed %08x)", e.crc, crc);
      fail(where, text);
    }
    arrays.emplace(std::move(key), npy::parse(content, where));
  }
  return arrays;
}

Arrays read(const std::string& path, const NameCheck& check_name) {
  return parse(npy::read_file_bytes(path), path, check_name);
}

}  // namespace vkattn::npz
