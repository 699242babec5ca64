// libFuzzer target for the .npy parser: any bytes must give an Array or a vkattn::Error, never a
// crash, a hang or an out-of-bounds read; what parses must survive a write/read round trip.
//   cmake --preset fuzz && cmake --build --preset fuzz && build/fuzz/fuzzers/fuzz_npy tests/fuzz/corpus/npy
// (or scripts/fuzz.sh, which runs every target over its corpus for a bounded time).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "npy.hpp"
#include "vkattn/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace vkattn::npy;
  try {
    const Array array = parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz");
    if (array.kind == Kind::f32 || array.kind == Kind::f16) {
      const auto values = to_floats(array, "fuzz");
      const Array again = parse(serialize_floats(array.shape, values, array.kind == Kind::f16), "round trip");
      // f32 is stored bit for bit; f16 goes through f32 and back, which only canonicalises NaNs.
      if (again.shape != array.shape || (array.kind == Kind::f32 && again.data != array.data)) std::abort();
    } else if (array.kind == Kind::boolean) {
      (void)to_bools(array, "fuzz");
    } else {
      (void)to_ints(array, "fuzz");
    }
  } catch (const vkattn::Error&) {
  }
  return 0;
}
