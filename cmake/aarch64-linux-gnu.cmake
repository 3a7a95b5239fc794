# SPDX-License-Identifier: MIT
# Cross build for AArch64 Linux with Debian's cross compiler (g++-aarch64-linux-gnu) and the
# multiarch :arm64 development packages; test binaries, and the CLI the tests start, run under
# qemu-user. Usage (see DEVELOPERS.md):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Libraries and CMake package files come from /usr/lib/aarch64-linux-gnu (multiarch), headers from
# /usr/include, and header-only packages from /usr/share; the host's x86-64 libraries are never
# searched, as their directory is named by the library architecture.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")

# The binaries run against the multiarch :arm64 runtime (libc6, libstdc++6, libgomp1 in
# /lib/aarch64-linux-gnu), which qemu finds at the loader's own paths, so it needs no -L. Not the
# cross toolchain's copy in /usr/aarch64-linux-gnu: libutf8proc-dev:arm64 brings in libc6:arm64,
# and a loader from one glibc build with the libc.so of another hangs at the first thread.
# ctest, gtest's test discovery and the CLI tests (tests/CMakeLists.txt) all run programs through
# this emulator.
find_program(MB_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(MB_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MB_QEMU_AARCH64})
endif()

# A host nvcc targets x86-64 hosts, so the cross build is CPU-only.
set(MB_CUDA OFF CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON or OFF")
