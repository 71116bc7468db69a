#include "util/key_dedup.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace psdb {
namespace {

std::vector<uint64_t> Unique(const KeyDedup& d) {
  return std::vector<uint64_t>(d.unique().begin(), d.unique().end());
}

TEST(KeyDedupTest, IndicesInFirstSeenOrder) {
  KeyDedup d;
  d.Reset(5);
  bool inserted;
  EXPECT_EQ(d.Insert(9, &inserted), 0u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(d.Insert(3, &inserted), 1u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(d.Insert(9, &inserted), 0u);
  EXPECT_FALSE(inserted);
  EXPECT_EQ(d.Insert(0, &inserted), 2u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(d.num_unique(), 3u);
  EXPECT_EQ(Unique(d), (std::vector<uint64_t>{9, 3, 0}));
}

TEST(KeyDedupTest, InverseOfABatch) {
  const std::vector<uint64_t> keys = {42, 7, 42, 42, 0, 7, 1ULL << 63};
  KeyDedup d;
  d.Reset(keys.size());
  std::vector<uint32_t> inverse;
  std::vector<bool> first;
  for (uint64_t key : keys) {
    bool inserted;
    inverse.push_back(d.Insert(key, &inserted));
    first.push_back(inserted);
  }
  EXPECT_EQ(inverse, (std::vector<uint32_t>{0, 1, 0, 0, 2, 1, 3}));
  EXPECT_EQ(first,
            (std::vector<bool>{true, true, false, false, true, false, true}));
  EXPECT_EQ(Unique(d), (std::vector<uint64_t>{42, 7, 0, 1ULL << 63}));
}

TEST(KeyDedupTest, ResetForgetsThePreviousBatch) {
  KeyDedup d;
  d.Reset(4);
  bool inserted;
  d.Insert(1, &inserted);
  d.Insert(2, &inserted);
  d.Reset(4);
  EXPECT_EQ(d.num_unique(), 0u);
  EXPECT_TRUE(d.unique().empty());
  EXPECT_EQ(d.Insert(2, &inserted), 0u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(d.Insert(1, &inserted), 1u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(Unique(d), (std::vector<uint64_t>{2, 1}));
}

TEST(KeyDedupTest, SmallBatchAfterALargeOne) {
  KeyDedup d;
  bool inserted;
  d.Reset(10000);
  for (uint64_t k = 0; k < 10000; ++k) d.Insert(k, &inserted);
  // A smaller batch probes a smaller part of the table; the large batch's
  // slots beyond it must not leak into a later large batch either.
  d.Reset(3);
  EXPECT_EQ(d.Insert(5000, &inserted), 0u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(d.Insert(5000, &inserted), 0u);
  EXPECT_FALSE(inserted);
  d.Reset(10000);
  for (uint64_t k = 0; k < 10000; ++k) {
    EXPECT_EQ(d.Insert(10000 - k, &inserted), k);
    ASSERT_TRUE(inserted) << k;
  }
}

TEST(KeyDedupTest, ManyKeysCollidingInTheLowBits) {
  KeyDedup d;
  d.Reset(10000);
  bool inserted;
  for (uint64_t k = 0; k < 10000; ++k) {
    ASSERT_EQ(d.Insert(k << 20, &inserted), k);
    ASSERT_TRUE(inserted);
  }
  for (uint64_t k = 0; k < 10000; ++k) {
    ASSERT_EQ(d.Insert(k << 20, &inserted), k);
    ASSERT_FALSE(inserted);
  }
  EXPECT_EQ(d.num_unique(), 10000u);
  EXPECT_EQ(d.unique()[9999], 9999ULL << 20);
}

TEST(KeyDedupTest, ReuseAcrossManyBatches) {
  KeyDedup d;
  bool inserted;
  for (uint64_t batch = 0; batch < 1000; ++batch) {
    d.Reset(8);
    // Each batch: batch, batch + 1, batch (a duplicate), so the keys of
    // consecutive batches overlap and a stale slot would be found.
    ASSERT_EQ(d.Insert(batch, &inserted), 0u);
    ASSERT_TRUE(inserted) << batch;
    ASSERT_EQ(d.Insert(batch + 1, &inserted), 1u);
    ASSERT_TRUE(inserted) << batch;
    ASSERT_EQ(d.Insert(batch, &inserted), 0u);
    ASSERT_FALSE(inserted) << batch;
  }
}

TEST(KeyDedupTest, GenerationWrapAroundForgetsStaleSlots) {
  KeyDedup d;
  bool inserted;
  d.Reset(4);  // generation 1
  d.Insert(7, &inserted);
  d.SetGenerationForTesting(std::numeric_limits<uint32_t>::max() - 1);
  d.Reset(4);  // generation 2^32 - 1
  EXPECT_EQ(d.Insert(8, &inserted), 0u);
  EXPECT_TRUE(inserted);
  // Wraps to generation 1 again: key 7's slot still carries stamp 1 unless
  // the wrap cleared it.
  d.Reset(4);
  EXPECT_EQ(d.Insert(7, &inserted), 0u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(d.Insert(8, &inserted), 1u);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(Unique(d), (std::vector<uint64_t>{7, 8}));
}

TEST(KeyDedupTest, EmptyBatch) {
  KeyDedup d;
  d.Reset(0);
  EXPECT_EQ(d.num_unique(), 0u);
  EXPECT_TRUE(d.unique().empty());
}

}  // namespace
}  // namespace psdb
