# Installs the library, headers and a CMake package (find_package(vkattn)) plus a pkg-config file.
# scripts/consumption-tests.sh checks all three ways in (find_package, add_subdirectory, pkg-config).
include(CMakePackageConfigHelpers)

install(TARGETS vkattn EXPORT vkattnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# testing.hpp (fault injection, barrier checks) is for vkattn's own tests and tools: not installed.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vkattn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN "testing.hpp" EXCLUDE)
install(FILES ${VKATTN_GENERATED_INCLUDE_DIR}/vkattn/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkattn)
install(EXPORT vkattnTargets NAMESPACE vkattn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vkattnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vkattnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)
# SameMajorVersion: find_package(vkattn 0.1) accepts 0.1.x and later 0.y, never 1.0 (semver: a new
# major version may break the API).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vkattnConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vkattnConfig.cmake ${PROJECT_BINARY_DIR}/vkattnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)
if(TARGET vkattn_cli)
  install(TARGETS vkattn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# pkg-config (lib/pkgconfig/vkattn.pc) for build systems other than CMake. The library is static by
# default, so Libs carries what the archive needs from its consumer: the Vulkan loader (Requires)
# and the C++ runtime (-lstdc++ / -lm, harmless when the consumer links with a C++ driver anyway).
# prefix is found from the .pc file's own location (pkg-config's ${pcfiledir}), so the file stays
# right for `cmake --install --prefix <dir>` and when the installed tree is moved.
file(RELATIVE_PATH VKATTN_PC_TO_PREFIX "/vkattn-root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/vkattn-root")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(VKATTN_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(VKATTN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(VKATTN_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(VKATTN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/vkattn.pc.in ${PROJECT_BINARY_DIR}/vkattn.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vkattn.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
