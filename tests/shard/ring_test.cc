#include "shard/ring.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tests/testing/test_util.h"
#include "util/hash.h"

namespace psdb {
namespace {

std::vector<RingMember> Members(int n) {
  std::vector<RingMember> members;
  for (int i = 0; i < n; ++i) members.push_back({i, 1.0f});
  return members;
}

// The placement of ring.h written the slow, obvious way: every vnode in a
// sorted vector of (32-bit position, id), each probe's successor by binary
// search.
class ReferenceRing {
 public:
  ReferenceRing(const RingOptions& options,
                const std::vector<RingMember>& members)
      : seed_(options.hash_seed) {
    for (const RingMember& m : members) {
      const uint32_t n = Ring::VnodeCount(options, m.weight);
      for (uint32_t v = 0; v < n; ++v) {
        const uint64_t label =
            (uint64_t{static_cast<uint32_t>(m.id)} << 32) | v;
        points_.emplace_back(
            static_cast<uint32_t>(HashKey(label, Mix64(seed_)) >> 32), m.id);
      }
    }
    std::sort(points_.begin(), points_.end());
  }

  ServerId Owner(uint64_t key) const {
    const uint64_t h = HashKey(key, seed_);
    uint32_t best_distance = 0;
    ServerId best = kNoServer;
    for (int j = 0; j < Ring::kProbes; ++j) {
      const uint32_t x = static_cast<uint32_t>(
          Mix64(h + static_cast<uint64_t>(j) * 0x9e3779b97f4a7c15ULL) >> 32);
      auto it = std::lower_bound(
          points_.begin(), points_.end(),
          std::make_pair(x, std::numeric_limits<ServerId>::min()));
      if (it == points_.end()) it = points_.begin();
      const uint32_t distance = it->first - x;  // mod 2^32
      if (best == kNoServer || distance < best_distance) {
        best_distance = distance;
        best = it->second;
      }
    }
    return best;
  }

 private:
  uint64_t seed_;
  std::vector<std::pair<uint32_t, ServerId>> points_;
};

TEST(RingTest, EmptyRingOwnsNothing) {
  ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create(RingOptions(), {}));
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.num_servers(), 0u);
  EXPECT_EQ(ring.num_vnodes(), 0u);
  EXPECT_EQ(ring.Owner(42), kNoServer);
  EXPECT_EQ(Ring().Owner(42), kNoServer);
  EXPECT_EQ(ring.IndexOf(0), std::nullopt);
}

TEST(RingTest, SingleServerOwnsEverything) {
  ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create(RingOptions(), {{7, 1.0f}}));
  EXPECT_EQ(ring.num_vnodes(), 256u);
  for (uint64_t key = 0; key < 1000; ++key) ASSERT_EQ(ring.Owner(key), 7);
  EXPECT_EQ(ring.Owner(~uint64_t{0}), 7);
}

