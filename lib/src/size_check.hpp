// Size checks shared by the multi-head layer's types and its reference: one wording for "this array
// has the wrong number of values", naming the array, the expected shape and what was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "vkattn/error.hpp"

namespace vkattn::detail {

// "(a, b, c)". Built with += (GCC 12 warns falsely, -Wrestrict, on "(" + std::string).
inline std::string shape_string(std::initializer_list<int64_t> dims) {
  std::string s(1, '(');
  for (const int64_t d : dims) {
    if (s.size() > 1) s += ", ";
    s += std::to_string(d);
  }
  s += ')';
  return s;
}

// Throws "<name>: expected <n> values <shape>, given <m><hint>" when given != expected.
inline void check_size(const char* name, std::size_t given, int64_t expected, const std::string& shape,
                       const std::string& hint = {}) {
  if (static_cast<int64_t>(given) != expected) {
    throw Error(std::string(name) + ": expected " + std::to_string(expected) + " values " + shape + ", given " +
                std::to_string(given) + hint);
  }
}

inline void check_positive(const char* name, int64_t v) {
  if (v < 1) throw Error(std::string(name) + " (" + std::to_string(v) + ") must be >= 1");
}

inline void check_non_negative(const char* name, int64_t v) {
  if (v < 0) throw Error(std::string(name) + " (" + std::to_string(v) + ") must be >= 0");
}

}  // namespace vkattn::detail
