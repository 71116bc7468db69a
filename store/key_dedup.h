// KeyDedup: maps the keys of one batch to dense unique indices (0, 1, ...)
// in first-seen order. Open addressing with generation stamps, so Reset is
// O(1) and a thread-local instance serves every batch without allocating
// once it has grown to the largest batch. Internal to psdb_store.
//
// Thread-safety: not thread-safe; use one per thread.
#ifndef PSDB_STORE_KEY_DEDUP_H_
#define PSDB_STORE_KEY_DEDUP_H_

#include <cstdint>
#include <vector>

#include "util/hash.h"

namespace psdb::internal {

class KeyDedup {
 public:
  // Prepares for a batch of at most `max_keys` keys.
  void Reset(size_t max_keys) {
    size_t cap = 16;
    while (cap < 2 * max_keys) cap *= 2;
    if (cap > slot_key_.size()) {
      slot_key_.assign(cap, 0);
      slot_idx_.assign(cap, 0);
      slot_gen_.assign(cap, 0);
      gen_ = 0;
    }
    mask_ = slot_key_.size() - 1;
    if (++gen_ == 0) {  // wrapped: clear stamps
      slot_gen_.assign(slot_gen_.size(), 0);
      gen_ = 1;
    }
    unique_.clear();
  }

  // The unique index of `key`; *inserted tells whether it is new.
  uint32_t Insert(uint64_t key, bool* inserted) {
    size_t i = Mix64(key) & mask_;
    while (true) {
      if (slot_gen_[i] != gen_) {
        slot_gen_[i] = gen_;
        slot_key_[i] = key;
        const uint32_t idx = static_cast<uint32_t>(unique_.size());
        slot_idx_[i] = idx;
        unique_.push_back(key);
        *inserted = true;
        return idx;
      }
      if (slot_key_[i] == key) {
        *inserted = false;
        return slot_idx_[i];
      }
      i = (i + 1) & mask_;
    }
  }

  const std::vector<uint64_t>& unique() const { return unique_; }

 private:
  std::vector<uint64_t> slot_key_;
  std::vector<uint32_t> slot_idx_;
  std::vector<uint32_t> slot_gen_;
  uint32_t gen_ = 0;
  size_t mask_ = 0;
  std::vector<uint64_t> unique_;
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_KEY_DEDUP_H_
