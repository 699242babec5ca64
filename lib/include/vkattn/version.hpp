#pragma once

#define VKATTN_VERSION_MAJOR 0
#define VKATTN_VERSION_MINOR 1
#define VKATTN_VERSION_PATCH 0

namespace vkattn {
// "0.1.0"
const char* version();
}  // namespace vkattn
