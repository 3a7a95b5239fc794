// Argument checks and instruction-set dispatch of the Mamba-2 scan.
#include <string>

#include "core/error.h"
#include "ops/cpu/mamba2_kernels.h"
#include "ops/selective_scan.h"

namespace mb {

void mamba2_scan(const ComputeContext& ctx, const Mamba2ScanParams& p,
                 std::span<const Mamba2ScanSequence> sequences) {
  MB_CHECK(p.n_heads > 0 && p.headdim > 0 && p.d_state > 0 && p.d_state <= kMaxStateSize);
  MB_CHECK(p.n_groups > 0 && p.n_heads % p.n_groups == 0 && p.chunk > 0);
  MB_CHECK(p.dt_bias && p.a_base2 && p.a && p.d_skip);
  for (const auto& s : sequences) {
    MB_CHECK(s.length >= 0 && s.ldxbc >= p.conv_width() && s.lddt >= p.n_heads && s.ldy >= p.d_inner());
    MB_CHECK(s.length == 0 || (s.xbc != nullptr && s.dt != nullptr && s.state != nullptr && s.y != nullptr));
  }
  if (!isa_supported(ctx.isa))
    throw Error(std::string("instruction set ") + isa_name(ctx.isa) + " is not supported by this CPU");
  // Only the targets of this architecture are compiled (CMakeLists.txt); isa_supported has
  // refused the others above.
  switch (ctx.isa) {
#if defined(__x86_64__)
    case Isa::Avx512:
      cpu::mamba2_scan_avx512(p, sequences, ctx.n_threads);
      return;
    case Isa::Avx2:
      cpu::mamba2_scan_avx2(p, sequences, ctx.n_threads);
      return;
#elif defined(__aarch64__)
    case Isa::Neon:
      cpu::mamba2_scan_neon(p, sequences, ctx.n_threads);
      return;
#endif
    default:
      cpu::mamba2_scan_scalar(p, sequences, ctx.n_threads);
      return;
  }
}

}  // namespace mb
