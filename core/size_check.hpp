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

// The product of non-negative `factors`, or Error naming `what` and the factors when it exceeds 2^60
// values: a count that, times an element size of up to 8 bytes, still fits int64 and uint64, so that
// no size derived from it downstream wraps.
inline int64_t checked_product(const std::string& what, std::initializer_list<int64_t> factors) {
  constexpr int64_t kMaxValues = int64_t{1} << 60;
  int64_t product = 1;
  for (const int64_t f : factors)
    if (__builtin_mul_overflow(product, f, &product) || product > kMaxValues) {
      std::string list;
      for (const int64_t g : factors) list += (list.empty() ? "" : " x ") + std::to_string(g);
      throw Error(what + ": " + list + " exceeds 2^60 values");
    }
  return product;
}

inline void check_positive(const char* name, int64_t v) {
  if (v < 1) throw Error(std::string(name) + " (" + std::to_string(v) + ") must be >= 1");
}

inline void check_non_negative(const char* name, int64_t v) {
  if (v < 0) throw Error(std::string(name) + " (" + std::to_string(v) + ") must be >= 0");
}

}  // namespace vkattn::detail
