# The warning flags of every vkattn target, defined once: vkattn_warnings(<target>) applies them.
# -Wno-missing-field-initializers: Vulkan's structs are filled member by member after `{sType}`.
set(VKATTN_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
function(vkattn_warnings target)
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:${VKATTN_WARNING_FLAGS}>)
endfunction()
