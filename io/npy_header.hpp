// The header of a .npy file: a Python dict literal, parsed by a small recursive-descent parser over
// exactly the grammar numpy writes. Internal to npy.cpp (and a fuzzing target): the text is untrusted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkattn::npy {

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;  // non-negative; () for a scalar
};

// Parses "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" plus padding. Throws
// vkattn::Error "<name>: malformed .npy header (...)" on anything else, and "<name>: unsupported
// dtype" for a structured (non-string) descr.
Header parse_header(std::string_view text, std::string_view name);

// `text` made safe for a one-line message: non-printable bytes as \xNN, cut at 64 characters.
std::string printable(std::string_view text);

}  // namespace vkattn::npy
