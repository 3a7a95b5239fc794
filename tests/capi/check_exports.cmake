# SPDX-License-Identifier: MIT
# Fails unless every dynamic symbol LIBRARY defines is a function of the C API (mb_*) or its
# version node (MAMBACPP_*): no engine internals, no C++ standard library, no OpenMP;
# and that its SONAME is libmambacpp.so.SOVERSION (when READELF is given).
# Usage: cmake -DNM=nm -DREADELF=readelf -DSOVERSION=0 -DLIBRARY=libmambacpp.so -P check_exports.cmake
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY} OUTPUT_VARIABLE symbols RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${result})")
endif()
string(REPLACE "\n" ";" lines "${symbols}")
set(exported 0)
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  # "<address> <type> <name>[@@version]"
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] " "" name "${line}")
  string(REGEX REPLACE "@.*$" "" name "${name}")
  if(name MATCHES "^mb_[a-z_]+$")
    math(EXPR exported "${exported} + 1")
  elseif(NOT name MATCHES "^MAMBACPP_[0-9]+$")
    message(FATAL_ERROR "${LIBRARY} exports '${line}', which is not part of the C API")
  endif()
endforeach()
if(exported LESS 20)
  message(FATAL_ERROR "${LIBRARY} exports only ${exported} mb_* functions:\n${symbols}")
endif()
message(STATUS "${LIBRARY}: ${exported} mb_* functions and nothing else")

# Programs link against the SONAME, which carries the major version (SOVERSION).
if(READELF)
  execute_process(COMMAND ${READELF} -d ${LIBRARY} OUTPUT_VARIABLE dynamic RESULT_VARIABLE result)
  if(NOT result EQUAL 0 OR NOT dynamic MATCHES "\\(SONAME\\)[^\n]*\\[libmambacpp\\.so\\.${SOVERSION}\\]")
    message(FATAL_ERROR "${LIBRARY} lacks the SONAME libmambacpp.so.${SOVERSION}:\n${dynamic}")
  endif()
endif()
