# cmake --install: the ABI header and a package config so outside kernels can find_package it.
#   find_package(nvfp4check REQUIRED)
#   target_link_libraries(my_kernels PRIVATE nvfp4check::abi)   # #include <nvfp4check/nvfp4_kernel_abi.h>
# Components: nvfp4check_abi (header + package config; all a plugin needs) and
# nvfp4check_runtime (the nvfp4check program, when it is part of the build).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(NVFP4_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/nvfp4check)

install(FILES ${PROJECT_SOURCE_DIR}/kernels/nvfp4_kernel_abi.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nvfp4check COMPONENT nvfp4check_abi)
# A header-only INTERFACE target: nothing to install but its usage requirements (INCLUDES must
# come last, it takes a list of directories).
install(TARGETS nvfp4check_abi EXPORT nvfp4checkTargets INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT nvfp4checkTargets NAMESPACE nvfp4check:: DESTINATION ${NVFP4_INSTALL_CMAKEDIR}
        COMPONENT nvfp4check_abi)

# The ABI version the header defines, so a plugin's CMake can check it without compiling.
file(STRINGS ${PROJECT_SOURCE_DIR}/kernels/nvfp4_kernel_abi.h abi_line REGEX "^#define NVFP4_ABI_VERSION [0-9]+")
string(REGEX REPLACE "^#define NVFP4_ABI_VERSION ([0-9]+).*" "\\1" NVFP4_ABI_VERSION "${abi_line}")

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nvfp4checkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/nvfp4checkConfig.cmake
  INSTALL_DESTINATION ${NVFP4_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
# 0.x: a minor version may change the ABI header, so only the same minor version is compatible.
# The package is one header: it fits any architecture.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nvfp4checkConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/nvfp4checkConfig.cmake ${PROJECT_BINARY_DIR}/nvfp4checkConfigVersion.cmake
        DESTINATION ${NVFP4_INSTALL_CMAKEDIR} COMPONENT nvfp4check_abi)

if(TARGET nvfp4check)
  # Keep the link-time library paths (e.g. the CUDA toolkit's lib) so the installed program finds
  # libcudart without LD_LIBRARY_PATH, and libcublasLt there when its kernel first loads it.
  set_target_properties(nvfp4check PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS nvfp4check RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT nvfp4check_runtime)
endif()
