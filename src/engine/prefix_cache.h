// A cache of recurrent states keyed by the token prefix they have consumed, for serving: a new
// request resumes from the longest cached prefix of its prompt and prefills only the rest.
//
// A Mamba state is a few MB whatever the context length, and the engine is exact (prefill equals
// decode steps bit for bit, a sequence in a batch equals it alone, the chunk size changes
// nothing), so a request resumed from a cached state computes exactly the tokens and logits of
// the same request run cold. That is what makes the cache safe to use by default.
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
  // `budget_bytes`: the most the stored states and token lists may take; 0 disables the cache.
  explicit PrefixStateCache(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Stores a copy of `state`, which must have consumed exactly `prefix` (from a fresh state).
  // An entry for the same prefix is refreshed instead. States larger than the budget are not
  // kept. Evicts least recently used entries to stay within the budget.
  void put(std::span<const int32_t> prefix, const SequenceState& state);

  // The length of the longest cached prefix of `tokens` (0 when none), after copying its state
  // into `state`. With `max_length`, only prefixes of at most that many tokens are considered
  // (a request must keep at least one token to prefill, whose logits it needs).
  size_t lookup(std::span<const int32_t> tokens, SequenceState& state, size_t max_length = SIZE_MAX);

  size_t entries() const { return lru_.size(); }
  size_t bytes() const { return bytes_; }
  size_t budget_bytes() const { return budget_bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::vector<int32_t> prefix;
    SequenceState state;
    uint64_t hash;
    size_t bytes() const { return prefix.size() * sizeof(int32_t) + state.bytes(); }
  };
  using Lru = std::list<Entry>;  // most recently used first

  // Hashes of every prefix of `tokens`, hash[i] covering tokens[0, i).
  static std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens);
  void evict_to(size_t budget);
  Lru::iterator find(std::span<const int32_t> prefix, uint64_t hash);

  size_t budget_bytes_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  Lru lru_;
  std::unordered_multimap<uint64_t, Lru::iterator> by_hash_;
  std::unordered_map<size_t, size_t> lengths_;  // prefix length -> entries of that length
};

}  // namespace mb
