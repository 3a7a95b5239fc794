// SPDX-License-Identifier: MIT
// The CPU op entry points (declared in src/ops/*.h): each checks its arguments, then calls the
// kernel of the context's instruction set through kernels_for, the one place that picks a
// target's table.
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/cpu/vec16.h"
#include "ops/quant_matmul.h"

namespace mb {
namespace cpu {
namespace {

#if defined(__x86_64__)
// AVX-512's table, its quant entries chosen for this CPU: the AVX-512 quantized kernels use
// VNNI's byte dot products; without VNNI the AVX2 kernels run (same bits).
KernelTable avx512_table() {
  KernelTable table = kernels_avx512();
  table.quant = __builtin_cpu_supports("avx512vnni") ? quant_kernels_avx512_vnni() : kernels_avx2().quant;
  return table;
}
#endif

}  // namespace

const KernelTable& kernels_for(Isa isa) {
  if (!isa_supported(isa))
    throw Error(std::string("instruction set ") + isa_name(isa) + " is not supported by this CPU");
  // Only the targets of this architecture are compiled (CMakeLists.txt); isa_supported has
  // refused the others above.
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx512: {
      static const KernelTable avx512 = avx512_table();
      return avx512;
    }
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

namespace {

// Per calling thread, so concurrent forward calls never share it; the kernel's worker threads
// only read it.
struct ActivationBuffers {
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<int32_t> sums16;
};
thread_local ActivationBuffers activation_buffers;

// The product for a quantized args.w: quantizes the activation rows, then runs the quantized
// kernel of ctx.isa.
void quant_matmul(const ComputeContext& ctx, const MatmulArgs& a) {
  const int64_t block = activation_block(a.w.dtype);
  const int64_t K = a.w.cols;
  if (K % dtype_block_weights(a.w.dtype) != 0)
    throw Error("matmul: " + std::string(dtype_name(a.w.dtype)) + " weights need K to be a multiple of " +
                std::to_string(dtype_block_weights(a.w.dtype)) + ", got " + std::to_string(K));
  const QuantKernels& kernels = kernels_for(ctx.isa).quant;
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
  parallel_for(n_threads, a.m, [&](int64_t r) {
    kernels.quantize(a.x + r * a.ldx, K, block, q + r * K, scales + r * (K / block), sums16 + r * (K / 16));
  });
  const QuantActivations x{q, scales, sums16, K, block};
  kernels.matmul(a, x, ctx.n_threads);
}

}  // namespace
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

void mamba2_scan(const ComputeContext& ctx, const Mamba2ScanParams& p,
                 std::span<const Mamba2ScanSequence> sequences) {
  MB_CHECK(p.n_heads > 0 && p.headdim > 0 && p.d_state > 0 && p.d_state <= kMaxStateSize);
  MB_CHECK(p.n_groups > 0 && p.n_heads % p.n_groups == 0 && p.chunk > 0);
  MB_CHECK(p.dt_bias && p.a_base2 && p.a && p.d_skip);
  for (const auto& s : sequences) {
    MB_CHECK(s.length >= 0 && s.ldxbc >= p.conv_width() && s.lddt >= p.n_heads && s.ldy >= p.d_inner());
    MB_CHECK(s.length == 0 || (s.xbc != nullptr && s.dt != nullptr && s.state != nullptr && s.y != nullptr));
  }
  cpu::kernels_for(ctx.isa).mamba2_scan(p, sequences, ctx.n_threads);
}

void mamba3_scan(const ComputeContext& ctx, const Mamba3ScanParams& p,
                 std::span<const Mamba3ScanSequence> sequences) {
  MB_CHECK(p.n_heads > 0 && p.headdim > 0 && p.d_state > 0 && p.n_groups > 0 && p.n_heads % p.n_groups == 0);
  MB_CHECK(p.n_angles >= 0 && 2 * p.n_angles <= p.d_state && p.chunk > 0);
  MB_CHECK(p.dt_bias && p.b_bias && p.c_bias && p.b_norm && p.c_norm && p.d_skip);
  for (const auto& s : sequences) {
    MB_CHECK(s.length >= 0 && s.ldp >= p.proj_width() && s.ldy >= p.d_inner());
    MB_CHECK(s.length == 0 || (s.proj != nullptr && s.state != nullptr && s.y != nullptr));
  }
  cpu::kernels_for(ctx.isa).mamba3_scan(p, sequences, ctx.n_threads);
}

void gated_delta_net(const ComputeContext& ctx, const GatedDeltaNetParams& p,
                     std::span<const GatedDeltaNetSequence> sequences) {
  MB_CHECK(p.n_key_heads > 0 && p.n_value_heads > 0 && p.n_value_heads % p.n_key_heads == 0);
  MB_CHECK(p.key_dim > 0 && p.value_dim > 0 && p.a_neg != nullptr && p.dt_bias != nullptr);
  for (const auto& s : sequences) {
    MB_CHECK(s.length >= 0 && s.ldqkv >= p.conv_width() && s.ldb >= p.n_value_heads &&
             s.lda >= p.n_value_heads);
    MB_CHECK(s.ldy >= p.n_value_heads * p.value_dim);
    MB_CHECK(s.length == 0 || (s.qkv && s.b && s.a && s.state && s.y));
  }
  cpu::kernels_for(ctx.isa).gated_delta_net(p, sequences, ctx.n_threads);
}

void attention(const ComputeContext& ctx, const AttentionParams& p,
               std::span<const AttentionSequence> sequences) {
  MB_CHECK(p.n_heads > 0 && p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0 && p.head_dim > 0);
  for (const auto& s : sequences) {
    MB_CHECK(s.rows >= 0 && s.position >= 0 && s.ldq >= p.q_width() && s.ldy >= p.q_width());
    MB_CHECK(s.rows == 0 ||
             (s.q != nullptr && s.k.blocks != nullptr && s.v.blocks != nullptr && s.y != nullptr));
    MB_CHECK(s.rows == 0 || (s.k.block_positions > 0 && s.v.block_positions > 0 && s.k.ld >= p.kv_width() &&
                             s.v.ld >= p.kv_width()));
  }
  cpu::kernels_for(ctx.isa).attention(p, sequences, ctx.n_threads);
}

void glu(const ComputeContext& ctx, const GluArgs& a) {
  const int64_t in_width = gated_activation(a.activation) ? 2 * a.width : a.width;
  MB_CHECK(a.rows >= 0 && a.width >= 0 && a.ldx >= in_width && a.ldy >= a.width);
  if (a.rows == 0 || a.width == 0) return;
  MB_CHECK(a.x != nullptr && a.y != nullptr);
  cpu::kernels_for(ctx.isa).glu(a, ctx.n_threads);
}

void scale_rows(const ComputeContext& ctx, const ScaleArgs& a) {
  MB_CHECK(a.rows >= 0 && a.cols >= 0 && a.ldx >= a.cols && a.ldy >= a.cols);
  if (a.rows == 0 || a.cols == 0) return;
  MB_CHECK(a.x != nullptr && a.y != nullptr);
  cpu::kernels_for(ctx.isa).scale_rows(a, ctx.n_threads);
}

const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::SwiGlu:
      return "swiglu";
    case Activation::ReluSquared:
      return "relu2";
    case Activation::GeluErf:
      return "geglu";
    case Activation::SigmoidGlu:
      return "sigmoid-gate";
  }
  return "?";
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
