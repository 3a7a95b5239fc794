// Argument checks and instruction-set dispatch of the Mamba-3 scan.
#include <string>

#include "core/error.h"
#include "ops/cpu/mamba3_kernels.h"

namespace mb {

void mamba3_scan(const ComputeContext& ctx, const Mamba3ScanParams& p,
                 std::span<const Mamba3ScanSequence> sequences) {
  MB_CHECK(p.n_heads > 0 && p.headdim > 0 && p.d_state > 0 && p.n_groups > 0 && p.n_heads % p.n_groups == 0);
  MB_CHECK(p.n_angles >= 0 && 2 * p.n_angles <= p.d_state && p.chunk > 0);
  MB_CHECK(p.dt_bias && p.b_bias && p.c_bias && p.b_norm && p.c_norm && p.d_skip);
  for (const auto& s : sequences) {
    MB_CHECK(s.length >= 0 && s.ldp >= p.proj_width() && s.ldy >= p.d_inner());
    MB_CHECK(s.length == 0 || (s.proj != nullptr && s.state != nullptr && s.y != nullptr));
  }
  if (!isa_supported(ctx.isa))
    throw Error(std::string("instruction set ") + isa_name(ctx.isa) + " is not supported by this CPU");
  // Only the targets of this architecture are compiled (CMakeLists.txt); isa_supported has
  // refused the others above.
  switch (ctx.isa) {
#if defined(__x86_64__)
    case Isa::Avx512:
      cpu::mamba3_scan_avx512(p, sequences, ctx.n_threads);
      return;
    case Isa::Avx2:
      cpu::mamba3_scan_avx2(p, sequences, ctx.n_threads);
      return;
#elif defined(__aarch64__)
    case Isa::Neon:
      cpu::mamba3_scan_neon(p, sequences, ctx.n_threads);
      return;
#endif
    default:
      cpu::mamba3_scan_scalar(p, sequences, ctx.n_threads);
      return;
  }
}

}  // namespace mb
