#include "vkattn/version.hpp"

namespace vkattn {

const char* version() { return VKATTN_VERSION_STRING; }

}  // namespace vkattn
