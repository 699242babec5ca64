// `vkattn bench --copy`: the bandwidth a plain copy reaches on the device, timed in the same run as
// the attention call it is compared with. A decoding step streams the whole KV cache once, so its
// speed is best read as a fraction of what copying the same bytes takes on the same device, minutes
// apart at most (a shared machine's load, a GPU's clocks and a CPU device's JIT all move both).
#pragma once

#include <cstdint>

#include "vkattn/context.hpp"

namespace vkattn::cli {

// Milliseconds per copy of `bytes` bytes between two buffers of the device, by GPU timestamps
// around each copy in its own submission (as time_attention does), median and minimum.
struct CopyTiming {
  uint64_t bytes = 0;
  int iters = 0;
  // vkCmdCopyBuffer: the driver's own copy (a memcpy on lavapipe).
  double transfer_ms_median = 0, transfer_ms_min = 0;
  // A compute shader (tools/drivers/bench_copy.comp): 16 bytes per invocation and iteration, what a kernel
  // that reads and writes through storage buffers can reach.
  double shader_ms_median = 0, shader_ms_min = 0;
};

// GB/s of `bytes` moved in `ms` milliseconds (0 for a zero time).
double gb_per_s(uint64_t bytes, double ms);

// Times `warmup` untimed then `iters` timed copies of `bytes` (rounded up to 16) from one new buffer
// to another, each way of copying in turn, and checks what each left in the destination. Throws
// Error when the device has no timestamps or no memory for the two buffers, or a copy went wrong.
CopyTiming time_copies(Context& context, uint64_t bytes, int warmup, int iters);

}  // namespace vkattn::cli
