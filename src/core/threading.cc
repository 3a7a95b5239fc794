// SPDX-License-Identifier: MIT
#include "core/threading.h"

#include <omp.h>

#include <string>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace mb {

#if defined(__x86_64__) || defined(__i386__)
// F16C is CPUID leaf 1, ECX bit 29. It is read directly because clang 14's
// __builtin_cpu_supports does not know the "f16c" feature name that GCC accepts. Read once:
// kernels_for asks on every kernel call, and in a virtual machine each CPUID instruction is a
// trip to the hypervisor (it made every AVX2 kernel call measurably slower).
static bool x86_has_f16c() {
  static const bool has_f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return has_f16c;
}
#endif

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
    case Isa::Neon:
      return "neon";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return true;
#if defined(__x86_64__)
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && x86_has_f16c();
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#elif defined(__aarch64__)
    // Advanced SIMD, with its fused multiply-add and f16 conversions, is mandatory in ARMv8-A.
    case Isa::Neon:
      return true;
#endif
    default:
      return false;
  }
}

Isa best_isa() {
#if defined(__SANITIZE_THREAD__)
  // TSan cannot see the loads and stores of vector intrinsics, so a TSan build runs the scalar
  // kernels, whose every access it checks. All instruction sets share one kernel source and
  // split work across threads identically, so a race is found in any of them by the scalar one.
  return Isa::Scalar;
#endif
#if defined(__x86_64__)
  static const Isa best = isa_supported(Isa::Avx512) ? Isa::Avx512
                          : isa_supported(Isa::Avx2) ? Isa::Avx2
                                                     : Isa::Scalar;
  return best;
#elif defined(__aarch64__)
  return Isa::Neon;
#else
  return Isa::Scalar;
#endif
}

int default_thread_count() {
  return omp_get_num_procs() > 0 ? omp_get_num_procs() : 1;
}

void check_thread_count(int n_threads) {
  if (n_threads < 1 || n_threads > kMaxThreads)
    throw Error("ComputeContext: n_threads must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                std::to_string(n_threads));
}

}  // namespace mb
