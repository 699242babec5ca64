// NumPy .npz archives: a ZIP file with one .npy member per array, as numpy.savez (stored entries)
// and numpy.savez_compressed (deflate entries) write them, ZIP64 extra fields included.
//
// The central directory is authoritative (sizes, CRC-32, method); each local header is only used to
// find where the member's data starts and must name the same entry. Every member is decompressed,
// CRC-checked and parsed with npy::parse. Anything malformed (not a zip, truncated, bad CRC, a
// method other than stored/deflate, an encrypted entry, a duplicate name, a member that is not a
// valid .npy, a size that does not match or is absurd) is a vkattn::Error naming the file and, where
// there is one, the entry. No allocation exceeds the archive size or a member's declared
// uncompressed size, and a deflate member may not declare more than 1032 times its compressed size
// (deflate's maximum ratio) plus a little slack.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "npy.hpp"

namespace vkattn::npz {

// Array name (the entry name without its ".npy" suffix, e.g. "w" for "w.npy") -> the parsed array.
using Arrays = std::map<std::string, npy::Array>;

// Called with every array name (without ".npy") before any member is inflated or parsed; throws
// (vkattn::Error) to refuse the archive, so an unexpected member costs nothing however large it is.
using NameCheck = std::function<void(const std::string& key)>;

// Parses the bytes of a .npz archive. `name` is used in error messages (usually the path). A
// deflated member's .npy header is read first and must need exactly the declared uncompressed size.
Arrays parse(std::span<const std::byte> bytes, std::string_view name, const NameCheck& check_name = {});
// Reads and parses a .npz file; a missing or unreadable file is an Error naming it.
Arrays read(const std::string& path, const NameCheck& check_name = {});

}  // namespace vkattn::npz
