// SPDX-License-Identifier: MIT
#include "engine/stop_strings.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace mb {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); ++i) {
    if (stops_[i].empty()) {
      throw Error("StopStringMatcher: stop string " + std::to_string(i) +
                  " is empty; an empty stop string would stop generation before any text");
    }
  }
}

std::string StopStringMatcher::push(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);

  // held_ contained no complete stop string before this piece (the matcher would have stopped),
  // and every occurrence that ends in the new piece starts inside held_, because the part
  // before the piece is a suffix that is a prefix of the stop string and held_ is the longest
  // such suffix. Searching held_ alone therefore finds every new completion.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t start = held_.find(stops_[i]);
    if (start == std::string::npos) continue;
    const size_t end = start + stops_[i].size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      matched_index_ = i;
    }
  }
  if (best_start != std::string::npos) {
    stopped_ = true;
    std::string emitted = held_.substr(0, best_start);
    held_.clear();
    return emitted;
  }

  const size_t safe = held_.size() - longest_pending_suffix();
  std::string emitted = held_.substr(0, safe);
  held_.erase(0, safe);
  return emitted;
}

std::string StopStringMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(held_, std::string());
}

std::string_view StopStringMatcher::matched_stop() const {
  if (!stopped_) return {};
  return stops_[matched_index_];
}

size_t StopStringMatcher::longest_pending_suffix() const {
  const std::string_view held = held_;
  size_t longest = 0;
  for (const std::string& stop : stops_) {
    // Only proper prefixes count: a complete occurrence would already have stopped the matcher.
    const size_t limit = std::min(held.size(), stop.size() - 1);
    for (size_t length = limit; length > longest; --length) {
      if (held.substr(held.size() - length) == std::string_view(stop).substr(0, length)) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

}  // namespace mb
