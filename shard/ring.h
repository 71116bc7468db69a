// Ring: which server owns a key. Consistent hashing with virtual nodes,
// per-server weights, and multi-probe lookup (the request path calls
// OwnerIndex for every key of every pull and push).
//
// Placement (all hashes are XXH3-64, util/hash.h):
//  - The ring is the 32-bit circle; a position is the top 32 bits of a hash.
//  - Key hash:       h = HashKey(key, hash_seed).
//  - Virtual nodes:  a server of weight w has n = max(1, round(w * V)) vnodes
//    (V = RingOptions::vnodes_per_server, default 256), vnode i of server s
//    at top32(HashKey((uint64(uint32(s)) << 32) | i, Mix64(hash_seed))).
//  - Lookup: multi-probe consistent hashing (Appleton & O'Reilly, "Multi-
//    probe consistent hashing", arXiv:1505.00062). The key is probed at
//    kProbes = 8 positions p_j = top32(Mix64(h + j * 0x9e3779b97f4a7c15));
//    each probe finds its clockwise successor vnode (the first at or after
//    it); the key belongs to the server of the successor with the smallest
//    clockwise distance (ties: lowest j; vnodes at the same position: lowest
//    server id). 32-bit positions halve the ring's memory, which is what a
//    lookup waits on; ties stay rare (a 1,000-server ring has ~8 shared
//    positions) and are broken deterministically.
//
// Why not the plain ring. With one probe (classic consistent hashing) a
// vnode's share is the arc before it, exponentially distributed (CV 1), so a
// server's share has CV 1/sqrt(V) = 6.25% at V = 256 and the busiest of
// 1,000 servers holds ~1.2x the mean. With k probes the share of a vnode is
// ~(1 - exp(-(k-1) * arc)), CV 1/sqrt(2k-1); k = 8 gives CV 0.26/sqrt(V) =
// 1.6% per server. The movement properties of consistent hashing hold
// exactly, because each key's preference over vnodes (by smallest probe
// distance) is fixed, whatever else is on the ring: adding a server moves a
// key only onto the new server, removing one moves only that server's keys,
// raising a weight moves keys only onto that server. Alternatives measured or
// rejected: more vnodes (would need ~4,000 per server for the same balance),
// bounded-load assignment (cascading moves between old servers), Jump and
// Maglev (not minimal-disruption for arbitrary removals), rendezvous hashing
// (O(N) per key).
//
// Measured (tests/shard/ring_property_test.cc, 10M random keys, V = 256;
// the bounds the test enforces in brackets):
//   servers  busiest/mean   add one: moved x (N+1)   remove one: moved x N
//                [<= 1.1]          [0.8, 1.2]          [exactly its keys]
//      10        1.027               1.000                  0.990
//    1,000       1.063               1.032                  1.009
//   No key moved between old servers in any case. A weight-2 server among
//   nine weight-1 servers gets 2.03x their mean. Probe count, measured
//   while choosing it (another 10M keys, 1,000 servers): one probe (the
//   plain ring) 1.21, four 1.08, eight 1.05 (part of what remains is key
//   sampling noise: 10,000 keys per server, sd 1%).
// Lookup: O(kProbes), each probe O(1): a table over the top bits of the
// position gives the first vnode of each slot (about two vnodes per slot),
// then a short branch-free forward scan. psdb_shard_bench (Release, load
// average 16 on 2 cores, CPU time): 68 ns per key at 10 servers, 142 ns at
// 1,000, where the ring (2.5 MB) no longer fits in L2; partitioning a
// 4096-key batch costs 0.26 ms at 10 servers, 0.68 ms at 1,000.
//
// The ring is a pure function of (RingOptions, set of {id, weight}): the
// member order passed to Create does not matter, so every client and server
// that holds the same ClusterMap computes the same owners. kProbes and the
// placement above are part of the on-disk contract (checkpoints record the
// ring as RingManifest); changing them re-homes every key.
//
// Memory: about 10 bytes per vnode (2.5 MB for 1,000 servers at V = 256).
//
// Thread-safety: immutable after Create; all const methods may be called
// concurrently. Copyable (deep copy) and movable.
#ifndef PSDB_SHARD_RING_H_
#define PSDB_SHARD_RING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "util/hash.h"

namespace psdb {

// A server's identity in a cluster (its node id / rank). Non-negative.
using ServerId = int32_t;
inline constexpr ServerId kNoServer = -1;

// "psdbring" in ASCII: the seed every ring uses unless told otherwise. It
// differs from the seed-0 hashes store/ uses for stripes, so shard and stripe
// choice are independent.
inline constexpr uint64_t kDefaultRingSeed = 0x7073646272696e67ULL;

struct RingOptions {
  // Virtual nodes of a server of weight 1.0. Range [1, 65536].
  // Default: 256
  int32_t vnodes_per_server = 256;
  // XXH3 seed for key and vnode positions. Default: kDefaultRingSeed
  uint64_t hash_seed = kDefaultRingSeed;

  friend bool operator==(const RingOptions&, const RingOptions&) = default;
};

// One server on the ring.
struct RingMember {
  // REQUIRES: >= 0, unique within a ring.
  ServerId id = kNoServer;
  // Relative capacity: a server of weight 2 owns ~2x the keys of one of
  // weight 1. REQUIRES: finite, > 0. Default: 1.0
  float weight = 1.0f;

  friend bool operator==(const RingMember&, const RingMember&) = default;
};

class Ring {
 public:
  // Probes per key lookup (see the header comment). Part of the placement.
  static constexpr int kProbes = 8;
  static constexpr int32_t kMaxVnodesPerServer = 1 << 16;
  // Total vnodes over all servers, to bound memory (~10 bytes each).
  static constexpr size_t kMaxTotalVnodes = size_t{1} << 24;

