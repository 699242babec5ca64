# Installs the library, headers and a CMake package (find_package(vkattn)) plus a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS vkattn EXPORT vkattnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/include/vkattn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT vkattnTargets NAMESPACE vkattn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vkattnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vkattnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vkattnConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vkattnConfig.cmake ${PROJECT_BINARY_DIR}/vkattnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)
if(TARGET vkattn_cli)
  install(TARGETS vkattn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
