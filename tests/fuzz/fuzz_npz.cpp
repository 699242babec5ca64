// libFuzzer target for the .npz reader (npz.cpp, on top of npy.cpp): any bytes must give the arrays
// or a vkattn::Error, never a crash, an out-of-bounds read, undefined behaviour, a hang, or an
// allocation beyond what the archive's size allows (the reader promises no allocation larger than the
// archive or a member's declared size, and deflate members at most 1032 times their compressed size).
//   cmake --preset fuzz && cmake --build --preset fuzz && build/fuzz/fuzzers/fuzz_npz tests/fuzz/corpus/npz
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "npz.hpp"
#include "vkattn/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace vkattn;
  try {
    const npz::Arrays arrays = npz::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz.npz");
    for (const auto& [name, array] : arrays) {
      if (name.empty()) std::abort();  // empty entry names are refused
      // Each member is a whole .npy: its data is exactly shape x item size.
      if (array.data.size() != static_cast<std::size_t>(array.element_count()) * array.item_size()) std::abort();
      // No member may decompress to more than the archive allows (see npz.hpp).
      if (array.data.size() > (size + 1) * 1032) std::abort();
      switch (array.kind) {
        case npy::Kind::f32:
        case npy::Kind::f16:
          (void)npy::to_floats(array, name);
          break;
        case npy::Kind::boolean:
          (void)npy::to_bools(array, name);
          break;
        case npy::Kind::i32:
        case npy::Kind::i64:
          (void)npy::to_ints(array, name);
          break;
        case npy::Kind::u8:  // (read as bytes only: no conversion to exercise)
          break;
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
