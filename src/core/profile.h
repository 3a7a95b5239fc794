// Optional per-phase timing of a forward pass, for benchmarks: where does prefill time go?
// A null profile (the default in ComputeContext) costs one pointer test per phase.
#pragma once

#include <array>
#include <chrono>
#include <string_view>

namespace mb {

enum class Phase {
  Embed,
  Norm,
  InProj,
  Conv,
  XProj,
  DtProj,
  Scan,
  GateNorm,
  OutProj,
  FinalNorm,
  LmHead,
  Other,
  kCount
};
std::string_view phase_name(Phase phase);

struct PhaseProfile {
  std::array<double, static_cast<size_t>(Phase::kCount)> seconds{};
  double& operator[](Phase phase) { return seconds[static_cast<size_t>(phase)]; }
  double total() const;
};

class ScopedPhase {
 public:
  ScopedPhase(PhaseProfile* profile, Phase phase) : profile_(profile), phase_(phase) {
    if (profile_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedPhase() {
    if (profile_ != nullptr)
      (*profile_)[phase_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseProfile* profile_;
  Phase phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mb
