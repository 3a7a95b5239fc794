// SPDX-License-Identifier: MIT
// A cache of recurrent states keyed by the token prefix they have consumed, for serving: a new
// request resumes from the longest cached prefix of its prompt and prefills only the rest.
//
// A Mamba state is a few MB whatever the context length, and the engine is exact (prefill equals
// decode steps bit for bit, a sequence in a batch equals it alone, the chunk size changes
// nothing), so a request resumed from a cached state computes exactly the tokens and logits of
// the same request run cold. That is what makes the cache safe to use by default.
//
// An entry made right after a forward pass also keeps the logits row of its last position, so a
// prompt equal to a cached prefix (a retry, a regenerate, the same question again) resumes with
// nothing left to prefill: its first token is sampled from those logits, which are bit for bit the
// ones the cold run computes.
//
// Entries are found through a hash of the prefix but always compared token by token, so a hash
// collision can never hand out the wrong state. Memory is bounded by a byte budget with
// least-recently-used eviction. Not thread-safe: one owner (the scheduler loop) calls it.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/model.h"

namespace mb {

class PrefixStateCache {
 public:
  // `budget_bytes`: the most the stored states, logits rows and token lists may take; 0 disables
  // the cache.
  explicit PrefixStateCache(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Stores a copy of `state`, which must have consumed exactly `prefix` (from a fresh state), and
  // of `logits`, the model's output row at the prefix's last position (empty when not at hand).
  // An entry for the same prefix is refreshed instead (and given the logits it lacked). Entries
  // larger than the budget are not kept. Evicts least recently used entries to stay within the
  // budget.
  void put(std::span<const int32_t> prefix, const SequenceState& state, std::span<const float> logits = {});

  // The length of the longest cached prefix of `tokens` (0 when none), after copying its state
  // into `state`. With `max_length`, only prefixes of at most that many tokens are considered.
  size_t lookup(std::span<const int32_t> tokens, SequenceState& state, size_t max_length = SIZE_MAX);
  // The same for a request, which needs the logits of its prompt's last position: a prefix
  // covering all of `tokens` counts only when its entry holds that logits row, which is copied
  // into `logits`; for a shorter prefix `logits` is emptied and the rest is prefilled.
  size_t lookup_resumable(std::span<const int32_t> tokens, SequenceState& state, std::vector<float>& logits);

  size_t entries() const { return lru_.size(); }
  size_t bytes() const { return bytes_; }
  size_t budget_bytes() const { return budget_bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::vector<int32_t> prefix;
    SequenceState state;
    std::vector<float> logits;  // the last position's output row, or empty
    uint64_t hash;
    size_t bytes() const {
      return prefix.size() * sizeof(int32_t) + state.bytes() + logits.size() * sizeof(float);
    }
  };
  using Lru = std::list<Entry>;  // most recently used first

  // Hashes of every prefix of `tokens`, hash[i] covering tokens[0, i).
  static std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens);
  void evict_to(size_t budget);
  void erase(Lru::iterator it);
  Lru::iterator find(std::span<const int32_t> prefix, uint64_t hash);
  // The most recently used entry of the longest cached prefix of `tokens` of at most `max_length`
  // tokens (one covering all of `tokens` only if it has logits, with `full_needs_logits`), counted
  // as a hit or a miss; lru_.end() when none.
  Lru::iterator find_longest(std::span<const int32_t> tokens, size_t max_length, bool full_needs_logits);

  size_t budget_bytes_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  Lru lru_;
  std::unordered_multimap<uint64_t, Lru::iterator> by_hash_;
  std::unordered_map<size_t, size_t> lengths_;  // prefix length -> entries of that length
};

}  // namespace mb
