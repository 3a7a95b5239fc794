// Dispatch from the public op entry points to the kernel table of the context's instruction set.
#include "core/error.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/cpu/vec16.h"

namespace mb {
namespace cpu {

const KernelTable& kernels_for(Isa isa) {
  if (!isa_supported(isa))
    throw Error(std::string("instruction set ") + isa_name(isa) + " is not supported by this CPU");
  // Only the targets of this architecture are compiled (CMakeLists.txt); isa_supported has
  // refused the others above.
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx512:
      return kernels_avx512();
    case Isa::Avx2:
      return kernels_avx2();
#elif defined(__aarch64__)
    case Isa::Neon:
      return kernels_neon();
#endif
    default:
      return kernels_scalar();
  }
}

}  // namespace cpu

void matmul(const ComputeContext& ctx, const MatmulArgs& args) {
  if (dtype_is_quantized(args.w.dtype)) return cpu::quant_matmul(ctx, args);
  cpu::kernels_for(ctx.isa).matmul(args, ctx.n_threads);
}

void rms_norm(const ComputeContext& ctx, const RmsNormArgs& args) {
  cpu::kernels_for(ctx.isa).rms_norm(args, ctx.n_threads);
}

void gated_rms_norm(const ComputeContext& ctx, const GatedRmsNormArgs& args) {
  MB_CHECK(args.group_size > 0 && args.dim % args.group_size == 0);
  cpu::kernels_for(ctx.isa).gated_rms_norm(args, ctx.n_threads);
}

void causal_conv_silu(const ComputeContext& ctx, std::span<const CausalConvArgs> sequences) {
  for (const auto& s : sequences) MB_CHECK(s.kernel_size >= 1 && s.kernel_size <= kMaxConvKernel);
  cpu::kernels_for(ctx.isa).causal_conv_silu(sequences, ctx.n_threads);
}

void selective_scan(const ComputeContext& ctx, std::span<const SelectiveScanArgs> sequences) {
  for (const auto& s : sequences) MB_CHECK(s.d_state >= 1 && s.d_state <= kMaxStateSize);
  cpu::kernels_for(ctx.isa).selective_scan(sequences, ctx.n_threads);
}

float exp_f32(float x) {
  return cpu::kernels_for(best_isa()).exp1(x);
}
float silu_f32(float x) {
  return cpu::kernels_for(best_isa()).silu1(x);
}
float softplus_f32(float x) {
  return cpu::kernels_for(best_isa()).softplus1(x);
}

}  // namespace mb
