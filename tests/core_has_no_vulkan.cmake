# ctest core_has_no_vulkan: the guard that keeps Vulkan out of the vkattn core works.
#  1. Every public header of the core compiles on its own with the core's include path (the guard
#     directory first): none of them reaches a Vulkan header.
#  2. A source that includes a core header and <vulkan/vulkan.h> with the same path fails, with the
#     guard's message: a Vulkan include that sneaks into the core stops its build.
# Run with -DCXX=<compiler> -DGUARD=<cmake/no_vulkan> -DINCLUDES=<dir|dir> -DHEADERS=<hdr;hdr> -DWORK=<dir>.
string(REPLACE "|" ";" INCLUDES "${INCLUDES}")
set(flags -std=c++20 -fsyntax-only -I${GUARD})
foreach(dir IN LISTS INCLUDES)
  list(APPEND flags -I${dir})
endforeach()
file(MAKE_DIRECTORY ${WORK})

foreach(header IN LISTS HEADERS)
  set(source ${WORK}/alone.cpp)
  file(WRITE ${source} "#include \"${header}\"\n")
  execute_process(COMMAND ${CXX} ${flags} ${source} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the core header ${header} does not compile on its own without Vulkan:\n${err}")
  endif()
endforeach()

set(source ${WORK}/sneaks_in.cpp)
file(WRITE ${source} "#include \"vkattn/types.hpp\"\n#include <vulkan/vulkan.h>\n")
execute_process(COMMAND ${CXX} ${flags} ${source} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "must not include Vulkan")
  message(FATAL_ERROR "a Vulkan include in the core was not stopped by the guard (exit ${rc}):\n${err}")
endif()
list(LENGTH HEADERS n)
message(STATUS "${n} core headers compile without Vulkan; a Vulkan include is refused")
