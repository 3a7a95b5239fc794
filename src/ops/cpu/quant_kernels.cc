// Dispatch of the quantized matmul: activation quantization (shared by every instruction set),
// then the kernel table of the context's instruction set.
#include "ops/cpu/quant_kernels.h"

#include <vector>

#include "core/error.h"
#include "ops/quant_matmul.h"

namespace mb::cpu {
namespace {

const QuantKernelTable& quant_kernels_for(Isa isa) {
  if (!isa_supported(isa))
    throw Error(std::string("instruction set ") + isa_name(isa) + " is not supported by this CPU");
#if defined(__x86_64__)
  // The AVX-512 kernel is built for VNNI's byte dot products; without them the AVX2 kernel
  // (same bits) runs.
  if (isa == Isa::Avx512)
    return __builtin_cpu_supports("avx512vnni") ? quant_kernels_avx512() : quant_kernels_avx2();
  if (isa == Isa::Avx2) return quant_kernels_avx2();
#endif
#if defined(__aarch64__)
  if (isa == Isa::Neon) return quant_kernels_neon();
#endif
  return quant_kernels_scalar();
}

// Per calling thread, so concurrent forward calls never share it; the kernel's worker threads
// only read it.
struct ActivationBuffers {
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<int32_t> sums16;
};
thread_local ActivationBuffers activation_buffers;

}  // namespace

void quant_matmul(const ComputeContext& ctx, const MatmulArgs& a) {
  const int64_t block = activation_block(a.w.dtype);
  const int64_t K = a.w.cols;
  if (K % dtype_block_weights(a.w.dtype) != 0)
    throw Error("matmul: " + std::string(dtype_name(a.w.dtype)) + " weights need K to be a multiple of " +
                std::to_string(dtype_block_weights(a.w.dtype)) + ", got " + std::to_string(K));
  const QuantKernelTable& kernels = quant_kernels_for(ctx.isa);
  if (a.m <= 0 || a.w.rows <= 0) return;
  ActivationBuffers& buffers = activation_buffers;
  const size_t m = static_cast<size_t>(a.m);
  if (buffers.q.size() < m * K) buffers.q.resize(m * K);
  if (buffers.scales.size() < m * (K / block)) buffers.scales.resize(m * (K / block));
  if (buffers.sums16.size() < m * (K / 16)) buffers.sums16.resize(m * (K / 16));
  int8_t* q = buffers.q.data();
  float* scales = buffers.scales.data();
  int32_t* sums16 = buffers.sums16.data();
  const int n_threads = ctx.n_threads;
#pragma omp parallel for schedule(static) num_threads(n_threads) if (n_threads > 1 && a.m > 1)
  for (int64_t r = 0; r < a.m; ++r)
    kernels.quantize(a.x + r * a.ldx, K, block, q + r * K, scales + r * (K / block), sums16 + r * (K / 16));
  const QuantActivations x{q, scales, sums16, K, block};
  kernels.matmul(a, x, ctx.n_threads);
}

}  // namespace mb::cpu
