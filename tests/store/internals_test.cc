// Internal building blocks of the store: AdmissionCounter and the memory
// tier's arena and eviction policies.
#include <algorithm>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "store/admission.h"
#include "store/memory_tier.h"

namespace psdb::internal {
namespace {

TEST(AdmissionCounterTest, CountsUntilThreshold) {
  AdmissionCounter off(1);
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.Record(1, 1));
  AdmissionCounter c(3);
  EXPECT_FALSE(c.Record(7, 1));
  EXPECT_EQ(c.Count(7), 1u);
  EXPECT_FALSE(c.Record(7, 1));
  EXPECT_TRUE(c.Record(7, 1));
  EXPECT_EQ(c.Count(7), 0u);  // forgotten once admitted
  EXPECT_TRUE(c.Record(8, 5));
  EXPECT_EQ(c.Tracked(), 0u);
}

TEST(AdmissionCounterTest, MemoryIsBounded) {
  AdmissionCounter c(100, /*max_tracked=*/64 * 4);
  for (uint64_t k = 0; k < 10000; ++k) c.Record(k, 1);
  EXPECT_LE(c.Tracked(), 64u * 4);
}

TEST(MemoryTierTest, LayoutAndAllocation) {
  MemoryTier m(8, 0, 4, EvictionPolicy::kClock);
  // 8 floats, header 24 bytes, metadata 24 bytes.
  EXPECT_EQ(m.slot_bytes(), 80u);
  MemoryTier adam(3, 7, 4, EvictionPolicy::kClock);
  EXPECT_EQ(adam.slot_bytes(), 40u + 24 + 24);  // 10 floats rounded to 8
  std::vector<uint32_t> ids;
  m.Allocate(3, &ids);
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(m.capacity(), 3u);
  m.Free(&ids[1], 1);
  ids.clear();
  m.Allocate(2, &ids);
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 3}));
  // Slots are distinct, aligned, non-overlapping memory.
  EXPECT_EQ(m.values(1) + 20, reinterpret_cast<float*>(m.slot(2)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.header(3)) % 8, 0u);
  for (uint32_t k = 0; k < 16; ++k) {
    EXPECT_LT(m.StripeOf(k * 977), 4u);
  }
}

TEST(MemoryTierTest, ClockSparesRecentlyUsedSlots) {
  MemoryTier m(1, 0, 1, EvictionPolicy::kClock);
  std::vector<uint32_t> ids;
  m.Allocate(4, &ids);
  for (uint32_t id : ids) m.SetFlags(id, kOccupied);
  m.Touch(1);
  m.Touch(1);
  m.Touch(2);
  // Counters: slot 1 = 2, slot 2 = 1, others 0. The sweep takes 0, spares
  // (and decrements) 1 and 2, takes 3.
  std::vector<uint32_t> v;
  m.SelectVictims(2, &v);
  EXPECT_EQ(v, (std::vector<uint32_t>{0, 3}));
  v.clear();
  m.SelectVictims(1, &v);
  EXPECT_EQ(v, (std::vector<uint32_t>{0}));  // hand wrapped: 0 again
  v.clear();
  // With 0 and 3 gone: slot 1 (counter 1) is spared once more, slot 2
  // (counter 0) goes.
  m.ClearFlags(0, kOccupied);
  m.ClearFlags(3, kOccupied);
  m.SelectVictims(1, &v);
  EXPECT_EQ(v, (std::vector<uint32_t>{2}));
  // Never returns free slots, and returns nothing when nothing is occupied.
  for (uint32_t id : ids) m.ClearFlags(id, kOccupied);
  v.clear();
  m.SelectVictims(3, &v);
  EXPECT_TRUE(v.empty());
}

TEST(MemoryTierTest, VictimsAreDistinctWhenMoreAreAskedThanOccupied) {
  // Asking for more victims than occupied slots makes the sweep pass every
  // slot several times; each may be listed once only (an evictor writing a
  // dirty slot twice could write its older copy last).
  for (EvictionPolicy policy :
       {EvictionPolicy::kClock, EvictionPolicy::kSampledLru}) {
    MemoryTier m(1, 0, 1, policy);
    std::vector<uint32_t> ids;
    m.Allocate(5, &ids);
    for (uint32_t id : {0u, 2u, 4u}) m.SetFlags(id, kOccupied);
    m.Touch(2);
    std::vector<uint32_t> v;
    m.SelectVictims(32, &v);
    std::sort(v.begin(), v.end());
    if (policy == EvictionPolicy::kClock) {
      EXPECT_EQ(v, (std::vector<uint32_t>{0, 2, 4}));
    } else {
      EXPECT_EQ(std::set<uint32_t>(v.begin(), v.end()).size(), v.size());
      for (uint32_t id : v) EXPECT_EQ(id % 2, 0u);
    }
  }
}

TEST(MemoryTierTest, SampledLruPrefersOldTicks) {
  MemoryTier m(1, 0, 1, EvictionPolicy::kSampledLru);
  std::vector<uint32_t> ids;
  m.Allocate(8, &ids);
  for (uint32_t id : ids) {
    m.SetFlags(id, kOccupied);
    m.AdvanceTick();
    m.Touch(id);  // slot i gets tick i + 2
  }
  std::vector<uint32_t> v;
  m.SelectVictims(3, &v);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(std::set<uint32_t>(v.begin(), v.end()).size(), 3u);
  // The oldest slot is found: 8 samples out of 8 slots nearly always hit it.
  EXPECT_NE(std::find(v.begin(), v.end(), 0u), v.end());
}

}  // namespace
}  // namespace psdb::internal
