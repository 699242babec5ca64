# The warning flags of every vkattn target, defined once: vkattn_warnings(<target>) applies them.
# -Wno-missing-field-initializers: Vulkan's structs are filled member by member after `{sType}`.
# -Wconversion: no implicit narrowing (the code is clean under GCC's; clang's also covers sign and
# 64-to-32 conversions, which GCC leaves to -Wsign-conversion, not enabled).
set(VKATTN_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wconversion -Wno-missing-field-initializers)
function(vkattn_warnings target)
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:${VKATTN_WARNING_FLAGS}>
                                           $<$<CXX_COMPILER_ID:Clang>:-Wno-sign-conversion -Wno-shorten-64-to-32>)
endfunction()
