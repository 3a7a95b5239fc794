// SPDX-License-Identifier: MIT
#include "engine/prefix_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "engine/stale_temporaries.h"
#include "io/binary_codec.h"

namespace mb {
namespace {

constexpr const char* kPrefix = "prefix-";
constexpr const char* kSuffix = ".mbslot";
constexpr int64_t kRescanNs = 1'000'000'000;  // the longest an unchanged-looking index is trusted
std::string hex16(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool parse_hex16(std::string_view text, uint64_t& value) {
  if (text.size() != 16) return false;
  value = 0;
  for (char c : text) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  return true;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct StoredFile {
  std::string path;
  uint64_t bytes;
  int64_t mtime_ns;
};

}  // namespace

PrefixStore::PrefixStore(const Model& model, PrefixStoreOptions options)
    : model_(model), options_(std::move(options)) {
  if (options_.folder.empty()) throw Error("the prefix store needs a folder");
  // The dtype changes a state's bits but not the fingerprint, so it goes into the key.
  const std::string_view dtype = dtype_name(model.matrix_dtype());
  uint64_t key = model.fingerprint();
  for (char c : dtype) key = (key ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  key_ = hex16(key);
  // What a killed writer left would otherwise take the disk for good: no lookup reads it and, under
  // another name than a slot file's, eviction would not see it.
  counters_.evicted += reclaim_stale_temporaries(options_.folder);
  writer_ = std::thread([this] { writer_loop(); });
}

PrefixStore::~PrefixStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
  }
  writer_.join();
}

std::vector<PrefixStore::Hash> PrefixStore::prefix_hashes(std::span<const int32_t> tokens) {
  // FNV-1a over the ids' bytes, and a multiply-add over whole ids with another odd constant: each
  // prefix's pair extends the previous one, so all of them cost one pass.
  std::vector<Hash> hashes(tokens.size() + 1);
  Hash hash{0xcbf29ce484222325ull, 0x9e3779b97f4a7c15ull};
  hashes[0] = hash;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t id = static_cast<uint32_t>(tokens[i]);
    for (int b = 0; b < 4; ++b) hash.a = (hash.a ^ ((id >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    hash.b = (hash.b ^ (id + 0x632be59bd9b4e019ull)) * 0xd6e8feb86659fd93ull;
    hash.b ^= hash.b >> 32;
    hashes[i + 1] = hash;
  }
  return hashes;
}

std::string PrefixStore::name_for(size_t length, Hash hash) const {
  return kPrefix + key_ + "-" + std::to_string(length) + "-" + hex16(hash.a) + hex16(hash.b) + kSuffix;
}

std::string PrefixStore::file_name(std::span<const int32_t> prefix) const {
  return name_for(prefix.size(), prefix_hashes(prefix).back());
}

void PrefixStore::save(std::span<const int32_t> prefix, const SequenceState& state) {
  if (prefix.empty()) return;
  std::lock_guard lock(mutex_);
  if (queue_.size() >= options_.max_queued) {
    ++counters_.dropped;
    return;
  }
  queue_.push_back({{prefix.begin(), prefix.end()}, state});
  wake_.notify_all();
}

void PrefixStore::refresh_index() {
  struct stat folder {};
  if (::stat(options_.folder.c_str(), &folder) != 0) {
    index_.clear();
    return;
  }
  const int64_t mtime = static_cast<int64_t>(folder.st_mtim.tv_sec) * 1'000'000'000 + folder.st_mtim.tv_nsec;
  const int64_t now = now_ns();
  if (mtime == indexed_mtime_ns_ && now - indexed_at_ns_ < kRescanNs) return;
  indexed_mtime_ns_ = mtime;
  indexed_at_ns_ = now;
  index_.clear();
  DIR* dir = ::opendir(options_.folder.c_str());
  if (dir == nullptr) return;
  const std::string head = kPrefix + key_ + "-";
  const size_t suffix = std::strlen(kSuffix);
  while (const dirent* entry = ::readdir(dir)) {
    // prefix-<key>-<length>-<32 hex>.mbslot; temporaries (".tmp-" after the suffix) never match.
    const std::string_view name = entry->d_name;
    if (!name.starts_with(head) || !name.ends_with(kSuffix)) continue;
    const std::string_view rest = name.substr(head.size(), name.size() - head.size() - suffix);
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string_view::npos || dash > 12 || rest.size() != dash + 1 + 32) continue;
    size_t length = 0;
    bool digits = true;
    for (char c : rest.substr(0, dash)) {
      digits = digits && c >= '0' && c <= '9';
      length = length * 10 + static_cast<size_t>(c - '0');
    }
    Hash hash{};
    if (!digits || !parse_hex16(rest.substr(dash + 1, 16), hash.a) ||
        !parse_hex16(rest.substr(dash + 17), hash.b))
      continue;
    index_[length].insert(hash);
  }
  ::closedir(dir);
}

std::optional<SlotFile> PrefixStore::find_longest(std::span<const int32_t> tokens, size_t min_length,
                                                  size_t max_length) {
  max_length = std::min(max_length, tokens.size());
  if (min_length < 1) min_length = 1;
  if (min_length > max_length) return std::nullopt;
  refresh_index();
  std::vector<Hash> hashes;
  for (auto it = index_.upper_bound(max_length); it != index_.begin();) {
    --it;
    const size_t length = it->first;
    if (length < min_length) break;
    if (hashes.empty()) hashes = prefix_hashes(tokens.first(length));
    if (!it->second.contains(hashes[length])) continue;
    const std::string path = options_.folder + "/" + name_for(length, hashes[length]);
    try {
      SlotFile slot = load_slot_file(path, model_);
      if (!std::equal(slot.tokens.begin(), slot.tokens.end(), tokens.begin(), tokens.begin() + length) ||
          slot.tokens.size() != length)
        throw Error("slot file '" + path + "' holds another prefix under the same hash");
      // Touched, so eviction (oldest modification first) keeps what conversations still use.
      ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
      std::lock_guard lock(mutex_);
      ++counters_.hits;
      return slot;
    } catch (const std::exception& e) {
      // Writers skip a name that exists, so a damaged file would never be replaced and would be
      // read again by every lookup it matches: it is removed instead (a cache entry, not data).
      ::unlink(path.c_str());
      std::fprintf(stderr, "mambacpp: prefix store: removed %s\n", e.what());
      std::lock_guard lock(mutex_);
      ++counters_.rejected;
    }
  }
  std::lock_guard lock(mutex_);
  ++counters_.misses;
  return std::nullopt;
}

PrefixStoreCounters PrefixStore::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void PrefixStore::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

void PrefixStore::writer_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, with everything written
      job = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    write(job);
    std::lock_guard lock(mutex_);
    writing_ = false;
    idle_.notify_all();
  }
}

void PrefixStore::write(const Job& job) {
  const std::string path = options_.folder + "/" + file_name(job.prefix);
  try {
    // A file of that name already holds this prefix's state (the engine is deterministic), unless it
    // is damaged, which a lookup reports and skips; rewriting it would only cost the disk.
    struct stat existing {};
    if (::stat(path.c_str(), &existing) == 0) {
      ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
      return;
    }
    save_slot_file(path, model_, job.prefix, job.state);
    {
      std::lock_guard lock(mutex_);
      ++counters_.written;
    }
    evict();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mambacpp: prefix store: %s\n", e.what());
    std::lock_guard lock(mutex_);
    ++counters_.write_errors;
  }
}

void PrefixStore::evict() {
  // Only this model's files count against the budget and are evicted: a folder shared by replicas
  // of several models, or holding named slots, keeps what is not ours.
  std::vector<StoredFile> files;
  uint64_t total = 0;
  DIR* dir = ::opendir(options_.folder.c_str());
  if (dir == nullptr) return;
  const std::string head = kPrefix + key_ + "-";
  const int64_t now = wall_clock_ns();
  uint64_t reclaimed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    // Our temporaries take the budget's disk too: a live one is counted, a stale one removed.
    const bool temporary = name.starts_with(head) && is_temporary_name(name);
    if (!name.starts_with(head) || (!name.ends_with(kSuffix) && !temporary)) continue;
    std::string path = options_.folder + "/" + std::string(name);
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (temporary) {
      if (is_stale_temporary(info, now) && ::unlink(path.c_str()) == 0)
        ++reclaimed;
      else
        total += static_cast<uint64_t>(info.st_size);
      continue;
    }
    total += static_cast<uint64_t>(info.st_size);
    files.push_back({std::move(path), static_cast<uint64_t>(info.st_size),
                     static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec});
  }
  ::closedir(dir);
  if (reclaimed > 0) {
    std::lock_guard lock(mutex_);
    counters_.evicted += reclaimed;
  }
  if (total <= options_.budget_bytes && files.size() <= options_.max_files) return;
  std::sort(files.begin(), files.end(),
            [](const StoredFile& x, const StoredFile& y) { return x.mtime_ns < y.mtime_ns; });
  size_t left = files.size();
  uint64_t evicted = 0;
  for (const StoredFile& file : files) {
    if (total <= options_.budget_bytes && left <= options_.max_files) break;
    // Another replica may have removed it first; either way it no longer counts.
    ::unlink(file.path.c_str());
    total -= file.bytes;
    --left;
    ++evicted;
  }
  std::lock_guard lock(mutex_);
  counters_.evicted += evicted;
}

}  // namespace mb
