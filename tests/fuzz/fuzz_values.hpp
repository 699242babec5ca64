// The value drawers every argument-check fuzz target shares: sizes, strides, offsets and other int64
// arguments (mostly small, where the rules are decided; sometimes the edges of int32 and int64), and
// enum values (usually valid, sometimes anything a C++ caller can static_cast).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <limits>

namespace vkattn::fuzz {

inline int64_t interesting(FuzzedDataProvider& f) {
  static constexpr int64_t kEdges[] = {0,
                                       -1,
                                       1,
                                       2,
                                       3,
                                       16,
                                       32,
                                       64,
                                       255,
                                       256,
                                       257,
                                       65535,
                                       65536,
                                       (int64_t{1} << 31) - 1,
                                       int64_t{1} << 31,
                                       int64_t{1} << 32,
                                       (int64_t{1} << 32) + 1,
                                       int64_t{1} << 62,
                                       (int64_t{1} << 62) + 1,
                                       std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max() / 2 + 1};
  switch (f.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return f.ConsumeIntegralInRange<int64_t>(0, 8);
    case 1:
      return f.ConsumeIntegralInRange<int64_t>(-2, 300);
    case 2:
      return f.PickValueInArray(kEdges);
    default:
      return f.ConsumeIntegral<int64_t>();
  }
}

template <typename E>
E any_enum(FuzzedDataProvider& f, int valid_count) {
  if (f.ConsumeIntegralInRange<int>(0, 7) != 0) return static_cast<E>(f.ConsumeIntegralInRange<int>(0, valid_count - 1));
  return static_cast<E>(f.ConsumeIntegral<int8_t>());
}

}  // namespace vkattn::fuzz
