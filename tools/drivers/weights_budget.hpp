// The dense attention weights P (batch, heads, seq_q, seq_k) in f32 that `run --weights`,
// `mha --attn-weights` and `--heatmap` ask for. They grow with seq_q·seq_k, so a long-context request
// can exceed the device long before the fused path (which never stores them) would: they are checked
// before the device allocates them, with a message that says which options to drop.
#pragma once

#include <cstdint>
#include <string>

#include "vkattn/context.hpp"

namespace vkattn::cli {

// B·H·Sq·Sk·4, saturating at UINT64_MAX (four int64 sizes can overflow a product).
uint64_t weights_bytes(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k);

// Throws vkattn::Error when P does not fit in the device's memory (DeviceInfo::device_memory_bytes,
// its largest heap; not checked when a device reports 0) or in the host's physical memory (the tool
// downloads P whole). `flags` names the options that asked for P, e.g. "--weights/--heatmap".
void check_weights_fit(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k, const DeviceInfo& device,
                       const std::string& flags);

}  // namespace vkattn::cli
