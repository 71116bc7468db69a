// SlotMap: which cached row lives in which slot, which slots are pinned, and
// which row to evict next. The host-side index of VocabCache, and the core
// the policy simulator (cache/policy_sim.h) drives, so hit rates measured in
// tests and benchmarks come from the code the cache runs.
//
// A slot holds one row of one table: SlotKey{table, id}. Rows a batch uses
// are pinned (a count per slot: the current batch and a prefetched batch may
// both hold a pin); pinned rows are never chosen as victims.
//
// Thread-safety: thread-compatible; VocabCache serializes access.
#ifndef PSDB_CACHE_SLOT_MAP_H_
#define PSDB_CACHE_SLOT_MAP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/types/span.h"
#include "cache/policy.h"

namespace psdb::cache {

struct SlotKey {
  uint32_t table = 0;  // the cache's index of the table
  uint64_t id = 0;

  friend bool operator==(const SlotKey& a, const SlotKey& b) {
    return a.table == b.table && a.id == b.id;
  }
  template <typename H>
  friend H AbslHashValue(H h, const SlotKey& k) {
    return H::combine(std::move(h), k.table, k.id);
  }
};

// The 64-bit key the policy sees: the id itself for table 0, a mix of table
// and id otherwise.
uint64_t PolicyKey(const SlotKey& key);

class SlotMap {
 public:
  // REQUIRES: capacity >= 1.
  SlotMap(int32_t capacity, PolicyKind policy);
  SlotMap(const SlotMap&) = delete;
  SlotMap& operator=(const SlotMap&) = delete;

  int32_t capacity() const { return capacity_; }
  // Rows held.
  int32_t size() const { return static_cast<int32_t>(index_.size()); }
  // Slots Insert can still fill: free slots plus evictable (unpinned) ones.
  int32_t available() const { return capacity_ - pinned_slots_; }

  // The slot holding `key`, or -1.
  int32_t Find(const SlotKey& key) const;
  // Asks the CPU to bring the slot's bookkeeping into cache (a hint).
  void Prefetch(int32_t slot) const {
    __builtin_prefetch(&pins_[slot]);
    policy_->Prefetch(slot);
  }
  // Pins a resident slot and counts one access to it.
  void PinAndAccess(int32_t slot);
  // Adds one pin to a resident slot without counting an access.
  void Pin(int32_t slot);
  // Drops one pin. REQUIRES: pinned(slot).
  void Unpin(int32_t slot);
  bool pinned(int32_t slot) const { return pins_[slot] > 0; }

  // Stores `key` (not resident) in a free slot or, when none is free, in the
  // slot of the policy's victim, whose key is returned in *evicted along with
  // its frequency. The new slot is pinned once and counted as accessed;
  // `frequency` is the key's count of earlier sightings.
  // REQUIRES: Find(key) < 0, available() > 0.
  int32_t Insert(const SlotKey& key, uint64_t frequency,
                 std::optional<SlotKey>* evicted, uint64_t* evicted_frequency);
  // Empties a resident slot, pinned or not (e.g. after a failed fetch).
  void Erase(int32_t slot);

  // Lookahead: announces the keys of future batch `seq`, and starts batch
  // `seq` (see EvictionPolicy). No-ops for LRU and LFU.
  void AddFuture(int64_t seq, absl::Span<const SlotKey> keys);
  void BeginBatch(int64_t seq) { policy_->BeginBatch(seq); }

  const SlotKey& key(int32_t slot) const { return keys_[slot]; }
  bool occupied(int32_t slot) const { return occupied_[slot]; }
  uint64_t frequency(int32_t slot) const { return policy_->frequency(slot); }
  // See EvictionPolicy::AddFrequency. REQUIRES: pinned(slot).
  void AddFrequency(int32_t slot, uint64_t f) {
    policy_->AddFrequency(slot, f);
  }

 private:
  int32_t capacity_;
  std::unique_ptr<EvictionPolicy> policy_;
  absl::flat_hash_map<SlotKey, int32_t> index_;
  std::vector<SlotKey> keys_;
  std::vector<bool> occupied_;
  std::vector<int32_t> pins_;
  std::vector<int32_t> free_;  // free slots, popped from the back
  int32_t pinned_slots_ = 0;
};

}  // namespace psdb::cache

#endif  // PSDB_CACHE_SLOT_MAP_H_
