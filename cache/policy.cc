#include "cache/policy.h"

#include <limits>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_set.h"

namespace psdb::cache {

absl::string_view PolicyName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kLru:
      return "lru";
    case PolicyKind::kLfu:
      return "lfu";
    case PolicyKind::kLookahead:
      return "lookahead";
  }
  return "unknown";
}

EvictionPolicy::EvictionPolicy(int32_t capacity) : use_(capacity) {}

void EvictionPolicy::Insert(int32_t slot, uint64_t key, uint64_t frequency) {
  use_[slot].freq = frequency + 1;
  use_[slot].tick = ++now_;
}

void EvictionPolicy::Access(int32_t slot) {
  ++use_[slot].freq;
  use_[slot].tick = ++now_;
}

namespace {

// Least recently used: an intrusive doubly linked list of the evictable
// slots, most recently unpinned at the head. A slot re-enters the list when
// its batch releases it, which is when it was last used.
class LruPolicy final : public EvictionPolicy {
 public:
  explicit LruPolicy(int32_t capacity)
      : EvictionPolicy(capacity), links_(capacity) {}

  void Prefetch(int32_t slot) const override {
    EvictionPolicy::Prefetch(slot);
    __builtin_prefetch(&links_[slot]);
  }
  void Pin(int32_t slot) override { Unlink(slot); }
  void Unpin(int32_t slot) override {
    Link& l = links_[slot];
    if (l.linked) Unlink(slot);
    l.prev = -1;
    l.next = head_;
    if (head_ >= 0) links_[head_].prev = slot;
    head_ = slot;
    if (tail_ < 0) tail_ = slot;
    l.linked = true;
  }
  void Erase(int32_t slot) override { Unlink(slot); }
  int32_t Victim() const override { return tail_; }

 private:
  void Unlink(int32_t slot) {
    Link& l = links_[slot];
    if (!l.linked) return;
    if (l.prev >= 0) {
      links_[l.prev].next = l.next;
    } else {
      head_ = l.next;
    }
    if (l.next >= 0) {
      links_[l.next].prev = l.prev;
    } else {
      tail_ = l.prev;
    }
    l.prev = l.next = -1;
    l.linked = false;
  }

  // One struct per slot: a slot's links share a cache line.
  struct Link {
    int32_t prev = -1;
    int32_t next = -1;
    bool linked = false;
  };
  std::vector<Link> links_;
  int32_t head_ = -1, tail_ = -1;
};

// An ordered set of evictable slots keyed by a per-slot sort key; the
// smallest key is the victim. Each slot remembers the key it was filed
// under so it can be removed after its fields change.
class OrderedSlots {
 public:
  using SortKey = std::tuple<uint64_t, uint64_t, uint64_t>;
  explicit OrderedSlots(int32_t capacity) : filed_(capacity), in_(capacity) {}

  void Add(int32_t slot, SortKey key) {
    Remove(slot);
    filed_[slot] = key;
    in_[slot] = true;
    set_.emplace(key, slot);
  }
  void Remove(int32_t slot) {
    if (!in_[slot]) return;
    set_.erase({filed_[slot], slot});
    in_[slot] = false;
  }
  bool contains(int32_t slot) const { return in_[slot]; }
  int32_t Min() const { return set_.empty() ? -1 : set_.begin()->second; }

 private:
  std::set<std::pair<SortKey, int32_t>> set_;
  std::vector<SortKey> filed_;
  std::vector<bool> in_;
};

// Least frequently used, ties broken by least recent use. Frequencies start
// from the row header's count, so they survive eviction ("perfect" LFU).
class LfuPolicy final : public EvictionPolicy {
 public:
  explicit LfuPolicy(int32_t capacity)
      : EvictionPolicy(capacity), order_(capacity) {}

  void Pin(int32_t slot) override { order_.Remove(slot); }
  void Unpin(int32_t slot) override {
    order_.Add(slot, {use_[slot].freq, use_[slot].tick, 0});
  }
  void Erase(int32_t slot) override { order_.Remove(slot); }
  int32_t Victim() const override { return order_.Min(); }

