# Installs the library, its public headers and a relocatable CMake package:
#   find_package(customops REQUIRED)   ->   target customops::customops
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# A wheel (pyproject.toml) puts it in share/cmake/customops, as torch's is in torch/share/cmake.
set(CUSTOMOPS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/customops
    CACHE STRING "Where the CMake package (customopsConfig.cmake) is installed, relative to the prefix")

install(TARGETS customops EXPORT customopsTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Read by the Python package beside the library: it refuses a library built for another torch.
install(FILES ${PROJECT_BINARY_DIR}/build_info.json DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/ops/include/customops ${PROJECT_BINARY_DIR}/include/customops
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT customopsTargets
  NAMESPACE customops::
  DESTINATION ${CUSTOMOPS_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/customopsConfig.cmake.in
  ${PROJECT_BINARY_DIR}/customopsConfig.cmake
  INSTALL_DESTINATION ${CUSTOMOPS_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/customopsConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/customopsConfig.cmake
  ${PROJECT_BINARY_DIR}/customopsConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/customopsTorchLinking.cmake
  DESTINATION ${CUSTOMOPS_INSTALL_CMAKEDIR})
