// NumPy .npy files (format 1.0, 2.0 and 3.0): the interchange format of `vkattn run`, so arrays
// saved by numpy.save / torch.Tensor.numpy() go in and out without a conversion script.
//
// Only little-endian, C-order arrays of the element types vkattn uses are read; everything else is
// rejected with a vkattn::Error naming the file. The parser works on a byte span so it can be fuzzed
// without touching the file system, and it never trusts a length or a shape it has not checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vkattn::npy {

// The element types a .npy file may hold here, by their numpy `descr` string.
enum class Kind { f16, f32, boolean, i32, i64, u8 };

struct Array {
  std::vector<int64_t> shape;  // () for a scalar
  std::string descr;           // normalised: "<f2", "<f4", "|b1", "<i4", "<i8"
  Kind kind = Kind::f32;
  std::vector<std::byte> data;  // element_count() * item_size() bytes, C order, little-endian

  int64_t element_count() const;
  std::size_t item_size() const;
  std::string shape_string() const;  // "(2, 8, 128, 64)"
};

// Parses the bytes of a .npy file. `name` is used in error messages (usually the path).
Array parse(std::span<const std::byte> bytes, std::string_view name);
// The size a whole .npy file must have (header plus shape × item size), from its first bytes: the
// magic, the version and the whole header (at most 1 MiB + 12 bytes). Lets a caller check a
// declared size before reading or inflating any data. Throws like parse() for a bad header.
uint64_t file_size_from_header(std::span<const std::byte> head, std::string_view name);
// Reads and parses a .npy file; a missing or unreadable file is an Error naming it.
Array read(const std::string& path);
// The whole file's bytes; Error naming `path` when it is missing, not a regular file or unreadable.
std::vector<std::byte> read_file_bytes(const std::string& path);

// Element values, converted; each throws Error (naming `name`) when the array holds another kind.
// Floats from "<f4" and "<f2" (exactly: every f16 is a float).
std::vector<float> to_floats(const Array& array, std::string_view name);
// Booleans from "|b1" as 0 / 1 bytes (numpy stores one byte per element; any nonzero byte is true).
std::vector<uint8_t> to_bools(const Array& array, std::string_view name);
// Integers from "<i4" and "<i8".
std::vector<int64_t> to_ints(const Array& array, std::string_view name);

// The bytes of a .npy file (format 1.0, or 2.0 when the header needs it) holding a C-order array.
// `descr` is "<f4", "<f2" or "|u1"; `data` must hold product(shape) * item size bytes.
std::vector<std::byte> serialize(std::span<const int64_t> shape, std::string_view descr,
                                 std::span<const std::byte> data);
// Convenience for the common case: float values stored as "<f4", or rounded to "<f2".
std::vector<std::byte> serialize_floats(std::span<const int64_t> shape, std::span<const float> values,
                                        bool as_f16);

}  // namespace vkattn::npy
