#include "engine/prefix_cache.h"

#include <algorithm>
#include <cstring>

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

void PrefixStateCache::put(std::span<const int32_t> prefix, const SequenceState& state) {
  const uint64_t hash = prefix_hashes(prefix).back();
  if (auto it = find(prefix, hash); it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);  // the same prefix gives the same state: refresh only
    return;
  }
  Entry entry{{prefix.begin(), prefix.end()}, state, hash};
  if (entry.bytes() > budget_bytes_) return;
  evict_to(budget_bytes_ - entry.bytes());
  bytes_ += entry.bytes();
  lru_.push_front(std::move(entry));
  by_hash_.emplace(hash, lru_.begin());
  ++lengths_[prefix.size()];
}

void PrefixStateCache::evict_to(size_t budget) {
  while (bytes_ > budget && !lru_.empty()) {
    Entry& victim = lru_.back();
    auto [begin, end] = by_hash_.equal_range(victim.hash);
    for (auto it = begin; it != end; ++it) {
      if (&*it->second == &victim) {
        by_hash_.erase(it);
        break;
      }
    }
    if (--lengths_[victim.prefix.size()] == 0) lengths_.erase(victim.prefix.size());
    bytes_ -= victim.bytes();
    lru_.pop_back();
  }
}

size_t PrefixStateCache::lookup(std::span<const int32_t> tokens, SequenceState& state, size_t max_length) {
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
      lru_.splice(lru_.begin(), lru_, it);
      state = it->state;
      ++hits_;
      return length;
    }
  }
  ++misses_;
  return 0;
}

}  // namespace mb
