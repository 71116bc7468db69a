// AdmissionCounter: how many times each not-yet-materialized key of a table
// has been seen, for the admission threshold (Monolith's occurrence filter).
// Internal to psdb_store.
//
// Decisions (documented here because users see their effects):
//  - Only keys that have no row are counted; once a key reaches the
//    threshold its row is created and its counter is erased. Every
//    occurrence counts: a key appearing 3 times in one batch is 3 sightings.
//  - Non-serving Pull, PullRows and Push count; serving pulls do not.
//  - Counts are soft state kept in memory only: they do not survive a
//    restart or a restore (a key then starts again from zero). They are not
//    part of checkpoints.
//  - Memory is bounded: each of the 64 stripes keeps at most
//    max_tracked / 64 keys; a stripe that is full is cleared before the next
//    new key is added (all its pending counts restart at zero). With the
//    default of 4M tracked keys that is ~100 MiB in the worst case.
//
// Thread-safety: thread-safe (one mutex per stripe).
#ifndef PSDB_STORE_ADMISSION_H_
#define PSDB_STORE_ADMISSION_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace psdb::internal {

class AdmissionCounter {
 public:
  // threshold <= 1 admits everything (Record always returns true).
  explicit AdmissionCounter(uint32_t threshold,
                            size_t max_tracked = size_t{4} << 20);

  uint32_t threshold() const { return threshold_; }
  bool enabled() const { return threshold_ > 1; }

  // Adds `occurrences` sightings of `key` and returns true if the key has
  // now been seen at least `threshold` times (and forgets it: the caller
  // materializes the row).
  bool Record(uint64_t key, uint32_t occurrences);
  // Current count of `key` (0 if untracked); for tests and stats.
  uint32_t Count(uint64_t key) const;
  // Keys currently tracked.
  size_t Tracked() const;

 private:
  static constexpr int kStripes = 64;
  struct alignas(64) Shard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<uint64_t, uint32_t> counts ABSL_GUARDED_BY(mu);
  };
  Shard& ShardOf(uint64_t key) const;

  const uint32_t threshold_;
  const size_t per_shard_cap_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_ADMISSION_H_
