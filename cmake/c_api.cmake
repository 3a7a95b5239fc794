# SPDX-License-Identifier: MIT
# The C API (include/mambacpp.h, capi/*.cc) as a shared library, libmambacpp.so.<major>, with the
# engine linked in statically. It exports the mb_* functions only: the sources are compiled with
# hidden visibility, and the version script (capi/exports.map) keeps every symbol of the static
# core and the C++ standard library local, so programs see one stable C ABI.
include(GNUInstallDirs)
file(GLOB MB_CAPI_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/capi/*.cc)
add_library(mambacpp_shared SHARED ${MB_CAPI_SOURCES})
target_include_directories(mambacpp_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(mambacpp_shared PRIVATE mambacpp_core mambacpp_api)
target_compile_definitions(mambacpp_shared PRIVATE MB_VERSION="${PROJECT_VERSION}")
set_target_properties(mambacpp_shared PROPERTIES
  OUTPUT_NAME mambacpp
  EXPORT_NAME mambacpp
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/capi/exports.map)
target_link_options(mambacpp_shared PRIVATE "-Wl,--version-script=${PROJECT_SOURCE_DIR}/capi/exports.map")
# Every symbol the library needs must come from the libraries it names; a sanitizer build leaves
# the runtime's symbols to the program (clang does not link its runtime into shared libraries).
if(NOT MB_SANITIZE AND NOT MB_SANITIZE_THREAD)
  target_link_options(mambacpp_shared PRIVATE -Wl,--no-undefined)
endif()
add_library(mambacpp::mambacpp ALIAS mambacpp_shared)

# The C test program (tests/capi/) is C11; its ctest registration lives with it.
if(MB_BUILD_TESTS)
  enable_language(C)
endif()
