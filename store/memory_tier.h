// MemoryTier: the hot rows of one table. Internal to psdb_store.
//
// Rows live in a slab arena of fixed-size slots; a slot is contiguous
//   float values[dim] | float state[state_size] | RowHeader | SlotMeta
//   [| u64 lsn: the last write-ahead log record applied to the row, only
//   with `lsn_slots` (Durability::kWal, store/wal.h)]
// so a hit touches one region. Slots are addressed by a 32-bit id
// (slab = id >> slab_shift, index = id & mask); slabs are allocated on demand
// and never move, so a slot's address is stable for the tier's lifetime.
//
// The key -> slot index is split into `stripes` stripes, each an
// absl::flat_hash_map under its own absl::Mutex. Callers group a batch's
// keys by stripe and lock each stripe once per batch.
//
// Ownership and locking rules (the Table enforces them):
//  - A slot's row bytes, SlotMeta::version and the kDirty flag are read and
//    written only under the lock of the stripe its key belongs to, while the
//    index maps that key to that slot.
//  - SlotMeta::key and flags are also accessed atomically (std::atomic_ref),
//    so eviction can scan slots without locks and then confirm a candidate
//    under its stripe lock. The CLOCK reference counter and the tick
//    (sampled LRU) are relaxed atomics updated on hits.
//
// CLOCK variant: each slot has a 2-bit reference counter (bits kRefMask of
// flags) instead of one bit. A hit increments it (saturating at 3), the hand
// decrements it and evicts at 0. Rows hit often survive several sweeps, which
// keeps more of a skewed (Zipf) hot set than one-bit CLOCK or LRU.
//  - evict_seq of a stripe increases whenever a key leaves that stripe's
//    index (or is deleted from disk by TTL), and the last kRemovedRing such
//    keys are kept in a ring. A reader that saw a miss uses them to detect
//    that its disk read may predate a concurrent write-back of that key
//    (see Table::Materialize).
//
// Thread-safety: thread-safe as described above; allocation and victim
// selection take internal mutexes.
#ifndef PSDB_STORE_MEMORY_TIER_H_
#define PSDB_STORE_MEMORY_TIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "psdb/row.h"
#include "psdb/store_options.h"

namespace psdb::internal {

struct SlotMeta {
  uint64_t key;
  uint32_t version;  // bumped on every change of the row's bytes
  uint32_t flags;    // kOccupied | kDirty | reference counter (kRefMask)
  uint32_t tick;     // last access tick (sampled LRU)
  uint32_t reserved;
};

inline constexpr uint32_t kOccupied = 1;
inline constexpr uint32_t kDirty = 2;
inline constexpr uint32_t kRef = 4;  // one unit of the reference counter
inline constexpr uint32_t kRefMask = 12;
inline constexpr uint32_t kRefMax = 3;

// Removals a stripe remembers by key (see Stripe::RemovedSince).
inline constexpr uint64_t kRemovedRing = 128;

struct alignas(64) Stripe {
  absl::Mutex mu;
  absl::flat_hash_map<uint64_t, uint32_t> index ABSL_GUARDED_BY(mu);
  // Incremented whenever a key leaves `index` (or TTL deletes it from disk);
  // removed[seq % kRemovedRing] is the key of removal number seq.
  uint64_t evict_seq ABSL_GUARDED_BY(mu) = 0;
  uint64_t removed[kRemovedRing] ABSL_GUARDED_BY(mu);

  // Records that `key` left the index. REQUIRES: mu.
  void NoteRemoved(uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    removed[evict_seq % kRemovedRing] = key;
    ++evict_seq;
  }
  // Whether `key` may have been removed since evict_seq was `since`: exact
  // for the last kRemovedRing removals, true for anything older.
  // REQUIRES: mu.
  bool RemovedSince(uint64_t key, uint64_t since) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (evict_seq - since > kRemovedRing) return true;
    for (uint64_t s = since; s < evict_seq; ++s) {
      if (removed[s % kRemovedRing] == key) return true;
    }
    return false;
  }
  // Slots that became dirty since the last flush (may hold stale entries;
  // flushes re-check each one).
  std::vector<uint32_t> dirty ABSL_GUARDED_BY(mu);
};

class MemoryTier {
 public:
  MemoryTier(int dim, int state_size, int stripes, EvictionPolicy policy,
             bool lsn_slots = false);
  ~MemoryTier();
  MemoryTier(const MemoryTier&) = delete;
  MemoryTier& operator=(const MemoryTier&) = delete;

  int dim() const { return dim_; }
  int state_size() const { return state_size_; }
  // Bytes one resident row costs against the budget.
  size_t slot_bytes() const { return slot_bytes_; }
  int num_stripes() const { return static_cast<int>(num_stripes_); }

  uint32_t StripeOf(uint64_t key) const {
    // Lemire's fast range over the high bits of a bijective mix.
    const uint64_t h = Mix(key) >> 32;
    return static_cast<uint32_t>((h * num_stripes_) >> 32);
  }
  Stripe& stripe(uint32_t i) { return stripes_[i]; }

