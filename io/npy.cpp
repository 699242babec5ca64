// .npy reader and writer. Format: the magic "\x93NUMPY", a major and minor version byte, the header
// length (uint16 in 1.0, uint32 in 2.0/3.0, little-endian), then a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a newline, then
// the raw data (npy_header.cpp parses the dict). Every read is bounds-checked and every size
// overflow-checked because the input is untrusted (and fuzzed).
#include "npy.hpp"
#include "npy_header.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
// numpy itself refuses headers over 10000 bytes by default (max_header_size); be a little looser
// but still refuse to parse megabytes of header text.
constexpr std::size_t kMaxHeaderSize = 1 << 20;
// The most elements a shape may describe: any count up to this, times the largest item size (8),
// fits in an int64_t byte count.
constexpr uint64_t kMaxElements = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 8;

[[noreturn]] void fail(std::string_view name, const std::string& what) {
  throw Error(std::string(name) + ": " + what);
}

std::size_t kind_size(Kind kind) {
  switch (kind) {
    case Kind::f16: return 2;
    case Kind::f32: return 4;
    case Kind::boolean: return 1;
    case Kind::i32: return 4;
    case Kind::i64: return 8;
    case Kind::u8: return 1;
  }
  return 1;
}

// Maps a descr to a Kind. One-byte types have no byte order, so numpy writes '|' but '<', '>' and
// '=' mean the same there.
std::optional<Kind> kind_of(std::string_view descr) {
  if (descr == "<f4") return Kind::f32;
  if (descr == "<f2") return Kind::f16;
  if (descr == "<i4") return Kind::i32;
  if (descr == "<i8") return Kind::i64;
  if (descr.size() == 3 && descr.substr(1) == "b1" &&
      (descr[0] == '|' || descr[0] == '<' || descr[0] == '>' || descr[0] == '='))
    return Kind::boolean;
  if (descr.size() == 3 && descr.substr(1) == "u1" &&
      (descr[0] == '|' || descr[0] == '<' || descr[0] == '>' || descr[0] == '='))
    return Kind::u8;
  return std::nullopt;
}

std::string descr_of(Kind kind) {
  switch (kind) {
    case Kind::f16: return "<f2";
    case Kind::f32: return "<f4";
    case Kind::boolean: return "|b1";
    case Kind::i32: return "<i4";
    case Kind::i64: return "<i8";
    case Kind::u8: return "|u1";
  }
  return "?";
}

std::string unsupported_descr_message(std::string_view descr) {
  std::string message = "unsupported dtype '" + printable(descr) + "'";
  if (!descr.empty() && descr[0] == '>') message += " (big-endian; save it little-endian: a.astype(a.dtype.newbyteorder('<')))";
  else if (descr == "<f8") message += " (float64; convert with a.astype(numpy.float32))";
  message += "; supported: <f4, <f2, |b1, <i4, <i8";
  return message;
}

uint32_t read_le(std::span<const std::byte> bytes, std::size_t offset, std::size_t count) {
  uint32_t value = 0;
  for (std::size_t i = 0; i < count; ++i)
    value |= static_cast<uint32_t>(bytes[offset + i]) << (8 * i);
  return value;
}

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));  // unaligned-safe; the data follows a header of any length
  return value;
}

void append(std::vector<std::byte>& out, std::string_view text) {
  for (char c : text) out.push_back(static_cast<std::byte>(c));
}

}  // namespace

int64_t Array::element_count() const {
  // A zero anywhere makes the array empty. Checking for it first matters: parse() bounds the
  // product of the nonzero dimensions only, so multiplying in order past a later zero could overflow.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t count = 1;
  for (int64_t d : shape) count *= d;  // bounded by parse()
  return count;
}

std::size_t Array::item_size() const { return kind_size(kind); }

std::string Array::shape_string() const {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

namespace {

// The header of a .npy file, checked: everything parse() knows before it touches the data.
struct Layout {
  Array array;  // shape, descr, kind; no data
  uint64_t data_offset = 0;
  uint64_t data_size = 0;
};

Layout parse_layout(std::span<const std::byte> bytes, std::string_view name) {
  if (bytes.size() < kMagicSize + 2 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    fail(name, "not a .npy file (bad magic; expected \\x93NUMPY)");
  const unsigned major = static_cast<unsigned>(bytes[6]);
  const unsigned minor = static_cast<unsigned>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail(name, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  const std::size_t length_size = major == 1 ? 2 : 4;
  const std::size_t header_start = kMagicSize + 2 + length_size;
  if (bytes.size() < header_start) fail(name, "truncated .npy header");
  const std::size_t header_size = read_le(bytes, kMagicSize + 2, length_size);
  if (header_size > kMaxHeaderSize) fail(name, "malformed .npy header (" + std::to_string(header_size) + " bytes long)");
  if (bytes.size() - header_start < header_size) fail(name, "truncated .npy header");

  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + header_start, header_size);
  const Header header = parse_header(text, name);

  Layout layout;
  Array& array = layout.array;
  const auto kind = kind_of(header.descr);
  if (!kind) fail(name, unsupported_descr_message(header.descr));
  array.kind = *kind;
  array.descr = descr_of(*kind);
  if (header.fortran_order)
    fail(name, "Fortran-order arrays are not supported; save a C-order array (numpy.ascontiguousarray)");
  array.shape = header.shape;

  // Element and byte counts, refusing anything that overflows rather than wrapping around. Like
  // numpy, the product of the nonzero dimensions must fit even when a zero makes the array empty,
  // so every partial product element_count() can form stays in range.
  uint64_t nonzero_product = 1;
  bool empty = false;
  for (int64_t d : array.shape) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero_product > kMaxElements / static_cast<uint64_t>(d))
      fail(name, "shape " + array.shape_string() + " is too large");
    nonzero_product *= static_cast<uint64_t>(d);
  }
  const uint64_t count = empty ? 0 : nonzero_product;
  layout.data_offset = header_start + header_size;
  layout.data_size = count * array.item_size();
  return layout;
}

}  // namespace

