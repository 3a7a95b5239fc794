# The CUDA backend is optional. nvcc is looked for on PATH and in the usual install prefix;
# when found (and MB_CUDA is not OFF) MB_HAVE_CUDA is set so GPU sources can be added later
# without touching the CPU build. Nothing in the CPU build depends on it.
set(MB_HAVE_CUDA OFF)
if(NOT MB_CUDA STREQUAL "OFF")
  find_program(MB_NVCC nvcc PATHS /usr/local/cuda/bin)
  if(MB_NVCC)
    set(MB_HAVE_CUDA ON)
    message(STATUS "mambacpp: nvcc found at ${MB_NVCC}; CUDA backend enabled (no GPU kernels yet)")
  elseif(MB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MB_CUDA=ON but nvcc was not found")
  else()
    message(STATUS "mambacpp: nvcc not found; building the CPU backend only")
  endif()
endif()
