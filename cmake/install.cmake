# SPDX-License-Identifier: MIT
# `cmake --install build --prefix P`: the CLI, the C API's shared library and header, a CMake
# package (find_package(mambacpp) gives the imported target mambacpp::mambacpp) and a pkg-config
# file, all relocatable (paths relative to where they were installed), and the licence (MIT) in
# share/doc/mambacpp/LICENSE, which the package and the .pc file name.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS mambacpp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS mambacpp_shared EXPORT mambacppTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/mambacpp.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# MIT requires the notice to go with every copy, binaries included.
set(MB_LICENSE MIT)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(MB_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mambacpp)
install(EXPORT mambacppTargets NAMESPACE mambacpp:: DESTINATION ${MB_CMAKE_PACKAGE_DIR})
set(MB_LICENSE_FILE ${CMAKE_INSTALL_DOCDIR}/LICENSE)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mambacppConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mambacppConfig.cmake INSTALL_DESTINATION ${MB_CMAKE_PACKAGE_DIR}
                              PATH_VARS MB_LICENSE_FILE)
# The library's SONAME carries the major version, so only an equal major version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mambacppConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mambacppConfig.cmake ${PROJECT_BINARY_DIR}/mambacppConfigVersion.cmake
        DESTINATION ${MB_CMAKE_PACKAGE_DIR})

# The .pc file finds its prefix from its own folder (pkg-config's ${pcfiledir}), so it is right
# for whatever --prefix the install is given.
file(RELATIVE_PATH MB_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" MB_PC_TO_PREFIX "${MB_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/mambacpp.pc.in ${PROJECT_BINARY_DIR}/mambacpp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mambacpp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
