// Unit tests of the eviction policies, SlotMap and the simulation helpers,
// on traces small enough to work out by hand.
#include "cache/policy.h"

#include <optional>
#include <vector>

#include "cache/policy_sim.h"
#include "cache/slot_map.h"
#include "tests/testing/test_util.h"
#include "util/hash.h"

namespace psdb::cache {
namespace {

SlotKey K(uint64_t id) { return SlotKey{0, id}; }

// Accesses `id` as a one-id batch: hit -> pin, access, unpin; miss -> insert
// (evicting if full), unpin. Returns the evicted id or -1.
int64_t Touch(SlotMap& map, uint64_t id, uint64_t frequency = 0) {
  int32_t slot = map.Find(K(id));
  int64_t evicted_id = -1;
  if (slot >= 0) {
    map.PinAndAccess(slot);
  } else {
    std::optional<SlotKey> evicted;
    uint64_t f = 0;
    slot = map.Insert(K(id), frequency, &evicted, &f);
    if (evicted) evicted_id = static_cast<int64_t>(evicted->id);
  }
  map.Unpin(slot);
  return evicted_id;
}

TEST(SlotMapTest, FillsFreeSlotsBeforeEvicting) {
  SlotMap map(3, PolicyKind::kLru);
  EXPECT_EQ(Touch(map, 1), -1);
  EXPECT_EQ(Touch(map, 2), -1);
  EXPECT_EQ(Touch(map, 3), -1);
  EXPECT_EQ(map.size(), 3);
  EXPECT_EQ(map.available(), 3);
  EXPECT_GE(map.Find(K(2)), 0);
  EXPECT_EQ(map.Find(K(4)), -1);
}

TEST(SlotMapTest, PinnedSlotsAreNeverVictims) {
  SlotMap map(2, PolicyKind::kLru);
  Touch(map, 1);
  Touch(map, 2);
  map.PinAndAccess(map.Find(K(1)));  // 1 is older but pinned
  EXPECT_EQ(map.available(), 1);
  std::optional<SlotKey> evicted;
  uint64_t f = 0;
  const int32_t s3 = map.Insert(K(3), 0, &evicted, &f);
  ASSERT_TRUE(evicted.has_value());
  EXPECT_EQ(evicted->id, 2u);
  EXPECT_EQ(map.available(), 0);
  map.Unpin(s3);
  map.Unpin(map.Find(K(1)));
  EXPECT_EQ(map.available(), 2);
}

TEST(SlotMapTest, PinCountsNest) {
  SlotMap map(1, PolicyKind::kLru);
  Touch(map, 7);
  const int32_t s = map.Find(K(7));
  map.Pin(s);
  map.Pin(s);
  map.Unpin(s);
  EXPECT_TRUE(map.pinned(s));
  EXPECT_EQ(map.available(), 0);
  map.Unpin(s);
  EXPECT_FALSE(map.pinned(s));
  EXPECT_EQ(map.available(), 1);
}

TEST(SlotMapTest, EraseFreesTheSlot) {
  SlotMap map(2, PolicyKind::kLfu);
  Touch(map, 1);
  std::optional<SlotKey> evicted;
  uint64_t f = 0;
  const int32_t s = map.Insert(K(2), 0, &evicted, &f);
  map.Erase(s);  // e.g. its fetch failed
  EXPECT_EQ(map.Find(K(2)), -1);
  EXPECT_EQ(map.size(), 1);
  EXPECT_EQ(map.available(), 2);
  EXPECT_EQ(Touch(map, 3), -1);  // reuses the freed slot
}

TEST(SlotMapTest, TablesAreSeparateKeys) {
  SlotMap map(2, PolicyKind::kLru);
  std::optional<SlotKey> evicted;
  uint64_t f = 0;
  const int32_t a = map.Insert(SlotKey{0, 5}, 0, &evicted, &f);
  const int32_t b = map.Insert(SlotKey{1, 5}, 0, &evicted, &f);
  EXPECT_NE(a, b);
  EXPECT_EQ(map.Find(SlotKey{1, 5}), b);
}

TEST(LruTest, EvictsLeastRecentlyUsed) {
  SlotMap map(3, PolicyKind::kLru);
  Touch(map, 1);
  Touch(map, 2);
  Touch(map, 3);
  Touch(map, 1);
  EXPECT_EQ(Touch(map, 4), 2);
  EXPECT_EQ(Touch(map, 5), 3);
  EXPECT_EQ(Touch(map, 6), 1);
}

TEST(LfuTest, EvictsLeastFrequentlyThenLeastRecentlyUsed) {
  SlotMap map(3, PolicyKind::kLfu);
  Touch(map, 1);
  Touch(map, 1);
  Touch(map, 1);
  Touch(map, 2);
  Touch(map, 2);
  Touch(map, 3);
  EXPECT_EQ(Touch(map, 4), 3);  // 3 is the only row seen once
  EXPECT_EQ(Touch(map, 5), 4);
  EXPECT_EQ(map.frequency(map.Find(K(1))), 3u);
}

TEST(LfuTest, StartsFromTheRowHeaderFrequency) {
  SlotMap map(2, PolicyKind::kLfu);
  Touch(map, 1);
  Touch(map, 1);
  Touch(map, 2, /*frequency=*/10);  // seen 10 times before it was cached
  EXPECT_EQ(map.frequency(map.Find(K(2))), 11u);
  EXPECT_EQ(Touch(map, 3), 1);
}

TEST(LookaheadTest, EvictsRowsOutsideTheWindowFirst) {
  SlotMap map(2, PolicyKind::kLookahead);
  map.AddFuture(0, {K(1)});
  map.AddFuture(1, {K(2)});
  map.AddFuture(2, {K(3)});
  map.AddFuture(3, {K(1)});  // 1 is used again, 2 is not
  map.BeginBatch(0);
  Touch(map, 1);
  map.BeginBatch(1);
  Touch(map, 2);
  map.BeginBatch(2);
  EXPECT_EQ(Touch(map, 3), 2);  // LRU would evict 1
}

TEST(LookaheadTest, EvictsFurthestNextUseWithinTheWindow) {
  SlotMap map(2, PolicyKind::kLookahead);
  map.AddFuture(0, {K(1), K(2)});
  map.AddFuture(1, {K(3)});
  map.AddFuture(2, {K(2)});
  map.AddFuture(3, {K(1)});
  map.BeginBatch(0);
  Touch(map, 1);
  Touch(map, 2);
  map.BeginBatch(1);
  EXPECT_EQ(Touch(map, 3), 1);  // 1 is next used at batch 3, 2 at batch 2
  map.BeginBatch(2);
  EXPECT_EQ(Touch(map, 2), -1);
}

TEST(LookaheadTest, OutsideTheWindowFallsBackToLfu) {
  SlotMap map(2, PolicyKind::kLookahead);
  Touch(map, 1);
  Touch(map, 1);
  Touch(map, 2);
  EXPECT_EQ(Touch(map, 3), 2);
}

TEST(PolicySimTest, BeladyOnAHandTrace) {
  // Capacity 2, A B C A B: C evicts B (next used after A), A hits, B misses.
  const std::vector<uint64_t> trace = {1, 2, 3, 1, 2};
  EXPECT_DOUBLE_EQ(BeladyHitRate(trace, 2, 0), 1.0 / 5);
  EXPECT_DOUBLE_EQ(BeladyHitRate(trace, 3, 0), 2.0 / 5);
  EXPECT_DOUBLE_EQ(BeladyHitRate(trace, 3, 3), 1.0);
}

TEST(PolicySimTest, LruOnAHandTrace) {
  const std::vector<uint64_t> trace = {1, 2, 1, 3, 1, 2};
  SimOptions options;
  options.capacity = 2;
  ASSERT_OK_AND_ASSIGN(SimResult r, SimulateHitRate(trace, options));
  EXPECT_EQ(r.accesses, 6);
  EXPECT_EQ(r.misses, 4);  // 1 2 [1 hit] 3 (evicts 2) [1 hit] 2
}

TEST(PolicySimTest, DuplicatesInABatchMissOnce) {
  const std::vector<uint64_t> trace = {1, 1, 2, 2, 1, 3};
  SimOptions options;
  options.capacity = 3;
  options.batch_size = 3;
  ASSERT_OK_AND_ASSIGN(SimResult r, SimulateHitRate(trace, options));
  EXPECT_EQ(r.accesses, 6);
  EXPECT_EQ(r.misses, 3);
}

TEST(PolicySimTest, BatchLargerThanCapacityIsAnError) {
  const std::vector<uint64_t> trace = {1, 2, 3, 4};
  SimOptions options;
  options.capacity = 3;
  options.batch_size = 4;
  EXPECT_THAT(SimulateHitRate(trace, options),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(PolicySimTest, TheoryOnUniformPopularity) {
  // Two equally likely ids, one slot: e^{-T/2} = 1/2, so H = 1/2.
  const std::vector<double> p = {0.5, 0.5};
  EXPECT_NEAR(CheLruHitRate(p, 1), 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(StaticOptimumHitRate(p, 1), 0.5);
  const std::vector<double> z = ZipfProbabilities(3, 1.0);  // 6/11 3/11 2/11
  EXPECT_NEAR(z[0], 6.0 / 11, 1e-15);
  EXPECT_NEAR(z[2], 2.0 / 11, 1e-15);
  EXPECT_NEAR(StaticOptimumHitRate(z, 2), 9.0 / 11, 1e-15);
}

TEST(PolicySimTest, ZipfTraceIsDeterministicAndSkewed) {
  const std::vector<double> z = ZipfProbabilities(1000, 1.0);
  const std::vector<uint64_t> a = ZipfTrace(z, 20000, 7);
  EXPECT_EQ(a, ZipfTrace(z, 20000, 7));
  int64_t top = 0;
  for (uint64_t id : a) top += (id == Mix64(0));
  // p_1 = 1 / H_1000 = 0.1336; 20000 draws: 2672 +- 5 sigma (240).
  EXPECT_NEAR(top, 2672, 240);
}

}  // namespace
}  // namespace psdb::cache
