#include "store/admission.h"

#include <algorithm>

#include "util/hash.h"

namespace psdb::internal {

AdmissionCounter::AdmissionCounter(uint32_t threshold, size_t max_tracked)
    : threshold_(threshold),
      per_shard_cap_(std::max<size_t>(1, max_tracked / kStripes)),
      shards_(std::make_unique<Shard[]>(kStripes)) {}

AdmissionCounter::Shard& AdmissionCounter::ShardOf(uint64_t key) const {
  return shards_[Mix64(key ^ 0x5bd1e995ULL) % kStripes];
}

bool AdmissionCounter::Record(uint64_t key, uint32_t occurrences) {
  if (!enabled()) return true;
  Shard& s = ShardOf(key);
  absl::MutexLock l(&s.mu);
  auto it = s.counts.find(key);
  uint64_t count = occurrences;
  if (it != s.counts.end()) count += it->second;
  if (count >= threshold_) {
    if (it != s.counts.end()) s.counts.erase(it);
    return true;
  }
  if (it != s.counts.end()) {
    it->second = static_cast<uint32_t>(count);
  } else {
    if (s.counts.size() >= per_shard_cap_) s.counts.clear();
    s.counts.emplace(key, static_cast<uint32_t>(count));
  }
  return false;
}

uint32_t AdmissionCounter::Count(uint64_t key) const {
  Shard& s = ShardOf(key);
  absl::MutexLock l(&s.mu);
  auto it = s.counts.find(key);
  return it == s.counts.end() ? 0 : it->second;
}

size_t AdmissionCounter::Tracked() const {
  size_t n = 0;
  for (int i = 0; i < kStripes; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    n += shards_[i].counts.size();
  }
  return n;
}

}  // namespace psdb::internal
