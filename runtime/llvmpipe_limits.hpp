// lavapipe's silent loop limit (docs/devices.md), shared by every planner that bounds a kernel's loops.
#pragma once

#include <cstdint>

namespace vkattn::detail {

// llvmpipe stops each shader invocation's loops after 65535 iterations in total, silently. Plans keep
// the iterations they count under this, leaving room for what the counts do not model.
constexpr uint64_t kLlvmpipeLoopBudget = 48000;

}  // namespace vkattn::detail
