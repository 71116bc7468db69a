#include "shard/partitioner.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "tests/testing/test_util.h"
#include "util/hash.h"

namespace psdb {
namespace {

Ring MakeRing(int servers) {
  std::vector<RingMember> members;
  for (int i = 0; i < servers; ++i) members.push_back({10 * i, 1.0f});
  return Ring::Create(RingOptions(), members).value();
}

// A batch of n keys drawn from `distinct` values, so most repeat.
std::vector<uint64_t> BatchWithDuplicates(size_t n, uint64_t distinct,
                                          uint64_t salt) {
  std::vector<uint64_t> keys;
  for (size_t i = 0; i < n; ++i)
    keys.push_back(Mix64(Mix64(i + salt) % distinct));
  return keys;
}

// The checks every partition must pass, whatever the options.
void ExpectValidPartition(const Ring& ring, const Partitioner& p,
                          const std::vector<uint64_t>& keys, bool dedup) {
  ASSERT_EQ(p.num_keys(), keys.size());
  ASSERT_EQ(p.num_parts(), ring.num_servers());
  ASSERT_EQ(p.inverse().size(), keys.size());
  // Every position finds its own key in the sent order.
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_LT(p.inverse()[i], p.num_sent());
    ASSERT_EQ(p.sent_keys()[p.inverse()[i]], keys[i]) << i;
  }
  if (dedup) {
    const std::set<uint64_t> distinct(keys.begin(), keys.end());
    EXPECT_EQ(p.num_sent(), distinct.size());
  } else {
    EXPECT_EQ(p.num_sent(), keys.size());
    std::vector<bool> seen(keys.size(), false);
    for (uint32_t s : p.inverse()) {
      ASSERT_FALSE(seen[s]);
      seen[s] = true;
    }
  }
  // Parts tile the sent order in ring order; each key is on its owner.
  std::vector<uint32_t> nonempty;
  size_t offset = 0;
  for (size_t part = 0; part < p.num_parts(); ++part) {
    EXPECT_EQ(p.part_server(part), ring.server_id(part));
    EXPECT_EQ(p.part_offset(part), offset);
    for (uint64_t key : p.part_keys(part)) {
      ASSERT_EQ(ring.Owner(key), p.part_server(part));
    }
    if (!p.part_keys(part).empty()) nonempty.push_back(part);
    offset += p.part_keys(part).size();
  }
  EXPECT_EQ(offset, p.num_sent());
  EXPECT_EQ(std::vector<uint32_t>(p.nonempty_parts().begin(),
                                  p.nonempty_parts().end()),
            nonempty);
}

TEST(PartitionerTest, ExactSmallBatch) {
  const Ring ring = MakeRing(3);
  // Keys a, b, a, c, b: three distinct keys, sent once each.
  const uint64_t a = 11, b = 22, c = 33;
  const std::vector<uint64_t> keys = {a, b, a, c, b};
  Partitioner p;
  ASSERT_OK(p.Partition(ring, keys));
  ExpectValidPartition(ring, p, keys, /*dedup=*/true);
  EXPECT_EQ(p.num_sent(), 3u);
  EXPECT_EQ(p.inverse()[0], p.inverse()[2]);
  EXPECT_EQ(p.inverse()[1], p.inverse()[4]);
  // Expected sent order: by owner's ring index, then first appearance.
  std::vector<uint64_t> expected;
  for (size_t part = 0; part < 3; ++part) {
    for (uint64_t key : {a, b, c}) {
      if (ring.OwnerIndex(key) == part) expected.push_back(key);
    }
  }
  EXPECT_EQ(std::vector<uint64_t>(p.sent_keys().begin(), p.sent_keys().end()),
            expected);
}

TEST(PartitionerTest, RandomBatchesWithAndWithoutDedup) {
  const Ring ring = MakeRing(7);
  Partitioner p;
  for (bool dedup : {true, false}) {
    for (size_t n : {size_t{1}, size_t{100}, size_t{4096}}) {
      const std::vector<uint64_t> keys = BatchWithDuplicates(n, n / 3 + 1, n);
      ASSERT_OK(p.Partition(ring, keys, dedup));
      ExpectValidPartition(ring, p, keys, dedup);
    }
  }
}

TEST(PartitionerTest, ScatterAnswersEveryPosition) {
  const Ring ring = MakeRing(5);
  const std::vector<uint64_t> keys = BatchWithDuplicates(1000, 200, 1);
  constexpr size_t kDim = 3;
  for (bool dedup : {true, false}) {
    Partitioner p;
    ASSERT_OK(p.Partition(ring, keys, dedup));
    // Each server answers row (key, key + 1, key + 2) for each key it got,
    // written at its part's offset.
    std::vector<double> sent_rows(p.num_sent() * kDim, -1);
    for (uint32_t part : p.nonempty_parts()) {
      size_t s = p.part_offset(part);
      for (uint64_t key : p.part_keys(part)) {
        for (size_t c = 0; c < kDim; ++c)
          sent_rows[s * kDim + c] = key % 1000 + c;
        ++s;
      }
    }
    std::vector<double> out(keys.size() * kDim, -1);
    ASSERT_OK(p.Scatter<double>(sent_rows, kDim, absl::MakeSpan(out)));
    for (size_t i = 0; i < keys.size(); ++i) {
      for (size_t c = 0; c < kDim; ++c) {
        ASSERT_EQ(out[i * kDim + c], keys[i] % 1000 + c) << i;
      }
    }
  }
}

TEST(PartitionerTest, GatherSumAddsDuplicateGradients) {
  const Ring ring = MakeRing(4);
  const std::vector<uint64_t> keys = {5, 6, 5, 5, 7, 6};
  // Gradient of position i: (i, 10 * i), exact in float.
  std::vector<float> grads;
  for (size_t i = 0; i < keys.size(); ++i) {
    grads.push_back(i);
    grads.push_back(10.0f * i);
  }
  Partitioner p;
  ASSERT_OK(p.Partition(ring, keys));
  std::vector<float> sent(p.num_sent() * 2, 99);
  ASSERT_OK(p.GatherSum<float>(grads, 2, absl::MakeSpan(sent)));
  const std::map<uint64_t, std::pair<float, float>> expected = {
      {5, {0 + 2 + 3, 0 + 20 + 30}}, {6, {1 + 5, 10 + 50}}, {7, {4, 40}}};
  ASSERT_EQ(p.num_sent(), 3u);
  for (size_t s = 0; s < p.num_sent(); ++s) {
    const auto& e = expected.at(p.sent_keys()[s]);
    EXPECT_EQ(sent[2 * s], e.first);
    EXPECT_EQ(sent[2 * s + 1], e.second);
  }

  // Gather (assign semantics): the last position of each key wins.
  ASSERT_OK(p.Gather<float>(grads, 2, absl::MakeSpan(sent)));
  const std::map<uint64_t, float> last = {{5, 3}, {6, 5}, {7, 4}};
  for (size_t s = 0; s < p.num_sent(); ++s) {
    EXPECT_EQ(sent[2 * s], last.at(p.sent_keys()[s]));
  }
}

// GatherSum must sum as Table::Push does (copy the first occurrence, add
// the later ones in batch order), or a remote push would differ from an
// embedded one in the last bits.
TEST(PartitionerTest, GatherSumMatchesTheStoresSummation) {
  const Ring ring = MakeRing(4);
  // Key 5: three gradients whose float sum depends on the order:
  // (1e8 + -1e8) + 1 == 1, but 1e8 + (-1e8 + 1) == 0 (floats near 1e8 are 8
  // apart). Key 6: -0.0f twice; 0.0f + -0.0f would be +0.0f. Key 7: one
  // -0.0f.
  const std::vector<uint64_t> keys = {5, 6, 5, 7, 6, 5};
  const std::vector<float> grads = {1e8f, -0.0f, -1e8f, -0.0f, -0.0f, 1.0f};
  for (bool deduplicate : {true, false}) {
    SCOPED_TRACE(deduplicate);
    Partitioner p;
    ASSERT_OK(p.Partition(ring, keys, deduplicate));
    std::vector<float> sent(p.num_sent(), 99);
    ASSERT_OK(p.GatherSum<float>(grads, 1, absl::MakeSpan(sent)));
    if (!deduplicate) {
      // Nothing to sum: every gradient is sent as it is, sign bit included.
      for (size_t i = 0; i < keys.size(); ++i) {
        const float g = sent[p.inverse()[i]];
        EXPECT_EQ(g, grads[i]);
        EXPECT_EQ(std::signbit(g), std::signbit(grads[i])) << i;
      }
      continue;
    }
    ASSERT_EQ(p.num_sent(), 3u);
    for (size_t s = 0; s < p.num_sent(); ++s) {
      const uint64_t key = p.sent_keys()[s];
      if (key == 5) {
        EXPECT_EQ(sent[s], 1.0f);
      } else {
        EXPECT_EQ(sent[s], 0.0f) << key;
        EXPECT_TRUE(std::signbit(sent[s])) << key;
      }
    }
  }
}

TEST(PartitionerTest, RejectsWrongSizes) {
  const Ring ring = MakeRing(2);
  const std::vector<uint64_t> keys = {1, 2, 1};
  Partitioner p;
  ASSERT_OK(p.Partition(ring, keys));
  std::vector<float> sent(p.num_sent() * 4);
  std::vector<float> out(keys.size() * 4);
  std::vector<float> short_out(keys.size() * 4 - 1);
  EXPECT_THAT(p.Scatter<float>(sent, 4, absl::MakeSpan(short_out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(p.Scatter<float>(sent, 3, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(p.GatherSum<float>(short_out, 4, absl::MakeSpan(sent)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(p.Scatter<float>(sent, 4, absl::MakeSpan(out)));
}

TEST(PartitionerTest, EmptyBatchAndEmptyRing) {
  Partitioner p;
  const Ring ring = MakeRing(3);
  ASSERT_OK(p.Partition(ring, {}));
  EXPECT_EQ(p.num_keys(), 0u);
  EXPECT_EQ(p.num_sent(), 0u);
  EXPECT_EQ(p.num_parts(), 3u);
  EXPECT_TRUE(p.nonempty_parts().empty());
  std::vector<float> none;
  EXPECT_OK(p.Scatter<float>(none, 8, absl::MakeSpan(none)));

  const Ring empty;
  ASSERT_OK(p.Partition(empty, {}));
  const std::vector<uint64_t> keys = {1, 2};
  EXPECT_THAT(p.Partition(empty, keys),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // A failed call leaves nothing stale behind.
  EXPECT_EQ(p.num_keys(), 0u);
  EXPECT_EQ(p.num_sent(), 0u);
}

TEST(PartitionerTest, ReuseAcrossBatchesLeavesNothingStale) {
  const Ring big_ring = MakeRing(9);
  const Ring small_ring = MakeRing(2);
  Partitioner p;
  const std::vector<uint64_t> big = BatchWithDuplicates(5000, 4000, 7);
  ASSERT_OK(p.Partition(big_ring, big));
  ExpectValidPartition(big_ring, p, big, true);
  const std::vector<uint64_t> small = {3, 3, 4};
  ASSERT_OK(p.Partition(small_ring, small));
  ExpectValidPartition(small_ring, p, small, true);
  EXPECT_EQ(p.num_sent(), 2u);
  ASSERT_OK(p.Partition(big_ring, big, /*deduplicate=*/false));
  ExpectValidPartition(big_ring, p, big, false);
}

TEST(PartitionerTest, AllKeysEqual) {
  const Ring ring = MakeRing(3);
  const std::vector<uint64_t> keys(300, 42);
  Partitioner p;
  ASSERT_OK(p.Partition(ring, keys));
  EXPECT_EQ(p.num_sent(), 1u);
  ASSERT_EQ(p.nonempty_parts().size(), 1u);
  EXPECT_EQ(p.part_server(p.nonempty_parts()[0]), ring.Owner(42));
  for (uint32_t s : p.inverse()) EXPECT_EQ(s, 0u);
}

}  // namespace
}  // namespace psdb
