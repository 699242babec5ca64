# Every dependency comes from Debian bookworm packages (scripts/install-deps.sh installs them).
find_package(Vulkan 1.2 REQUIRED)
find_program(VKATTN_GLSLC glslc REQUIRED DOC "glslc from Debian's glslc package (shaderc)")
if(NOT VKATTN_GLSLC)
  message(FATAL_ERROR "glslc not found: run scripts/install-deps.sh (Debian package 'glslc')")
endif()
