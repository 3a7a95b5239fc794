// SPDX-License-Identifier: MIT
// A prefix-state store in a folder shared by several servers (replicas behind a load balancer):
// each server writes the states its conversations end their turns with, and on a cache miss any
// server resumes a prompt from the longest stored prefix, so a conversation that moves to another
// replica (failover, rebalancing) continues without re-prefilling its history.
//
// Files are slot files (engine/slot_file.h: the tokens, the state with its own model fingerprint,
// and a checksum over everything), named
//   prefix-<model key, 16 hex>-<prefix length>-<prefix hash, 32 hex>.mbslot
// The model key mixes the checkpoint's fingerprint with the load dtype (the fingerprint does not
// depend on it, but the state's bits do), so files of another model or dtype are never candidates.
// The prefix hash is two 64-bit hashes (FNV-1a and a multiplicative one) computed incrementally over
// the token ids, so the hashes of every prefix of a prompt cost one pass. It only names files:
// a loaded file's tokens are compared one by one with the prompt, and its state must consume
// exactly them and pass both checksums, so a collision, a foreign, truncated or corrupt file is a
// miss, never a wrong state (and is removed, so a later write can replace it).
//
// Lookup never scans the folder per request: an index of the stored names (length -> hashes) is
// rebuilt from one readdir when the folder's modification time changed, or at most once a second
// otherwise (a coarse timestamp cannot hide a new file longer than that). A lookup then probes the
// index for each stored length, longest first, and opens only the files whose names match.
//
// Writes go through a background thread, so the scheduler never waits for the disk: it hands over a
// copy of the state, and a bounded queue drops work it cannot keep up with (a missing file only costs
// a re-prefill). Each file is written atomically (unique temporary, fsync, rename), so replicas
// writing the same name at once are safe: the contents are the same (the engine is deterministic)
// and a reader sees one whole file or the other. After a write, the store's files are evicted
// oldest modification time first until they fit the byte budget and the file cap; a file a lookup
// resumes from is touched, so eviction is least recently used across all replicas. A file removed
// by another replica's eviction while it is read stays readable (it is mapped) or is a miss.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/slot_file.h"
#include "model/model.h"

namespace mb {

struct PrefixStoreOptions {
  std::string folder;                         // must exist
  uint64_t budget_bytes = uint64_t{1} << 30;  // the most the store's files may take
  size_t max_files = 10000;                   // and the most files
  size_t max_queued = 8;                      // states waiting to be written; more are dropped
};

struct PrefixStoreCounters {
  uint64_t hits = 0, misses = 0, written = 0, dropped = 0, write_errors = 0, rejected = 0, evicted = 0;
};

class PrefixStore {
 public:
  PrefixStore(const Model& model, PrefixStoreOptions options);
  ~PrefixStore();  // writes what is queued, then stops the writer
  PrefixStore(const PrefixStore&) = delete;
  PrefixStore& operator=(const PrefixStore&) = delete;

  // Queues `state`, which has consumed exactly `prefix`, for writing (a copy is taken). Any thread.
  void save(std::span<const int32_t> prefix, const SequenceState& state);

  // The longest stored prefix of `tokens` with a length in [min_length, max_length], or nothing.
  // Unreadable or mismatching files are skipped, counted as rejected with a line on stderr, and
  // removed, so that the next write of that prefix replaces them.
  // One caller thread at a time (the scheduler's).
  std::optional<SlotFile> find_longest(std::span<const int32_t> tokens, size_t min_length, size_t max_length);

  PrefixStoreCounters counters() const;  // any thread
  // Blocks until the queue is empty and the writer is idle (tests).
  void flush();

  // The file name of a prefix, for tests and tools.
  std::string file_name(std::span<const int32_t> prefix) const;

 private:
  struct Hash {
    uint64_t a, b;
    auto operator<=>(const Hash&) const = default;
  };
  struct Job {
    std::vector<int32_t> prefix;
    SequenceState state;
  };
  static std::vector<Hash> prefix_hashes(std::span<const int32_t> tokens);
  std::string name_for(size_t length, Hash hash) const;
  void refresh_index();
  void writer_loop();
  void write(const Job& job);
  void evict();

  const Model& model_;
  PrefixStoreOptions options_;
  std::string key_;  // the model key's 16 hex digits

  // The scheduler thread's index of stored names.
  std::map<size_t, std::set<Hash>> index_;
  int64_t indexed_mtime_ns_ = -1;
  int64_t indexed_at_ns_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Job> queue_;
  bool writing_ = false, stopping_ = false;
  PrefixStoreCounters counters_;
  std::thread writer_;
};

}  // namespace mb
