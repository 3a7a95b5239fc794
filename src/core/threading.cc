#include "core/threading.h"

#include <omp.h>

namespace mb {

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
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
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

}  // namespace mb