  // Builds the ring of `members` (any order; an empty list gives an empty
  // ring, which owns nothing). InvalidArgument on a negative or duplicate id,
  // a non-finite or non-positive weight, vnodes_per_server out of range, or
  // more than kMaxTotalVnodes vnodes.
  static absl::StatusOr<Ring> Create(const RingOptions& options,
                                     absl::Span<const RingMember> members);

  // An empty ring (no servers).
  Ring();

  const RingOptions& options() const { return options_; }
  // Members sorted by id; a server's position here is its "index".
  absl::Span<const RingMember> members() const { return members_; }
  size_t num_servers() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  ServerId server_id(size_t index) const { return members_[index].id; }
  // Index of server `id`, or nullopt when it is not on the ring.
  std::optional<size_t> IndexOf(ServerId id) const;
  // Virtual nodes over all servers.
  size_t num_vnodes() const { return num_points_; }
  // Virtual nodes of a server of `weight` under these options.
  static uint32_t VnodeCount(const RingOptions& options, float weight);

  // The key's position on the ring (XXH3-64 of the key with hash_seed).
  uint64_t KeyHash(uint64_t key) const {
    return HashKey(key, options_.hash_seed);
  }
  // Index (into members()) of the server owning a key whose KeyHash is `h`.
  // REQUIRES: !empty().
  inline uint32_t OwnerIndexOfHash(uint64_t h) const;
  // REQUIRES: !empty().
  uint32_t OwnerIndex(uint64_t key) const {
    return OwnerIndexOfHash(KeyHash(key));
  }
  // The owning server's id; kNoServer when the ring is empty.
  ServerId Owner(uint64_t key) const {
    return empty() ? kNoServer : members_[OwnerIndex(key)].id;
  }
  // out[i] = OwnerIndex(keys[i]), faster than a loop over OwnerIndex for
  // large batches (overlaps the probes' memory accesses across keys).
  // REQUIRES: !empty(), out.size() == keys.size().
  void OwnerIndices(absl::Span<const uint64_t> keys,
                    absl::Span<uint32_t> out) const;
  // The same for keys already hashed: out[i] = OwnerIndexOfHash(hashes[i]).
  // REQUIRES: !empty(), out.size() == hashes.size().
  inline void OwnerIndicesOfHashes(absl::Span<const uint64_t> hashes,
                                   absl::Span<uint32_t> out) const;

  // Same members (as a set) and options: then every key has the same owner.
  friend bool operator==(const Ring& a, const Ring& b) {
    return a.options_ == b.options_ && a.members_ == b.members_;
  }

 private:
  static uint32_t ProbePosition(uint64_t h, int j) {
    return static_cast<uint32_t>(
        Mix64(h + static_cast<uint64_t>(j) * 0x9e3779b97f4a7c15ULL) >> 32);
  }
  // Prefetches the slots the probes of hash h will read.
  void PrefetchProbes(uint64_t h) const {
    for (int j = 0; j < kProbes; ++j) {
      __builtin_prefetch(&slot_start_[ProbePosition(h, j) >> slot_shift_]);
    }
  }
  // Index of the first vnode at or clockwise after position x.
  inline uint32_t Successor(uint32_t x) const;

  RingOptions options_;
  std::vector<RingMember> members_;
  uint32_t num_points_ = 0;
  // Vnode positions, sorted, followed by one sentinel 0xffffffff so the
  // forward scan needs no bounds check.
  std::vector<uint32_t> pos_;
  // owner_[i]: member index of the vnode at pos_[i].
  std::vector<uint32_t> owner_;
  // slot_start_[t]: first vnode whose position's top bits are >= t, where
  // t = position >> slot_shift_.
  std::vector<uint32_t> slot_start_;
  int slot_shift_ = 31;
};

inline uint32_t Ring::Successor(uint32_t x) const {
  uint32_t i = slot_start_[x >> slot_shift_];
  // About two vnodes per slot, one below x on average: three branch-free
  // steps settle almost every probe; the loop handles crowded slots.
  // pos_[num_points_] = 0xffffffff stops it.
  i += pos_[i] < x;
  i += pos_[i] < x;
  i += pos_[i] < x;
  while (pos_[i] < x) ++i;
  return i == num_points_ ? 0 : i;  // Past the last vnode: wrap around.
}

inline uint32_t Ring::OwnerIndexOfHash(uint64_t h) const {
  uint32_t x = ProbePosition(h, 0);
  uint32_t best = Successor(x);
  uint32_t best_distance = pos_[best] - x;  // Clockwise, mod 2^32.
  for (int j = 1; j < kProbes; ++j) {
    x = ProbePosition(h, j);
    const uint32_t i = Successor(x);
    const uint32_t distance = pos_[i] - x;
    const bool closer = distance < best_distance;  // Ties: lowest j.
    best_distance = closer ? distance : best_distance;
    best = closer ? i : best;
  }
  return owner_[best];
}

inline void Ring::OwnerIndicesOfHashes(absl::Span<const uint64_t> hashes,
                                       absl::Span<uint32_t> out) const {
  // Blocks of 8 keys, as in OwnerIndices: prefetch, then resolve.
  constexpr size_t kBlock = 8;
  const size_t n = hashes.size();
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t m = n - begin < kBlock ? n - begin : kBlock;
    for (size_t q = 0; q < m; ++q) PrefetchProbes(hashes[begin + q]);
    for (size_t q = 0; q < m; ++q) {
      out[begin + q] = OwnerIndexOfHash(hashes[begin + q]);
    }
  }
}

}  // namespace psdb

#endif  // PSDB_SHARD_RING_H_
