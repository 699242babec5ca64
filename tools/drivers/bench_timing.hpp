// GPU-timestamp timing of work an application records itself (a PreparedAttention's record()),
// the way vkattn::time_attention times a dense call: each run in its own submission, between the
// barriers vkattn's synchronous calls put around attention, timestamps right around the recorded
// work, waited for before the next.
#pragma once

#include <vulkan/vulkan.h>

#include <functional>
#include <vector>

#include "vkattn/context.hpp"

namespace vkattn::cli {

// Runs `warmup` untimed then `iterations` timed submissions of `record(cmd, run)` (run counts from 0
// over all of them) on `context`'s queue and returns each timed run's GPU milliseconds. Throws Error
// when the device has no timestamp support or a Vulkan call fails.
std::vector<double> time_recorded(Context& context, const std::function<void(VkCommandBuffer, int)>& record, int warmup,
                                  int iterations);

}  // namespace vkattn::cli
