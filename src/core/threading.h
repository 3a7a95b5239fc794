// SPDX-License-Identifier: MIT
// Execution context, passed explicitly to every kernel (no global pool, no global ISA switch).
//
// Parallel loops only ever split disjoint outputs (rows, output columns, channel blocks),
// never a reduction, so results are bit-identical for any thread count. The instruction set
// is part of the context so tests can run the kernels of every instruction set side by side
// (AVX-512, AVX2 and scalar on x86-64; NEON and scalar on AArch64); all produce the same bits
// (see src/ops/cpu/vec16.h).
#pragma once

namespace mb {

enum class Isa { Scalar, Avx2, Avx512, Neon };

const char* isa_name(Isa isa);
Isa best_isa();               // the widest instruction set this CPU supports
bool isa_supported(Isa isa);  // false for the instruction sets of other architectures

struct PhaseProfile;

struct ComputeContext {
  int n_threads = 1;
  Isa isa = best_isa();
  PhaseProfile* profile = nullptr;  // when set, forward passes add their per-phase times to it
};

// The number of processors OpenMP sees.
int default_thread_count();

// The most threads a ComputeContext may ask for. OpenMP runtimes crash (rather than fail
// cleanly) when thread creation runs out of memory, so larger requests are refused up front; the
// bound is fixed, not derived from this machine, so a request behaves the same everywhere.
inline constexpr int kMaxThreads = 1024;

// Throws mb::Error unless 1 <= n_threads <= kMaxThreads.
void check_thread_count(int n_threads);

}  // namespace mb
