// Host time of recording: what a runtime pays on the CPU each time it records attention into its
// command buffer, apart from the device's time (which `vkattn bench` measures with timestamps).
#pragma once

#include <vulkan/vulkan.h>

#include <functional>
#include <vector>

#include "vkattn/context.hpp"

namespace vkattn::cli {

struct HostTime {
  double us_median = 0, us_min = 0;  // microseconds per call: median and minimum over the rounds
  int rounds = 0, calls_per_round = 0;
  std::vector<double> per_round;     // microseconds per call of each round
};

// Calls `record_one(cmd)` `calls_per_round` times into one command buffer of `context`'s queue
// family per round (begun, recorded, ended, reset; never submitted), `rounds` times, and reports the
// wall time per call of each round. Run the call once before so that pipelines already exist.
HostTime time_recording(Context& context, const std::function<void(VkCommandBuffer)>& record_one, int rounds,
                        int calls_per_round);

// One HostTime over the rounds of several (median and minimum of their per-call times).
HostTime merge_rounds(const std::vector<HostTime>& parts);

}  // namespace vkattn::cli
