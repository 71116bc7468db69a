// Eviction policies of the worker vocab cache: LRU, LFU and lookahead
// (Belady within the window of batches the loader has already read).
//
// A policy orders the *evictable* slots of one SlotMap: slots that hold a row
// and are not pinned. SlotMap tells it when a slot is filled (Insert), used
// (Access), pinned / unpinned and emptied (Erase), and asks it for a Victim
// among the evictable slots. Pinned slots are outside the order, so choosing
// a victim never skips over them.
//
// Frequencies: every policy counts accesses per slot, starting from the
// frequency the row arrived with (RowHeader::frequency, the store's count of
// sightings), so LFU keeps what it learned about a key across evictions and
// the cache can write the updated count back with the row.
//
// Lookahead: the loader announces future batches (AddFuture, in batch order)
// and SlotMap tells the policy which batch is starting (BeginBatch). Rows
// used in the announced window are evicted only when no evictable row is
// outside the window; among rows outside it the least frequently (then least
// recently) used goes first; among rows inside it the one whose next use is
// furthest away goes first.
//
// Policy keys: 64-bit ids; SlotMap folds (table, id) into one (PolicyKey).
// A collision there could only change which row is evicted, never a value.
//
// Thread-safety: thread-compatible; SlotMap's owner serializes calls.
#ifndef PSDB_CACHE_POLICY_H_
#define PSDB_CACHE_POLICY_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/vocab_cache.h"

namespace psdb::cache {

class EvictionPolicy {
 public:
  explicit EvictionPolicy(int32_t capacity);
  virtual ~EvictionPolicy() = default;
  EvictionPolicy(const EvictionPolicy&) = delete;
  EvictionPolicy& operator=(const EvictionPolicy&) = delete;

  // `slot` now holds `key`, pinned (not evictable), and was just accessed
  // once; `frequency` is the key's count of earlier sightings.
  virtual void Insert(int32_t slot, uint64_t key, uint64_t frequency);
  // One more access to the (pinned) slot.
  virtual void Access(int32_t slot);
  // The slot leaves / re-enters the evictable set.
  virtual void Pin(int32_t slot) = 0;
  virtual void Unpin(int32_t slot) = 0;
  // The slot no longer holds a row (pinned or not).
  virtual void Erase(int32_t slot) = 0;
  // The evictable slot to empty next, or -1 if none is evictable. Does not
  // change anything: the caller Erases the slot.
  virtual int32_t Victim() const = 0;

  // Brings the slot's bookkeeping into cache (a hint).
  virtual void Prefetch(int32_t slot) const { __builtin_prefetch(&use_[slot]); }

  // Lookahead hooks (no-ops for LRU and LFU). REQUIRES: seq increasing.
  virtual void AddFuture(int64_t seq, absl::Span<const uint64_t> keys) {}
  virtual void BeginBatch(int64_t seq) {}

  // Sightings of the slot's key, including those before it was cached.
  uint64_t frequency(int32_t slot) const { return use_[slot].freq; }
  // Adds sightings learned after Insert (the row header of a fetch that
  // completed later). REQUIRES: the slot is pinned.
  void AddFrequency(int32_t slot, uint64_t f) { use_[slot].freq += f; }

 protected:
  struct Use {
    uint64_t freq = 0;  // sightings
    uint64_t tick = 0;  // logical time of the last access
  };
  std::vector<Use> use_;  // per slot
  uint64_t now_ = 0;
};

std::unique_ptr<EvictionPolicy> MakePolicy(PolicyKind kind, int32_t capacity);

}  // namespace psdb::cache

#endif  // PSDB_CACHE_POLICY_H_
