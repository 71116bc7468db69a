// Prefetch: the race FBGEMM documents for its pipelined prefetch ("a row
// missing at batch t and inserted by the prefetch for t+1 must end with
// batch t's update applied"), in both pipeline orders, in write-back and
// push-through modes; pins of the prefetched batch.
#include <vector>

#include "psdb/vocab_cache.h"
#include "tests/cache/vocab_cache_testing.h"

namespace psdb::cache {
namespace {

using optim::OptimizerKind;
using testing::ExpectSameRows;
using testing::MakeGrads;
using testing::MakeSpec;
using testing::OpenStore;

constexpr int kDim = 4;
// r = 50 is missing before batch 1 and used by batches 1 and 2.
const std::vector<std::vector<uint64_t>> kBatches = {
    {10, 11, 12}, {50, 13, 14}, {50, 15, 10}, {50, 11}};

void Reference(ParameterClient* c) {
  for (size_t t = 0; t < kBatches.size(); ++t) {
    std::vector<float> rows(kBatches[t].size() * kDim);
    ASSERT_OK(c->Pull("t", kBatches[t], absl::MakeSpan(rows), {}));
    ASSERT_OK(c->Push("t", kBatches[t], MakeGrads(rows, kDim, t), {}));
  }
}

std::vector<TableIds> B(size_t t) { return {{"t", kBatches[t]}}; }

void Step(VocabCache* cache, size_t t,
          const std::vector<std::vector<float>>& rows) {
  const std::vector<float> g = MakeGrads(rows[0], kDim, t);
  ASSERT_OK(cache->Update({absl::MakeConstSpan(g)}));
}

class PrefetchRaceTest : public ::testing::TestWithParam<CacheMode> {};

// Prefetch(t+1) issued before Lookup(t): the prefetch inserts r, batch t
// finds it (a hit, not a second copy), updates it, and batch t+1 sees the
// update.
TEST_P(PrefetchRaceTest,
       RowInsertedByPrefetchForNextBatchKeepsThisBatchsUpdate) {
  const std::vector<TableSpec> specs = {
      MakeSpec("t", kDim, OptimizerKind::kAdam)};
  auto reference = OpenStore(specs);
  auto cached = OpenStore(specs);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(cached, nullptr);
  Reference(reference->client.get());

  VocabCacheOptions options;
  options.mode = GetParam();
  options.capacity_rows = 6;
  ASSERT_OK_AND_ASSIGN(
      auto cache, VocabCache::Create(cached->client.get(), {"t"}, options));
  std::vector<std::vector<float>> rows;
  ASSERT_OK(cache->Lookup(B(0), &rows));
  Step(cache.get(), 0, rows);
  // The loader runs ahead: batch 2's prefetch starts before batch 1 is
  // looked up, so it is the prefetch that brings r in.
  ASSERT_OK(cache->Prefetch(B(2)));
  ASSERT_OK(cache->Lookup(B(1), &rows));
  EXPECT_EQ(cache->Stats()[0].prefetched, 2u);   // r and 15
  EXPECT_EQ(cache->Stats()[0].misses, 3u + 2u);  // batch 0, then 13 and 14
  Step(cache.get(), 1, rows);
  ASSERT_OK(cache->Lookup(B(2), &rows));
  std::vector<float> expect(kBatches[2].size() * kDim);
  {
    // What batch 2 must see: the reference's row after batches 0 and 1.
    auto check = OpenStore(specs);
    ASSERT_NE(check, nullptr);
    for (size_t t = 0; t < 2; ++t) {
      std::vector<float> r(kBatches[t].size() * kDim);
      ASSERT_OK(check->client->Pull("t", kBatches[t], absl::MakeSpan(r), {}));
      ASSERT_OK(
          check->client->Push("t", kBatches[t], MakeGrads(r, kDim, t), {}));
    }
    ASSERT_OK(
        check->client->Pull("t", kBatches[2], absl::MakeSpan(expect), {}));
  }
  EXPECT_EQ(rows[0], expect);
  Step(cache.get(), 2, rows);
  ASSERT_OK(cache->Lookup(B(3), &rows));
  Step(cache.get(), 3, rows);
  ASSERT_OK(cache->Flush());
  ExpectSameRows(reference->client.get(), cached->client.get(), "t",
                 {10, 11, 12, 13, 14, 15, 50},
                 /*frequency=*/GetParam() == CacheMode::kWriteBack);
}

// The usual order: Lookup(t) fetches r, then Prefetch(t+1) runs in the
// background while batch t's update is applied.
TEST_P(PrefetchRaceTest, PrefetchDuringUpdateOfTheBatchThatFetchedTheRow) {
  const std::vector<TableSpec> specs = {
      MakeSpec("t", kDim, OptimizerKind::kLazyAdam)};
  auto reference = OpenStore(specs);
  auto cached = OpenStore(specs);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(cached, nullptr);
  Reference(reference->client.get());

  VocabCacheOptions options;
  options.mode = GetParam();
  options.capacity_rows = 6;  // batches 1 + 2 need 6 slots: evictions happen
  ASSERT_OK_AND_ASSIGN(
      auto cache, VocabCache::Create(cached->client.get(), {"t"}, options));
  std::vector<std::vector<float>> rows;
  for (size_t t = 0; t < kBatches.size(); ++t) {
    ASSERT_OK(cache->Lookup(B(t), &rows));
    if (t + 1 < kBatches.size()) ASSERT_OK(cache->Prefetch(B(t + 1)));
    Step(cache.get(), t, rows);
  }
  ASSERT_OK(cache->Flush());
  ExpectSameRows(reference->client.get(), cached->client.get(), "t",
                 {10, 11, 12, 13, 14, 15, 50},
                 /*frequency=*/GetParam() == CacheMode::kWriteBack);
}

INSTANTIATE_TEST_SUITE_P(Modes, PrefetchRaceTest,
                         ::testing::Values(CacheMode::kWriteBack,
                                           CacheMode::kPushThrough),
                         [](const ::testing::TestParamInfo<CacheMode>& info) {
                           return info.param == CacheMode::kWriteBack
                                      ? "WriteBack"
                                      : "PushThrough";
                         });

TEST(PrefetchTest, PrefetchedRowsArePinnedUntilTheirLookup) {
  auto store = OpenStore({MakeSpec("t", 2, OptimizerKind::kSgd)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.capacity_rows = 4;
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  std::vector<std::vector<float>> rows;
  const std::vector<uint64_t> a = {1, 2}, next = {3, 4}, c = {5, 6};
  ASSERT_OK(cache->Lookup({{"t", a}}, &rows));
  cache->Release();
  ASSERT_OK(cache->Prefetch({{"t", next}}));
  // 5 and 6 must evict 1 and 2, not the prefetched 3 and 4.
  ASSERT_OK(cache->Lookup({{"t", c}}, &rows));
  cache->Release();
  ASSERT_OK(cache->Lookup({{"t", next}}, &rows));
  cache->Release();
  const TableCacheStats s = cache->Stats()[0];
  EXPECT_EQ(s.prefetched, 2u);
  EXPECT_EQ(s.misses, 4u);  // 1 2 5 6
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.hits, 2u);  // 3 and 4
}

TEST(PrefetchTest, ABatchThatNeedsThePrefetchedSlotsReleasesThem) {
  auto store = OpenStore({MakeSpec("t", 2, OptimizerKind::kSgd)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.capacity_rows = 3;
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  std::vector<std::vector<float>> rows;
  const std::vector<uint64_t> next = {1, 2}, other = {3, 4, 5};
  ASSERT_OK(cache->Prefetch({{"t", next}}));
  ASSERT_OK(cache->Lookup({{"t", other}}, &rows));
  cache->Release();
  EXPECT_EQ(cache->CachedRows("t"), 3);
}

}  // namespace
}  // namespace psdb::cache
