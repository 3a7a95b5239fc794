// SPDX-License-Identifier: MIT
// Optional per-phase timing of a forward pass, for benchmarks: where does prefill time go?
// A null profile (the default in ComputeContext) costs one pointer test per phase.
//
// The phases are not fixed here: each architecture names its own (Mamba-2's gated norm, Mamba-3's
// fused mixer) as small integer ids, and a profile made with the model's phase names
// (Model::phase_names) reports the time under them.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace mb {

// An index into the phase names of the model being profiled.
using PhaseId = int;

struct PhaseProfile {
  std::vector<std::string> names;  // names[id]; ids without a name read as "phase <id>"
  std::vector<double> seconds;     // seconds[id], grown on first use of an id

  PhaseProfile() = default;
  explicit PhaseProfile(std::vector<std::string> phase_names)
      : names(std::move(phase_names)), seconds(names.size(), 0.0) {}

  double& operator[](PhaseId id) {
    if (static_cast<size_t>(id) >= seconds.size()) seconds.resize(id + 1, 0.0);
    return seconds[id];
  }
  std::string name(PhaseId id) const;
  // The seconds of the phase named `phase`, or 0 when no phase has that name.
  double seconds_of(std::string_view phase) const;
  double total() const;
};

class ScopedPhase {
 public:
  ScopedPhase(PhaseProfile* profile, PhaseId phase) : profile_(profile), phase_(phase) {
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
  PhaseId phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mb