 private:
  OrderedSlots order_;
};

// Belady within the announced window, LFU outside it (see policy.h).
class LookaheadPolicy final : public EvictionPolicy {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  explicit LookaheadPolicy(int32_t capacity)
      : EvictionPolicy(capacity),
        key_(capacity, 0),
        occupied_(capacity, false),
        evictable_(capacity, false),
        outside_(capacity),
        inside_(capacity) {}

  void Insert(int32_t slot, uint64_t key, uint64_t frequency) override {
    EvictionPolicy::Insert(slot, key, frequency);
    key_[slot] = key;
    occupied_[slot] = true;
    evictable_[slot] = false;
    slot_of_[key] = slot;
  }
  void Pin(int32_t slot) override {
    evictable_[slot] = false;
    outside_.Remove(slot);
    inside_.Remove(slot);
  }
  void Unpin(int32_t slot) override {
    evictable_[slot] = true;
    File(slot);
  }
  void Erase(int32_t slot) override {
    Pin(slot);
    occupied_[slot] = false;
    slot_of_.erase(key_[slot]);
  }
  int32_t Victim() const override {
    const int32_t out = outside_.Min();
    return out >= 0 ? out : inside_.Min();
  }

  void AddFuture(int64_t seq, absl::Span<const uint64_t> keys) override {
    std::vector<uint64_t> unique;
    unique.reserve(keys.size());
    absl::flat_hash_set<uint64_t> seen;
    for (uint64_t k : keys) {
      if (seen.insert(k).second) unique.push_back(k);
    }
    for (uint64_t k : unique) {
      Occurrences& occ = next_use_[k];
      occ.seqs.push_back(seq);
      if (occ.size() == 1) Refile(k);
    }
    window_.emplace_back(seq, std::move(unique));
  }

  void BeginBatch(int64_t seq) override {
    while (!window_.empty() && window_.front().first <= seq) {
      for (uint64_t k : window_.front().second) {
        auto it = next_use_.find(k);
        it->second.PopFront();
        if (it->second.size() == 0) next_use_.erase(it);
        Refile(k);
      }
      window_.pop_front();
    }
  }

 private:
  int64_t NextUse(uint64_t key) const {
    auto it = next_use_.find(key);
    return it == next_use_.end() ? kNever : it->second.front();
  }
  void Refile(uint64_t key) {
    auto it = slot_of_.find(key);
    if (it != slot_of_.end() && evictable_[it->second]) File(it->second);
  }
  void File(int32_t slot) {
    const int64_t next = NextUse(key_[slot]);
    if (next == kNever) {
      inside_.Remove(slot);
      outside_.Add(slot, {use_[slot].freq, use_[slot].tick, 0});
    } else {
      outside_.Remove(slot);
      // Furthest next use first: the smallest (kNever - next).
      inside_.Add(slot, {static_cast<uint64_t>(kNever - next), use_[slot].freq,
                         use_[slot].tick});
    }
  }

  std::vector<uint64_t> key_;
  std::vector<bool> occupied_, evictable_;
  absl::flat_hash_map<uint64_t, int32_t> slot_of_;
  // The announced batches (seq) that use a key, oldest first: a vector with
  // a moving head (a std::deque per key would cost 512 bytes each).
  struct Occurrences {
    std::vector<int64_t> seqs;
    size_t head = 0;
    size_t size() const { return seqs.size() - head; }
    int64_t front() const { return seqs[head]; }
    void PopFront() {
      if (++head * 2 >= seqs.size()) {
        seqs.erase(seqs.begin(), seqs.begin() + head);
        head = 0;
      }
    }
  };
  absl::flat_hash_map<uint64_t, Occurrences> next_use_;
  std::deque<std::pair<int64_t, std::vector<uint64_t>>> window_;
  OrderedSlots outside_, inside_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakePolicy(PolicyKind kind, int32_t capacity) {
  switch (kind) {
    case PolicyKind::kLru:
      return std::make_unique<LruPolicy>(capacity);
    case PolicyKind::kLfu:
      return std::make_unique<LfuPolicy>(capacity);
    case PolicyKind::kLookahead:
      return std::make_unique<LookaheadPolicy>(capacity);
  }
  return nullptr;
}

}  // namespace psdb::cache
