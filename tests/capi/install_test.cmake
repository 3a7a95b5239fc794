# SPDX-License-Identifier: MIT
# Installs the build into a fresh prefix, then builds tests/consumer against it with
# find_package(mambacpp) and, with the flags pkg-config gives, with the C compiler alone, and runs
# both programs on a tiny model made by the installed CLI.
# Usage: cmake -DBUILD_DIR=... -DWORK=... -DSOURCE_DIR=... -DC_COMPILER=... -DC_FLAGS=...
#              -DLIBDIR=lib -DPKG_CONFIG=... -P install_test.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${result}): ${command}\n${output}")
  endif()
  set(run_output "${output}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file bin/mambacpp include/mambacpp.h ${LIBDIR}/libmambacpp.so ${LIBDIR}/libmambacpp.so.0
             ${LIBDIR}/cmake/mambacpp/mambacppConfig.cmake ${LIBDIR}/cmake/mambacpp/mambacppConfigVersion.cmake
             ${LIBDIR}/cmake/mambacpp/mambacppTargets.cmake ${LIBDIR}/pkgconfig/mambacpp.pc
             share/doc/mambacpp/LICENSE)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "the install lacks ${file}")
  endif()
endforeach()

run(${prefix}/bin/mambacpp make-model --out ${WORK}/model --d-model 32 --n-layer 2 --vocab 301 --seed 3)

# The CMake package.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK}/consumer -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER} "-DCMAKE_C_FLAGS=${C_FLAGS}")
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
run(${WORK}/consumer/consumer ${WORK}/model)
set(cmake_output "${run_output}")
if(NOT cmake_output MATCHES "\\[mambacpp 0\\.1\\.0: 8 tokens\\]")
  message(FATAL_ERROR "the consumer printed:\n${cmake_output}")
endif()

# The licence: the installed text is the repository's, and the .pc file names it.
file(READ ${prefix}/share/doc/mambacpp/LICENSE installed_license)
file(READ ${SOURCE_DIR}/LICENSE source_license)
file(READ ${prefix}/${LIBDIR}/pkgconfig/mambacpp.pc pc_text)
if(NOT installed_license STREQUAL source_license OR NOT pc_text MATCHES "\nLicense: MIT\n")
  message(FATAL_ERROR "the install's licence is missing or wrong (share/doc/mambacpp/LICENSE, mambacpp.pc)")
endif()

# pkg-config, from the prefix's .pc file.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run(${PKG_CONFIG} --cflags --libs mambacpp)
string(STRIP "${run_output}" pc_flags)
# The .pc file names its folders relative to itself: they must be the prefix's.
string(REGEX MATCH "-I([^ ]+)" include_flag "${pc_flags}")
file(REAL_PATH "${CMAKE_MATCH_1}" include_dir)
string(REGEX MATCH "-L([^ ]+)" lib_flag "${pc_flags}")
file(REAL_PATH "${CMAKE_MATCH_1}" lib_dir)
file(REAL_PATH ${prefix} real_prefix)
if(NOT include_dir STREQUAL "${real_prefix}/include" OR NOT lib_dir STREQUAL "${real_prefix}/${LIBDIR}" OR
   NOT pc_flags MATCHES "-lmambacpp")
  message(FATAL_ERROR "pkg-config --cflags --libs mambacpp gave '${pc_flags}'")
endif()
separate_arguments(pc_list UNIX_COMMAND "${pc_flags}")
separate_arguments(c_flag_list UNIX_COMMAND "${C_FLAGS}")
run(${C_COMPILER} -std=c11 ${c_flag_list} ${SOURCE_DIR}/tests/consumer/main.c ${pc_list} -o ${WORK}/consumer_pc)
run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/${LIBDIR} ${WORK}/consumer_pc ${WORK}/model)
if(NOT run_output STREQUAL cmake_output)
  message(FATAL_ERROR "the pkg-config build printed\n${run_output}\nthe CMake build\n${cmake_output}")
endif()
message(STATUS "installed to ${prefix}; both consumers printed:\n${cmake_output}")
