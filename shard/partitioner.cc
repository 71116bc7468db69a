#include "shard/partitioner.h"

#include <limits>

namespace psdb {

absl::Status Partitioner::Partition(const Ring& ring,
                                    absl::Span<const uint64_t> keys,
                                    bool deduplicate) {
  const size_t n = keys.size();
  // A failed call leaves an empty partition, never a stale one.
  part_servers_.clear();
  offsets_.assign(1, 0);
  nonempty_.clear();
  sent_.clear();
  inverse_.clear();
  if (n >= std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("partitioner: batch of ", n, " keys is too large"));
  }
  if (n > 0 && ring.empty()) {
    return absl::FailedPreconditionError(
        "partitioner: the ring has no servers to own the keys");
  }
  const size_t num_parts = ring.num_servers();
  part_servers_.resize(num_parts);
  for (size_t p = 0; p < num_parts; ++p) part_servers_[p] = ring.server_id(p);

  // 1. Distinct keys (unique + inverse).
  absl::Span<const uint64_t> distinct = keys;
  if (deduplicate) {
    dedup_.Reset(n);
    distinct_of_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      bool inserted;
      const uint32_t u = dedup_.Insert(keys[i], &inserted);
      distinct_of_[i] = u;
    }
    distinct = dedup_.unique();
  }
  const size_t m = distinct.size();

  // 2. Owners, once per distinct key.
  owner_.resize(m);
  if (m > 0) ring.OwnerIndices(distinct, absl::MakeSpan(owner_));

  // 3. Counting sort by owner; stable, so first-appearance order within a
  // part is kept.
  offsets_.assign(num_parts + 1, 0);
  for (size_t u = 0; u < m; ++u) ++offsets_[owner_[u] + 1];
  nonempty_.clear();
  for (size_t p = 0; p < num_parts; ++p) {
    if (offsets_[p + 1] > 0) nonempty_.push_back(static_cast<uint32_t>(p));
    offsets_[p + 1] += offsets_[p];
  }
  cursor_.assign(offsets_.begin(), offsets_.end() - 1);
  sent_.resize(m);
  sent_of_.resize(m);
  for (size_t u = 0; u < m; ++u) {
    const size_t s = cursor_[owner_[u]]++;
    sent_[s] = distinct[u];
    sent_of_[u] = static_cast<uint32_t>(s);
  }

  // 4. Every position's place in the sent order.
  inverse_.resize(n);
  if (deduplicate) {
    for (size_t i = 0; i < n; ++i) inverse_[i] = sent_of_[distinct_of_[i]];
  } else {
    std::copy(sent_of_.begin(), sent_of_.end(), inverse_.begin());
  }
  return absl::OkStatus();
}

absl::Status Partitioner::CheckSizes(size_t positions_size, size_t sent_size,
                                     size_t width) const {
  if (positions_size != inverse_.size() * width ||
      sent_size != sent_.size() * width) {
    return absl::InvalidArgumentError(
        absl::StrCat("partitioner: expected ", inverse_.size(), " x ", width,
                     " values per position and ", sent_.size(), " x ", width,
                     " sent values, got ", positions_size, " and ", sent_size));
  }
  return absl::OkStatus();
}

}  // namespace psdb
