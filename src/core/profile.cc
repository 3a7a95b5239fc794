// SPDX-License-Identifier: MIT
#include "core/profile.h"

namespace mb {

std::string PhaseProfile::name(PhaseId id) const {
  if (id >= 0 && static_cast<size_t>(id) < names.size()) return names[id];
  return "phase " + std::to_string(id);
}

double PhaseProfile::seconds_of(std::string_view phase) const {
  for (size_t i = 0; i < names.size() && i < seconds.size(); ++i)
    if (names[i] == phase) return seconds[i];
  return 0.0;
}

double PhaseProfile::total() const {
  double sum = 0;
  for (double s : seconds) sum += s;
  return sum;
}

}  // namespace mb
