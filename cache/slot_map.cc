#include "cache/slot_map.h"

#include <cstdlib>

#include "util/hash.h"

namespace psdb::cache {

uint64_t PolicyKey(const SlotKey& key) {
  if (key.table == 0) return key.id;
  return Mix64(key.id ^ Mix64(key.table));
}

SlotMap::SlotMap(int32_t capacity, PolicyKind policy)
    : capacity_(capacity),
      policy_(MakePolicy(policy, capacity)),
      keys_(capacity),
      occupied_(capacity, false),
      pins_(capacity, 0) {
  index_.reserve(capacity);
  free_.reserve(capacity);
  for (int32_t s = capacity - 1; s >= 0; --s) free_.push_back(s);
}

int32_t SlotMap::Find(const SlotKey& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? -1 : it->second;
}

void SlotMap::Pin(int32_t slot) {
  if (pins_[slot]++ == 0) {
    ++pinned_slots_;
    policy_->Pin(slot);
  }
}

void SlotMap::PinAndAccess(int32_t slot) {
  Pin(slot);
  policy_->Access(slot);
}

void SlotMap::Unpin(int32_t slot) {
  if (pins_[slot] <= 0) std::abort();  // broken invariant, not input
  if (--pins_[slot] == 0) {
    --pinned_slots_;
    policy_->Unpin(slot);
  }
}

int32_t SlotMap::Insert(const SlotKey& key, uint64_t frequency,
                        std::optional<SlotKey>* evicted,
                        uint64_t* evicted_frequency) {
  evicted->reset();
  int32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = policy_->Victim();
    if (slot < 0) std::abort();  // REQUIRES available() > 0
    *evicted = keys_[slot];
    *evicted_frequency = policy_->frequency(slot);
    policy_->Erase(slot);
    index_.erase(keys_[slot]);
  }
  keys_[slot] = key;
  occupied_[slot] = true;
  index_.emplace(key, slot);
  pins_[slot] = 1;
  ++pinned_slots_;
  policy_->Insert(slot, PolicyKey(key), frequency);
  return slot;
}

void SlotMap::Erase(int32_t slot) {
  if (!occupied_[slot]) return;
  if (pins_[slot] > 0) --pinned_slots_;
  pins_[slot] = 0;
  policy_->Erase(slot);
  index_.erase(keys_[slot]);
  occupied_[slot] = false;
  free_.push_back(slot);
}

void SlotMap::AddFuture(int64_t seq, absl::Span<const SlotKey> keys) {
  std::vector<uint64_t> policy_keys;
  policy_keys.reserve(keys.size());
  for (const SlotKey& k : keys) policy_keys.push_back(PolicyKey(k));
  policy_->AddFuture(seq, policy_keys);
}

}  // namespace psdb::cache
