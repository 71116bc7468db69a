#include "shard/ring.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psdb {

Ring::Ring() : pos_(1, ~uint32_t{0}), slot_start_(2, 0) {}

uint32_t Ring::VnodeCount(const RingOptions& options, float weight) {
  const double n = std::llround(static_cast<double>(weight) *
                                static_cast<double>(options.vnodes_per_server));
  // Clamped so absurd weights fail Create's total check instead of
  // overflowing the conversion.
  return static_cast<uint32_t>(
      std::clamp(n, 1.0, static_cast<double>(kMaxTotalVnodes + 1)));
}

absl::StatusOr<Ring> Ring::Create(const RingOptions& options,
                                  absl::Span<const RingMember> members) {
  if (options.vnodes_per_server < 1 ||
      options.vnodes_per_server > kMaxVnodesPerServer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring: vnodes_per_server must be in [1, ", kMaxVnodesPerServer,
        "], got ", options.vnodes_per_server));
  }
  Ring ring;
  ring.options_ = options;
  ring.members_.assign(members.begin(), members.end());
  std::sort(
      ring.members_.begin(), ring.members_.end(),
      [](const RingMember& a, const RingMember& b) { return a.id < b.id; });
  size_t total = 0;
  for (size_t i = 0; i < ring.members_.size(); ++i) {
    const RingMember& m = ring.members_[i];
    if (m.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring: server id must be >= 0, got ", m.id));
    }
    if (i > 0 && ring.members_[i - 1].id == m.id) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring: duplicate server id ", m.id));
    }
    // The upper bound keeps weight * vnodes_per_server far from overflow; a
    // ring that large is refused by the total below anyway.
    if (!std::isfinite(m.weight) || m.weight <= 0.0f || m.weight > 1e6f) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring: server ", m.id, " has weight ", m.weight,
                       "; weights must be finite, > 0 and <= 1e6"));
    }
    total += VnodeCount(options, m.weight);
    if (total > kMaxTotalVnodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring: more than ", kMaxTotalVnodes,
                       " virtual nodes; lower vnodes_per_server or weights"));
    }
  }

  // (position, member index): sorting by index breaks position ties by
  // server id, since members_ is sorted by id.
  std::vector<std::pair<uint32_t, uint32_t>> points;
  points.reserve(total);
  const uint64_t vnode_seed = Mix64(options.hash_seed);
  for (uint32_t index = 0; index < ring.members_.size(); ++index) {
    const RingMember& m = ring.members_[index];
    const uint64_t base = uint64_t{static_cast<uint32_t>(m.id)} << 32;
    const uint32_t n = VnodeCount(options, m.weight);
    for (uint32_t v = 0; v < n; ++v) {
      points.emplace_back(
          static_cast<uint32_t>(HashKey(base | v, vnode_seed) >> 32), index);
    }
  }
  std::sort(points.begin(), points.end());

  ring.num_points_ = static_cast<uint32_t>(points.size());
  ring.pos_.resize(points.size() + 1);
  ring.owner_.resize(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    ring.pos_[i] = points[i].first;
    ring.owner_[i] = points[i].second;
  }
  ring.pos_[points.size()] = ~uint32_t{0};

  // 2^bits >= half the vnodes: at most about two vnodes per slot.
  int bits = 1;
  while ((size_t{2} << bits) < points.size()) ++bits;
  ring.slot_shift_ = 32 - bits;
  const size_t slots = size_t{1} << bits;
  ring.slot_start_.assign(slots + 1, ring.num_points_);
  uint32_t i = 0;
  for (size_t t = 0; t < slots; ++t) {
    while (i < ring.num_points_ && (ring.pos_[i] >> ring.slot_shift_) < t) ++i;
    ring.slot_start_[t] = i;
  }
  return ring;
}

std::optional<size_t> Ring::IndexOf(ServerId id) const {
  auto it = std::lower_bound(
      members_.begin(), members_.end(), id,
      [](const RingMember& m, ServerId target) { return m.id < target; });
  if (it == members_.end() || it->id != id) return std::nullopt;
  return static_cast<size_t>(it - members_.begin());
}

// Blocks of keys: first prefetch the slot of every probe of the block, then
// resolve. The probes of a block miss the cache independently, so their
// latencies overlap instead of adding up.
void Ring::OwnerIndices(absl::Span<const uint64_t> keys,
                        absl::Span<uint32_t> out) const {
  constexpr size_t kBlock = 8;
  uint64_t hashes[kBlock];
  const size_t n = keys.size();
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t m = std::min(kBlock, n - begin);
    for (size_t q = 0; q < m; ++q) {
      hashes[q] = KeyHash(keys[begin + q]);
      PrefetchProbes(hashes[q]);
    }
    for (size_t q = 0; q < m; ++q) {
      out[begin + q] = OwnerIndexOfHash(hashes[q]);
    }
  }
}

}  // namespace psdb
