// Writing NumPy .npz archives as numpy.savez does: a ZIP file with one stored (uncompressed) .npy
// member per array, each with its CRC-32 (zlib's). npz.hpp reads them back, as does numpy.load.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace vkattn::npz {

// One member: the array's name (written as "<name>.npy") and its whole .npy file (npy::serialize).
using Member = std::pair<std::string, std::vector<std::byte>>;

// The archive's bytes. Throws Error for an empty or duplicate name, or an archive past the 32-bit
// sizes and offsets of a plain ZIP (4 GiB; ZIP64 is not written).
std::vector<std::byte> serialize(const std::vector<Member>& members);

}  // namespace vkattn::npz