uint64_t file_size_from_header(std::span<const std::byte> head, std::string_view name) {
  const Layout layout = parse_layout(head, name);
  return layout.data_offset + layout.data_size;
}

Array parse(std::span<const std::byte> bytes, std::string_view name) {
  Layout layout = parse_layout(bytes, name);
  Array& array = layout.array;
  const uint64_t data_size = layout.data_size;
  const uint64_t available = bytes.size() - layout.data_offset;
  if (available < data_size)
    fail(name, "truncated data: shape " + array.shape_string() + " of " + array.descr + " needs " +
                   std::to_string(data_size) + " bytes, the file has " + std::to_string(available));
  if (available > data_size)
    fail(name, "has " + std::to_string(available - data_size) + " bytes after the data of shape " +
                   array.shape_string() + " (" + array.descr + ")");
  const auto* data = bytes.data() + layout.data_offset;
  array.data.assign(data, data + data_size);
  return std::move(array);
}

std::vector<std::byte> read_file_bytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, "not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read: " + ec.message());
  std::ifstream file(path, std::ios::binary);
  if (!file) fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  if (size > 0 && !file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    fail(path, "read error");
  return bytes;
}

Array read(const std::string& path) { return parse(read_file_bytes(path), path); }

std::vector<float> to_floats(const Array& array, std::string_view name) {
  const std::size_t n = static_cast<std::size_t>(array.element_count());
  std::vector<float> values(n);
  const std::byte* p = array.data.data();
  if (array.kind == Kind::f32) {
    for (std::size_t i = 0; i < n; ++i) values[i] = load<float>(p + 4 * i);
  } else if (array.kind == Kind::f16) {
    for (std::size_t i = 0; i < n; ++i) values[i] = f16_bits_to_f32(load<uint16_t>(p + 2 * i));
  } else {
    fail(name, "expected float32 ('<f4') or float16 ('<f2') data, got '" + array.descr + "'");
  }
  return values;
}

std::vector<uint8_t> to_bools(const Array& array, std::string_view name) {
  if (array.kind != Kind::boolean) fail(name, "expected bool ('|b1') data, got '" + array.descr + "'");
  std::vector<uint8_t> values(array.data.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = array.data[i] != std::byte{0} ? 1 : 0;
  return values;
}

std::vector<int64_t> to_ints(const Array& array, std::string_view name) {
  const std::size_t n = static_cast<std::size_t>(array.element_count());
  std::vector<int64_t> values(n);
  const std::byte* p = array.data.data();
  if (array.kind == Kind::i32) {
    for (std::size_t i = 0; i < n; ++i) values[i] = load<int32_t>(p + 4 * i);
  } else if (array.kind == Kind::i64) {
    for (std::size_t i = 0; i < n; ++i) values[i] = load<int64_t>(p + 8 * i);
  } else {
    fail(name, "expected int32 ('<i4') or int64 ('<i8') data, got '" + array.descr + "'");
  }
  return values;
}

std::vector<std::byte> serialize(std::span<const int64_t> shape, std::string_view descr,
                                 std::span<const std::byte> data) {
  const auto kind = kind_of(descr);
  if (!kind || (*kind != Kind::f32 && *kind != Kind::f16 && *kind != Kind::u8))
    throw Error("npy::serialize: unsupported dtype '" + std::string(descr) + "' (writes <f4, <f2 or |u1)");
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("npy::serialize: negative dimension");
    count *= static_cast<uint64_t>(d);
  }
  if (count * kind_size(*kind) != data.size())
    throw Error("npy::serialize: " + std::to_string(data.size()) + " bytes do not match the shape");

  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dict += ",";  // Python's one-element tuple
  dict += "), }";
  // Pad with spaces so the data starts on a 64-byte boundary (what numpy does, for mmap), ending
  // the header with a newline. Version 2.0 only when the header outgrows uint16.
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const std::size_t prefix = kMagicSize + 2 + (v2 ? 4 : 2);
  std::size_t header_size = dict.size() + 1;
  header_size += (64 - (prefix + header_size) % 64) % 64;
  dict.append(header_size - dict.size() - 1, ' ');
  dict += '\n';

  std::vector<std::byte> out;
  out.reserve(prefix + header_size + data.size());
  append(out, std::string_view(kMagic, kMagicSize));
  out.push_back(std::byte{static_cast<unsigned char>(v2 ? 2 : 1)});
  out.push_back(std::byte{0});
  for (std::size_t i = 0; i < (v2 ? 4u : 2u); ++i)
    out.push_back(static_cast<std::byte>((header_size >> (8 * i)) & 0xff));
  append(out, dict);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<std::byte> serialize_floats(std::span<const int64_t> shape, std::span<const float> values,
                                        bool as_f16) {
  const DType dtype = as_f16 ? DType::f16 : DType::f32;
  std::vector<std::byte> data(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), data.data(), values.size());
  return serialize(shape, as_f16 ? "<f2" : "<f4", data);
}

}  // namespace vkattn::npy
