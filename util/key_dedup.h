// KeyDedup: the one key de-duplication of psdb. It maps the keys of one
// batch to dense indices 0, 1, 2, ... in order of first appearance, so a
// caller gets the batch's unique keys (unique()) and, from the index each
// Insert returns, the inverse index of every position. The store sums a
// push's duplicate gradients with it, the Partitioner sends each distinct
// key once, the vocab cache maps each distinct id to one slot.
//
//   KeyDedup dedup;  // keep it: it is scratch space reused batch to batch
//   dedup.Reset(keys.size());
//   for (size_t i = 0; i < keys.size(); ++i) {
//     bool inserted;
//     inverse[i] = dedup.Insert(keys[i], &inserted);
//   }
//   // dedup.unique()[inverse[i]] == keys[i]
//
// It is open addressing (linear probing, Mix64 of the key, at most half
// full) whose slots carry a generation stamp: Reset starts a new generation
// instead of clearing the table, so it is O(1), and a KeyDedup allocates
// only when a batch is larger than every batch before it. Each slot holds
// key, stamp and index together, so a probe touches one cache line.
//
// Thread-safety: not thread-safe; one KeyDedup per thread (or per
// in-flight request).
#ifndef PSDB_UTIL_KEY_DEDUP_H_
#define PSDB_UTIL_KEY_DEDUP_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "util/hash.h"

namespace psdb {

class KeyDedup {
 public:
  KeyDedup() = default;
  KeyDedup(const KeyDedup&) = delete;
  KeyDedup& operator=(const KeyDedup&) = delete;
  KeyDedup(KeyDedup&&) = default;
  KeyDedup& operator=(KeyDedup&&) = default;

  // Starts a new batch of at most `max_keys` distinct keys, forgetting the
  // previous one. REQUIRES: max_keys < 2^32 (indices are uint32_t).
  void Reset(size_t max_keys) {
    assert(max_keys <= std::numeric_limits<uint32_t>::max());
    size_t capacity = 16;
    while (capacity < 2 * max_keys) capacity *= 2;
    if (capacity > slots_.size()) {
      slots_.assign(capacity, Slot{});
      generation_ = 0;
    }
    if (max_keys > unique_.size()) unique_.resize(max_keys);
    // Only the first `capacity` slots are probed: a small batch after a
    // large one stays in a small, cache-resident part of the table.
    mask_ = capacity - 1;
    if (++generation_ == 0) {  // wrapped: no stale stamp may look current
      for (Slot& slot : slots_) slot.generation = 0;
      generation_ = 1;
    }
    num_unique_ = 0;
  }

  // The dense index of `key` in this batch: a new key gets num_unique()
  // (*inserted = true), a repeated key its earlier index (*inserted =
  // false). REQUIRES: Reset(max_keys) was called and this batch has at
  // most max_keys distinct keys.
  uint32_t Insert(uint64_t key, bool* inserted) {
    for (size_t i = Mix64(key) & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.generation != generation_) {
        assert(num_unique_ < unique_.size());
        slot.key = key;
        slot.generation = generation_;
        slot.index = num_unique_;
        unique_[num_unique_] = key;
        *inserted = true;
        return num_unique_++;
      }
      if (slot.key == key) {
        *inserted = false;
        return slot.index;
      }
    }
  }

  // The distinct keys so far, in order of first appearance: unique()[u] is
  // the key Insert gave index u. Valid until the next Reset.
  absl::Span<const uint64_t> unique() const {
    return absl::MakeConstSpan(unique_.data(), num_unique_);
  }
  size_t num_unique() const { return num_unique_; }

  // Test hook: the stamp the next Reset increments, to reach the
  // wrap-around without 2^32 Resets.
  void SetGenerationForTesting(uint32_t generation) {
    generation_ = generation;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t generation = 0;  // the slot is used iff == generation_
    uint32_t index = 0;
  };

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint32_t generation_ = 0;
  // Sized to the largest batch; the first num_unique_ entries are valid.
  std::vector<uint64_t> unique_;
  uint32_t num_unique_ = 0;
};

}  // namespace psdb

#endif  // PSDB_UTIL_KEY_DEDUP_H_
