#include "vkattn/version.hpp"

// Two-level stringification so the macros expand to their values before # applies.
#define VKATTN_STR2(x) #x
#define VKATTN_STR(x) VKATTN_STR2(x)

namespace vkattn {

const char* version() {
  return VKATTN_STR(VKATTN_VERSION_MAJOR) "." VKATTN_STR(VKATTN_VERSION_MINOR) "." VKATTN_STR(
      VKATTN_VERSION_PATCH);
}

}  // namespace vkattn
