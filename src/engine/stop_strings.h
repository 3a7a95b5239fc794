// SPDX-License-Identifier: MIT
// Streaming detection of stop strings in generated text, across token boundaries.
//
// Generated text arrives one decoded token piece at a time, and a stop string can straddle
// several pieces. The matcher holds back exactly the longest suffix of the text seen so far that
// is a proper prefix of some stop string, and releases everything before it at once, so
// streaming is never delayed by more than a possible stop string.
//
// Matching is byte-wise. When both the text and the stop strings are valid UTF-8, every cut the
// matcher makes falls on a character boundary: a held-back suffix begins where a stop string
// begins, with a lead byte, and a continuation byte never equals a lead byte.
//
// When several stop strings occur, the one that completes first (lowest end offset) wins, as it
// would if the text arrived one byte at a time; among those ending together the one starting
// earliest wins, so no part of any completed stop string is emitted. The output is therefore the
// same however the text is split into pieces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mb {

class StopStringMatcher {
 public:
  // Throws mb::Error when one of the stop strings is empty. An empty list never stops.
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Feeds the next decoded text piece and returns the text that is now safe to emit (text that
  // can no longer be the beginning of a stop string). When a stop string completes, stopped()
  // becomes true and the returned text ends right before it; the stop string and anything after
  // it are dropped, and later pieces are ignored.
  std::string push(std::string_view piece);

  // At the end of generation: the held-back tail, which turned out not to start a stop string.
  // Returns nothing once stopped.
  std::string flush();

  bool stopped() const { return stopped_; }

  // The stop string that completed, or an empty view when none has.
  std::string_view matched_stop() const;

 private:
  // Length of the longest suffix of held_ that is a proper prefix of some stop string.
  size_t longest_pending_suffix() const;

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  size_t matched_index_ = 0;
};

}  // namespace mb
