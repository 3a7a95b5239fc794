// SPDX-License-Identifier: MIT
#include "engine/prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace mb {

std::vector<uint64_t> PrefixStateCache::prefix_hashes(std::span<const int32_t> tokens) {
  // FNV-1a over the ids' bytes: each prefix's hash extends the previous one, so all of them
  // cost one pass.
  std::vector<uint64_t> hashes(tokens.size() + 1);
  uint64_t hash = 0xcbf29ce484222325ull;
  hashes[0] = hash;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t id = static_cast<uint32_t>(tokens[i]);
    for (int b = 0; b < 4; ++b) hash = (hash ^ ((id >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    hashes[i + 1] = hash;
  }
  return hashes;
}

PrefixStateCache::Lru::iterator PrefixStateCache::find(std::span<const int32_t> prefix, uint64_t hash) {
  auto [begin, end] = by_hash_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    const Entry& entry = *it->second;
    if (entry.prefix.size() == prefix.size() &&
        std::equal(prefix.begin(), prefix.end(), entry.prefix.begin()))
      return it->second;
  }
  return lru_.end();
}

void PrefixStateCache::put(std::span<const int32_t> prefix, const SequenceState& state,
                           std::span<const float> logits) {
  const uint64_t hash = prefix_hashes(prefix).back();
  const size_t bytes = prefix.size() * sizeof(int32_t) + state.bytes() + logits.size() * sizeof(float);
  if (auto it = find(prefix, hash); it != lru_.end()) {
    // The same prefix gives the same state: refresh only, unless the entry gains its logits.
    if (!it->logits.empty() || logits.empty() || bytes > budget_bytes_) {
      lru_.splice(lru_.begin(), lru_, it);
      return;
    }
    erase(it);
  }
  if (bytes > budget_bytes_) return;
  Entry entry{{prefix.begin(), prefix.end()}, state, {logits.begin(), logits.end()}, hash};
  evict_to(budget_bytes_ - entry.bytes());
  bytes_ += entry.bytes();
  lru_.push_front(std::move(entry));
  by_hash_.emplace(hash, lru_.begin());
  ++lengths_[prefix.size()];
}

void PrefixStateCache::erase(Lru::iterator victim) {
  auto [begin, end] = by_hash_.equal_range(victim->hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second == victim) {
      by_hash_.erase(it);
      break;
    }
  }
  if (--lengths_[victim->prefix.size()] == 0) lengths_.erase(victim->prefix.size());
  bytes_ -= victim->bytes();
  lru_.erase(victim);
}

void PrefixStateCache::evict_to(size_t budget) {
  while (bytes_ > budget && !lru_.empty()) erase(std::prev(lru_.end()));
}

PrefixStateCache::Lru::iterator PrefixStateCache::find_longest(std::span<const int32_t> tokens,
                                                               size_t max_length, bool full_needs_logits) {
  const size_t limit = std::min(tokens.size(), max_length);
  std::vector<size_t> candidates;
  for (const auto& [length, count] : lengths_)
    if (length > 0 && length <= limit) candidates.push_back(length);
  std::sort(candidates.rbegin(), candidates.rend());
  if (!candidates.empty()) {
    const std::vector<uint64_t> hashes = prefix_hashes(tokens.first(candidates.front()));
    for (size_t length : candidates) {
      auto it = find(tokens.first(length), hashes[length]);
      if (it == lru_.end()) continue;
      if (full_needs_logits && length == tokens.size() && it->logits.empty()) continue;
      lru_.splice(lru_.begin(), lru_, it);
      ++hits_;
      return it;
    }
  }
  ++misses_;
  return lru_.end();
}

size_t PrefixStateCache::lookup(std::span<const int32_t> tokens, SequenceState& state, size_t max_length) {
  const auto it = find_longest(tokens, max_length, false);
  if (it == lru_.end()) return 0;
  state = it->state;
  return it->prefix.size();
}

size_t PrefixStateCache::lookup_resumable(std::span<const int32_t> tokens, SequenceState& state,
                                          std::vector<float>& logits) {
  logits.clear();
  const auto it = find_longest(tokens, SIZE_MAX, true);
  if (it == lru_.end()) return 0;
  state = it->state;
  if (it->prefix.size() == tokens.size()) logits = it->logits;
  return it->prefix.size();
}

}  // namespace mb
