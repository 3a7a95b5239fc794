# SPDX-License-Identifier: MIT
# The Python package `mambacpp` (python/): a pybind11 extension module, _mambacpp, over the
# engine, and the pure-Python layer around it. MB_PYTHON=AUTO builds it when the interpreter,
# its headers, pybind11 and numpy are all there (Debian: python3-dev, pybind11-dev,
# python3-numpy); ON requires them; OFF skips it. The build folder's python/ is an importable
# copy of the package (the tests put it on PYTHONPATH); `pip install .` builds the same module
# through the in-tree backend in python/build_backend/.
set(MB_PYTHON AUTO CACHE STRING "Build the Python package: AUTO (when pybind11 and numpy are found), ON or OFF")
set(MB_PYTHON_BUILT OFF)
if(MB_PYTHON STREQUAL "OFF" OR CMAKE_CROSSCOMPILING OR MB_BUILD_FUZZERS)
  return()
endif()
set(mb_python_required "")
if(MB_PYTHON STREQUAL "ON")
  set(mb_python_required REQUIRED)
endif()

# A user's own interpreter first on PATH (pyenv, a venv without numpy) would hide Debian's, whose
# numpy the package is built for: prefer the system one when it has numpy and none was chosen.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  execute_process(COMMAND /usr/bin/python3 -c "import numpy" RESULT_VARIABLE mb_system_numpy
                  OUTPUT_QUIET ERROR_QUIET)
  if(mb_system_numpy EQUAL 0)
    execute_process(COMMAND /usr/bin/python3 -c "import sys; print(sys.prefix, end='')"
                    OUTPUT_VARIABLE mb_python_prefix)
    set(Python3_EXECUTABLE /usr/bin/python3)
    set(Python3_ROOT_DIR ${mb_python_prefix})
  endif()
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module ${mb_python_required})
if(Python3_FOUND)
  find_package(pybind11 CONFIG ${mb_python_required})
endif()
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy" RESULT_VARIABLE mb_numpy_missing
                  OUTPUT_QUIET ERROR_QUIET)
endif()
# numpy is needed at run time only (pybind11 reaches it through the interpreter), so ON, as the
# pip build asks, builds without it; AUTO skips a package its tests could not import.
if(NOT Python3_FOUND OR NOT pybind11_FOUND OR (mb_numpy_missing AND NOT MB_PYTHON STREQUAL "ON"))
  message(STATUS "mambacpp: the Python package is not built (it needs python3-dev, pybind11-dev and python3-numpy)")
  return()
endif()

file(GLOB MB_PYTHON_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/src/*.cc)
pybind11_add_module(_mambacpp ${MB_PYTHON_SOURCES})
target_link_libraries(_mambacpp PRIVATE mambacpp_api)
target_compile_definitions(_mambacpp PRIVATE MB_VERSION="${PROJECT_VERSION}")
set(MB_PYTHON_PACKAGE_DIR ${PROJECT_BINARY_DIR}/python/mambacpp)
set_target_properties(_mambacpp PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${MB_PYTHON_PACKAGE_DIR})
# The pure-Python files are copied next to the module on every build, so the build folder's
# python/ is the package as `pip install .` lays it out.
file(GLOB MB_PYTHON_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/mambacpp/*)
add_custom_target(mambacpp_python_files ALL
                  COMMAND ${CMAKE_COMMAND} -E make_directory ${MB_PYTHON_PACKAGE_DIR}
                  COMMAND ${CMAKE_COMMAND} -E copy_if_different ${MB_PYTHON_FILES} ${MB_PYTHON_PACKAGE_DIR}
                  DEPENDS ${MB_PYTHON_FILES})
add_dependencies(_mambacpp mambacpp_python_files)
set(MB_PYTHON_BUILT ON)
message(STATUS "mambacpp: the Python package is built for ${Python3_EXECUTABLE}")