  char* slot(uint32_t id) const {
    char* slab = slabs_[id >> slab_shift_].load(std::memory_order_acquire);
    return slab + static_cast<size_t>(id & slab_mask_) * slot_bytes_;
  }
  float* values(uint32_t id) const {
    return reinterpret_cast<float*>(slot(id));
  }
  float* state(uint32_t id) const { return values(id) + dim_; }
  RowHeader* header(uint32_t id) const {
    return reinterpret_cast<RowHeader*>(slot(id) + header_offset_);
  }
  SlotMeta* meta(uint32_t id) const {
    return reinterpret_cast<SlotMeta*>(slot(id) + meta_offset_);
  }
  // Asks the CPU to start loading a slot's row bytes (values, state,
  // header) into its cache: a caller about to read several rows that are
  // likely not cached prefetches them all first, so their loads overlap.
  // Only a hint: it needs no lock and changes nothing.
  void PrefetchRow(uint32_t id) const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(slot(id));
    for (uintptr_t line = at & ~uintptr_t{63}; line < at + meta_offset_;
         line += 64) {
      __builtin_prefetch(reinterpret_cast<const void*>(line));
    }
  }
  bool has_lsn() const { return lsn_slots_; }
  // REQUIRES: has_lsn(); same locking as the row's bytes.
  uint64_t* lsn(uint32_t id) const {
    return reinterpret_cast<uint64_t*>(slot(id) + meta_offset_ +
                                       sizeof(SlotMeta));
  }

  // Acquire / release: a reader that sees kOccupied set also sees the key
  // stored before it (Table stores the key, then sets kOccupied).
  uint32_t LoadFlags(uint32_t id) const {
    return std::atomic_ref<uint32_t>(meta(id)->flags)
        .load(std::memory_order_acquire);
  }
  void SetFlags(uint32_t id, uint32_t bits) {
    std::atomic_ref<uint32_t>(meta(id)->flags)
        .fetch_or(bits, std::memory_order_release);
  }
  // Decrements the reference counter if it is > 0; returns its old value.
  uint32_t DecrementRef(uint32_t id) {
    std::atomic_ref<uint32_t> f(meta(id)->flags);
    uint32_t v = f.load(std::memory_order_relaxed);
    while (true) {
      const uint32_t c = (v & kRefMask) >> 2;
      if (c == 0) return 0;
      if (f.compare_exchange_weak(v, v - kRef, std::memory_order_relaxed)) {
        return c;
      }
    }
  }
  void ClearFlags(uint32_t id, uint32_t bits) {
    std::atomic_ref<uint32_t>(meta(id)->flags)
        .fetch_and(~bits, std::memory_order_relaxed);
  }
  uint64_t LoadKey(uint32_t id) const {
    return std::atomic_ref<uint64_t>(meta(id)->key)
        .load(std::memory_order_relaxed);
  }
  void StoreKey(uint32_t id, uint64_t key) {
    std::atomic_ref<uint64_t>(meta(id)->key)
        .store(key, std::memory_order_relaxed);
  }

  // Records an access for the eviction policy (cheap; no lock).
  void Touch(uint32_t id) {
    if (policy_ == EvictionPolicy::kClock) {
      std::atomic_ref<uint32_t> f(meta(id)->flags);
      uint32_t v = f.load(std::memory_order_relaxed);
      // One attempt: losing a race only loses one increment.
      if (((v & kRefMask) >> 2) < kRefMax) {
        f.compare_exchange_weak(v, v + kRef, std::memory_order_relaxed);
      }
    } else {
      std::atomic_ref<uint32_t>(meta(id)->tick)
          .store(tick_.load(std::memory_order_relaxed),
                 std::memory_order_relaxed);
    }
  }
  // Advances the LRU clock (once per batch).
  void AdvanceTick() { tick_.fetch_add(1, std::memory_order_relaxed); }

  // Hands out n slots (not occupied, not indexed). Never fails short of
  // running out of memory or 2^32 slots.
  void Allocate(size_t n, std::vector<uint32_t>* out);
  // Returns slots to the free list. REQUIRES: each is out of the index and
  // its kOccupied flag is clear.
  void Free(const uint32_t* ids, size_t n);

  // Picks up to n distinct eviction candidates among occupied slots (CLOCK
  // sweep or sampled LRU). Candidates are hints: the caller confirms each
  // under its stripe lock.
  void SelectVictims(size_t n, std::vector<uint32_t>* out);

  // Highest slot id handed out + 1 (scan bound).
  uint32_t capacity() const {
    return capacity_.load(std::memory_order_acquire);
  }
  // Rows currently indexed (maintained by the Table).
  std::atomic<uint64_t>& resident() { return resident_; }
  uint64_t resident_count() const {
    return resident_.load(std::memory_order_relaxed);
  }

 private:
  static uint64_t Mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  void AddSlabLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);

  const int dim_;
  const int state_size_;
  const uint64_t num_stripes_;
  const EvictionPolicy policy_;
  const bool lsn_slots_;
  size_t header_offset_ = 0;
  size_t meta_offset_ = 0;
  size_t slot_bytes_ = 0;
  uint32_t slab_shift_ = 0;
  uint32_t slab_mask_ = 0;
  std::unique_ptr<Stripe[]> stripes_;
  std::unique_ptr<std::atomic<char*>[]> slabs_;

  absl::Mutex alloc_mu_;
  uint32_t num_slabs_ ABSL_GUARDED_BY(alloc_mu_) = 0;
  uint32_t next_unused_ ABSL_GUARDED_BY(alloc_mu_) = 0;
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(alloc_mu_);
  std::atomic<uint32_t> capacity_{0};

  absl::Mutex victim_mu_;
  uint64_t hand_ ABSL_GUARDED_BY(victim_mu_) = 0;
  uint64_t rng_ ABSL_GUARDED_BY(victim_mu_) = 0x853c49e6748fea9bULL;

  std::atomic<uint32_t> tick_{1};
  std::atomic<uint64_t> resident_{0};
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_MEMORY_TIER_H_
