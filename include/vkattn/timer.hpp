// GPU timing of attention calls with timestamp queries (for `vkattn bench`).
#pragma once

#include <vector>

#include "vkattn/attention.hpp"
#include "vkattn/attention_backward.hpp"

namespace vkattn {

// Runs `warmup` untimed calls, then `iterations` calls each bracketed by timestamps in its own
// submission, and returns each timed call's GPU time in milliseconds. `rotations` (may be a single
// element) are used round-robin so large inputs do not stay in cache. Throws Error when the device
// has no timestamp support.
std::vector<double> time_attention(Context& context, const std::vector<AttentionArgs>& rotations,
                                   int warmup, int iterations);

// The same for the backward pass of `spec` (vkattn/attention_backward.hpp): one prepared backward,
// recorded on each of `rotations` in turn (the forward's outputs must already be in them).
std::vector<double> time_attention_backward(Context& context, const AttentionSpec& spec,
                                            const std::vector<BackwardBuffers>& rotations, int warmup, int iterations);

}  // namespace vkattn