TEST(RingTest, RejectsBadMembersAndOptions) {
  const RingOptions options;
  EXPECT_THAT(Ring::Create(options, {{-1, 1.0f}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Ring::Create(options, {{3, 1.0f}, {3, 2.0f}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  for (float weight : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(), 1e7f}) {
    EXPECT_THAT(Ring::Create(options, {{0, weight}}),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << weight;
  }
  RingOptions bad = options;
  bad.vnodes_per_server = 0;
  EXPECT_THAT(Ring::Create(bad, {{0, 1.0f}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad.vnodes_per_server = Ring::kMaxVnodesPerServer + 1;
  EXPECT_THAT(Ring::Create(bad, {{0, 1.0f}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // 65536 vnodes x 257 servers > 2^24 vnodes.
  bad.vnodes_per_server = Ring::kMaxVnodesPerServer;
  EXPECT_THAT(Ring::Create(bad, Members(257)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RingTest, VnodeCountFollowsWeight) {
  const RingOptions options;  // 256 per unit of weight.
  EXPECT_EQ(Ring::VnodeCount(options, 1.0f), 256u);
  EXPECT_EQ(Ring::VnodeCount(options, 2.0f), 512u);
  EXPECT_EQ(Ring::VnodeCount(options, 0.5f), 128u);
  EXPECT_EQ(Ring::VnodeCount(options, 1e-6f), 1u);
  ASSERT_OK_AND_ASSIGN(
      Ring ring, Ring::Create(options, {{0, 1.0f}, {1, 2.0f}, {2, 0.5f}}));
  EXPECT_EQ(ring.num_vnodes(), 256u + 512u + 128u);
}

TEST(RingTest, MembersAreSortedByIdAndIndexed) {
  ASSERT_OK_AND_ASSIGN(
      Ring ring,
      Ring::Create(RingOptions(), {{30, 1.0f}, {10, 2.0f}, {20, 1.0f}}));
  ASSERT_EQ(ring.num_servers(), 3u);
  EXPECT_EQ(ring.server_id(0), 10);
  EXPECT_EQ(ring.server_id(1), 20);
  EXPECT_EQ(ring.server_id(2), 30);
  EXPECT_EQ(ring.members()[0].weight, 2.0f);
  EXPECT_EQ(ring.IndexOf(20), 1u);
  EXPECT_EQ(ring.IndexOf(25), std::nullopt);
}

TEST(RingTest, MatchesReferenceImplementation) {
  // Several shapes, including one vnode per server (most probes wrap past
  // the last vnode) and uneven weights.
  struct Case {
    int32_t vnodes;
    std::vector<RingMember> members;
  };
  const std::vector<Case> cases = {
      {1, {{0, 1.0f}, {1, 1.0f}}},
      {3, {{5, 1.0f}, {9, 3.0f}, {2, 0.4f}}},
      {256, Members(10)},
      {16, Members(200)},
  };
  for (const Case& c : cases) {
    RingOptions options;
    options.vnodes_per_server = c.vnodes;
    ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create(options, c.members));
    const ReferenceRing reference(options, c.members);
    for (uint64_t i = 0; i < 20000; ++i) {
      const uint64_t key = Mix64(i);
      ASSERT_EQ(ring.Owner(key), reference.Owner(key))
          << "key " << key << " vnodes " << c.vnodes;
    }
  }
}

TEST(RingTest, PlacementIsPinned) {
  // The placement is part of the checkpoint format (RingManifest): these
  // owners must never change. Computed with ReferenceRing above.
  ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create(RingOptions(), Members(5)));
  const std::vector<ServerId> expected = {2, 1, 0, 4, 3, 1, 4, 3,
                                          1, 1, 4, 0, 1, 2, 1, 2};
  std::vector<ServerId> actual;
  for (uint64_t key = 0; key < expected.size(); ++key) {
    actual.push_back(ring.Owner(key));
  }
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(ring.KeyHash(12345), HashKey(12345, kDefaultRingSeed));

  // And a fingerprint of 100,000 owners on 100 servers of mixed weights.
  std::vector<RingMember> members = Members(100);
  for (int i = 0; i < 100; i += 7) members[i].weight = 1.5f;
  ASSERT_OK_AND_ASSIGN(Ring big, Ring::Create(RingOptions(), members));
  std::vector<uint32_t> owners;
  for (uint64_t key = 0; key < 100000; ++key) owners.push_back(big.Owner(key));
  const uint64_t fingerprint = Hash64(absl::string_view(
      reinterpret_cast<const char*>(owners.data()), owners.size() * 4));
  EXPECT_EQ(fingerprint, 0xa6aa588d0949e0feULL);
}

TEST(RingTest, MemberOrderDoesNotMatter) {
  std::vector<RingMember> members = {
      {4, 1.0f}, {1, 2.0f}, {8, 1.0f}, {3, 0.5f}};
  ASSERT_OK_AND_ASSIGN(Ring a, Ring::Create(RingOptions(), members));
  std::reverse(members.begin(), members.end());
  ASSERT_OK_AND_ASSIGN(Ring b, Ring::Create(RingOptions(), members));
  EXPECT_TRUE(a == b);
  for (uint64_t key = 0; key < 5000; ++key) {
    ASSERT_EQ(a.Owner(key), b.Owner(key));
  }
}

TEST(RingTest, SeedChangesPlacement) {
  RingOptions other;
  other.hash_seed = 1;
  ASSERT_OK_AND_ASSIGN(Ring a, Ring::Create(RingOptions(), Members(8)));
  ASSERT_OK_AND_ASSIGN(Ring b, Ring::Create(other, Members(8)));
  EXPECT_FALSE(a == b);
  int differ = 0;
  for (uint64_t key = 0; key < 8000; ++key)
    differ += a.Owner(key) != b.Owner(key);
  // Independent placements agree on ~1/8 of keys.
  EXPECT_GT(differ, 6000);
}

TEST(RingTest, BatchLookupEqualsSingleLookup) {
  ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create(RingOptions(), Members(37)));
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 1003; ++i) keys.push_back(Mix64(i) ^ (i % 7));
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, keys.size()}) {
    std::vector<uint32_t> out(n, 12345);
    ring.OwnerIndices(absl::MakeConstSpan(keys.data(), n), absl::MakeSpan(out));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ring.OwnerIndex(keys[i]));
  }
}

TEST(RingTest, CopiesAndMovesOwnTheSameKeys) {
  ASSERT_OK_AND_ASSIGN(Ring ring, Ring::Create(RingOptions(), Members(6)));
  const Ring copy = ring;
  const Ring moved = std::move(ring);
  for (uint64_t key = 0; key < 2000; ++key) {
    ASSERT_EQ(copy.Owner(key), moved.Owner(key));
  }
}

}  // namespace
}  // namespace psdb
