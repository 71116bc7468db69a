// VocabCache against a real store (LocalClient on a scratch directory):
// write-back exactness for several optimizers, policies and capacities
// (including the smallest that holds a batch), with and without prefetch
// and shared pools; push-through freshness; stats; errors.
#include "psdb/vocab_cache.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "cache/backend.h"
#include "tests/cache/vocab_cache_testing.h"

namespace psdb::cache {
namespace {

using optim::OptimizerKind;
using testing::ExpectSameRows;
using testing::MakeGrads;
using testing::MakeIds;
using testing::MakeSpec;
using testing::OpenStore;

constexpr int kSteps = 25;
constexpr int kBatch = 40;
constexpr int kVocab = 300;
constexpr int kLookahead = 4;

struct Workload {
  std::vector<TableSpec> specs;
  // ids[t][k]: batch t of table k.
  std::vector<std::vector<std::vector<uint64_t>>> ids;

  std::vector<TableIds> Batch(int t) const {
    std::vector<TableIds> b;
    for (size_t k = 0; k < specs.size(); ++k)
      b.push_back({specs[k].name, ids[t][k]});
    return b;
  }
  std::vector<uint64_t> AllKeys(size_t k) const {
    std::set<uint64_t> s;
    for (const auto& batch : ids) s.insert(batch[k].begin(), batch[k].end());
    return {s.begin(), s.end()};
  }
  // Largest number of unique ids one batch puts in one pool.
  int MaxUnique(bool shared) const {
    int best = 0;
    for (const auto& batch : ids) {
      int total = 0;
      for (const auto& t : batch) {
        const int u = static_cast<int>(
            absl::flat_hash_set<uint64_t>(t.begin(), t.end()).size());
        best = std::max(best, u);
        total += u;
      }
      if (shared) best = std::max(best, total);
    }
    return best;
  }
};

Workload MakeWorkload(OptimizerKind kind, int dim2) {
  Workload w;
  w.specs = {MakeSpec("user", 4, kind), MakeSpec("item", dim2, kind)};
  for (int t = 0; t < kSteps; ++t) {
    w.ids.push_back(
        {MakeIds(t, kBatch, kVocab, 0), MakeIds(t, kBatch, kVocab, 1)});
  }
  return w;
}

// Pull + Push per table per step, no cache.
void RunReference(ParameterClient* client, const Workload& w) {
  for (int t = 0; t < kSteps; ++t) {
    for (size_t k = 0; k < w.specs.size(); ++k) {
      const auto& ids = w.ids[t][k];
      std::vector<float> rows(ids.size() * w.specs[k].dim);
      ASSERT_OK(client->Pull(w.specs[k].name, ids, absl::MakeSpan(rows), {}));
      const std::vector<float> g = MakeGrads(rows, w.specs[k].dim, t);
      ASSERT_OK(client->Push(w.specs[k].name, ids, g, {}));
    }
  }
}

// The same run through a cache. Also checks that every row it serves is the
// row the reference served at the same step.
void RunCached(VocabCache* cache, const Workload& w, bool prefetch,
               bool lookahead) {
  int announced = 0;
  for (int t = 0; t < kSteps; ++t) {
    if (lookahead) {
      for (; announced < std::min(kSteps, t + 1 + kLookahead); ++announced) {
        cache->Announce(w.Batch(announced));
      }
    }
    std::vector<std::vector<float>> rows;
    ASSERT_OK(cache->Lookup(w.Batch(t), &rows));
    if (prefetch && t + 1 < kSteps) ASSERT_OK(cache->Prefetch(w.Batch(t + 1)));
    std::vector<std::vector<float>> grads;
    std::vector<absl::Span<const float>> spans;
    for (size_t k = 0; k < w.specs.size(); ++k) {
      grads.push_back(MakeGrads(rows[k], w.specs[k].dim, t));
    }
    for (const auto& g : grads) spans.push_back(g);
    ASSERT_OK(cache->Update(spans));
  }
  ASSERT_OK(cache->Flush());
}

struct ExactCase {
  std::string name;
  OptimizerKind kind;
  PolicyKind policy;
  int capacity;  // 0 = the smallest that holds a batch
  bool prefetch;
  bool shared;
  BackendKind backend = BackendKind::kCpu;
};

class WriteBackExactTest : public ::testing::TestWithParam<ExactCase> {};

TEST_P(WriteBackExactTest, StoreEndsBitIdenticalToARunWithoutCache) {
  const ExactCase& c = GetParam();
  if (c.backend == BackendKind::kCuda) {
    absl::StatusOr<std::unique_ptr<CacheBackend>> cuda = MakeBackend(c.backend);
    if (!cuda.ok()) GTEST_SKIP() << "CUDA backend: " << cuda.status();
  }
  const Workload w = MakeWorkload(c.kind, c.shared ? 4 : 3);
  auto reference = OpenStore(w.specs);
  auto cached = OpenStore(w.specs);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(cached, nullptr);
  RunReference(reference->client.get(), w);

  VocabCacheOptions options;
  options.policy = c.policy;
  options.backend = c.backend;
  options.shared_capacity = c.shared;
  options.capacity_rows = c.capacity > 0 ? c.capacity : w.MaxUnique(c.shared);
  ASSERT_OK_AND_ASSIGN(
      auto cache,
      VocabCache::Create(cached->client.get(), {"user", "item"}, options));
  RunCached(cache.get(), w, c.prefetch, c.policy == PolicyKind::kLookahead);
  for (size_t k = 0; k < w.specs.size(); ++k) {
    ExpectSameRows(reference->client.get(), cached->client.get(),
                   w.specs[k].name, w.AllKeys(k));
  }
  uint64_t evictions = 0;
  for (const TableCacheStats& s : cache->Stats()) {
    EXPECT_EQ(s.lookups, static_cast<uint64_t>(kSteps * kBatch));
    EXPECT_EQ(s.hits + s.misses, s.lookups);
    evictions += s.evictions;
  }
  if (c.capacity == 0) {
    EXPECT_GT(evictions, 0u);  // the test evicts
  }
}

std::vector<ExactCase> ExactCases() {
  return {
      ExactCase{"AdamLruMin", OptimizerKind::kAdam, PolicyKind::kLru, 0, false,
                false},
      ExactCase{"AdamLruMinPrefetch", OptimizerKind::kAdam, PolicyKind::kLru, 0,
                true, false},
      ExactCase{"LazyAdamLfu45Prefetch", OptimizerKind::kLazyAdam,
                PolicyKind::kLfu, 45, true, false},
      ExactCase{"AdagradLookaheadMinPrefetch", OptimizerKind::kAdagrad,
                PolicyKind::kLookahead, 0, true, false},
      ExactCase{"FtrlLruLargePrefetch", OptimizerKind::kFtrl, PolicyKind::kLru,
                1000, true, false},
      ExactCase{"MomentumLookahead60", OptimizerKind::kMomentum,
                PolicyKind::kLookahead, 60, false, false},
      ExactCase{"RowwiseAdagradLfuMinShared", OptimizerKind::kRowwiseAdagrad,
                PolicyKind::kLfu, 0, false, true},
      ExactCase{"SgdLruMinSharedPrefetch", OptimizerKind::kSgd,
                PolicyKind::kLru, 0, true, true}};
}

// The same cases with the pools in device memory (skipped, saying why,
// without a CUDA backend or device).
std::vector<ExactCase> CudaExactCases() {
  std::vector<ExactCase> cases = ExactCases();
  for (ExactCase& c : cases) {
    c.name += "Cuda";
    c.backend = BackendKind::kCuda;
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<ExactCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, WriteBackExactTest,
                         ::testing::ValuesIn(ExactCases()), CaseName);
INSTANTIATE_TEST_SUITE_P(CudaCases, WriteBackExactTest,
                         ::testing::ValuesIn(CudaExactCases()), CaseName);

TEST(VocabCacheTest, StatsCountLookupsHitsMissesEvictionsWriteBacks) {
  auto store = OpenStore({MakeSpec("t", 2, OptimizerKind::kSgd)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.capacity_rows = 2;
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  const std::vector<uint64_t> b0 = {1, 1, 2}, b1 = {2, 3};
  std::vector<std::vector<float>> rows;
  ASSERT_OK(cache->Lookup({{"t", b0}}, &rows));
  EXPECT_EQ(rows[0].size(), 6u);
  cache->Release();
  ASSERT_OK(cache->Lookup({{"t", b1}}, &rows));  // 3 evicts 1 (2 is pinned)
  cache->Release();
  const TableCacheStats s = cache->Stats()[0];
  EXPECT_EQ(s.table, "t");
  EXPECT_EQ(s.lookups, 5u);
  EXPECT_EQ(s.unique_ids, 4u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 2u);  // the second 1 of b0, and 2 in b1
  EXPECT_DOUBLE_EQ(s.hit_rate(), 0.4);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.write_backs, 1u);
  // SGD rows have no state: 3 fetched + 1 written, 2 floats each.
  EXPECT_EQ(s.bytes_moved, 4u * 2 * 4);
  EXPECT_EQ(cache->CachedRows("t"), 2);
  ASSERT_OK(cache->Flush());
  EXPECT_EQ(cache->Stats()[0].write_backs, 3u);
}

TEST(VocabCacheTest, ServesTheStoreRowsAndDuplicatesPerPosition) {
  auto store = OpenStore({MakeSpec("t", 3, OptimizerKind::kAdam)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.capacity_rows = 8;
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  const std::vector<uint64_t> ids = {5, 9, 5, 7};
  std::vector<std::vector<float>> rows;
  ASSERT_OK(cache->Lookup({{"t", ids}}, &rows));
  std::vector<float> expect(12);
  ASSERT_OK(store->client->Pull("t", ids, absl::MakeSpan(expect), {}));
  EXPECT_EQ(rows[0], expect);
}

TEST(VocabCacheTest, BatchLargerThanCapacityIsAClearErrorAndChangesNothing) {
  auto store = OpenStore({MakeSpec("t", 2, OptimizerKind::kSgd)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.capacity_rows = 3;
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  const std::vector<uint64_t> big = {1, 2, 3, 4, 1};
  std::vector<std::vector<float>> rows;
  const absl::Status s = cache->Lookup({{"t", big}}, &rows);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("4 unique ids"));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("holds 3 rows"));
  EXPECT_EQ(cache->CachedRows("t"), 0);
  // Still usable, with every slot available.
  const std::vector<uint64_t> ok = {1, 2, 3};
  ASSERT_OK(cache->Lookup({{"t", ok}}, &rows));
  std::vector<float> g(6, 0.5f);
  ASSERT_OK(cache->Update({absl::MakeConstSpan(g)}));
}

TEST(VocabCacheTest, WriteBackRefusesAdmissionThresholds) {
  TableSpec spec = MakeSpec("t", 2, OptimizerKind::kSgd);
  spec.admission_threshold = 3;
  auto store = OpenStore({spec});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.capacity_rows = 4;
  auto cache = VocabCache::Create(store->client.get(), {"t"}, options);
  EXPECT_THAT(cache, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(cache.status().message()),
              ::testing::HasSubstr("admission threshold 3"));
  options.mode = CacheMode::kPushThrough;
  EXPECT_OK(VocabCache::Create(store->client.get(), {"t"}, options));
}

TEST(VocabCacheTest, RejectsBadInput) {
  auto store = OpenStore({MakeSpec("t", 2, OptimizerKind::kSgd)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  EXPECT_THAT(VocabCache::Create(store->client.get(), {"t"}, options),
              StatusIs(absl::StatusCode::kInvalidArgument));  // capacity 0
  options.capacity_rows = 4;
  EXPECT_THAT(VocabCache::Create(store->client.get(), {"nope"}, options),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  const std::vector<uint64_t> ids = {1, 2};
  std::vector<std::vector<float>> rows;
  EXPECT_THAT(cache->Lookup({{"x", ids}}, &rows),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(cache->Lookup({{"t", ids}, {"t", ids}}, &rows),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<float> g(4, 1.0f);
  EXPECT_THAT(cache->Update({absl::MakeConstSpan(g)}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(cache->Lookup({{"t", ids}}, &rows));
  std::vector<float> short_g(3, 1.0f);
  EXPECT_THAT(cache->Update({absl::MakeConstSpan(short_g)}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  g[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(cache->Update({absl::MakeConstSpan(g)}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PushThroughTest, StalenessZeroServesExactlyWhatTheStoreHolds) {
  const Workload w = MakeWorkload(OptimizerKind::kAdam, 3);
  auto reference = OpenStore(w.specs);
  auto cached = OpenStore(w.specs);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(cached, nullptr);
  RunReference(reference->client.get(), w);
  VocabCacheOptions options;
  options.mode = CacheMode::kPushThrough;
  options.capacity_rows = w.MaxUnique(false);
  ASSERT_OK_AND_ASSIGN(
      auto cache,
      VocabCache::Create(cached->client.get(), {"user", "item"}, options));
  RunCached(cache.get(), w, /*prefetch=*/true, /*lookahead=*/false);
  for (size_t k = 0; k < w.specs.size(); ++k) {
    ExpectSameRows(reference->client.get(), cached->client.get(),
                   w.specs[k].name, w.AllKeys(k), /*frequency=*/false);
  }
  // At staleness 0 every resident row is stale after a push, so each
  // lookup of the workload misses or refreshes its rows; only duplicates
  // within a batch hit.
  for (const TableCacheStats& s : cache->Stats()) {
    EXPECT_GT(s.refreshes, 0u) << s.table;
    EXPECT_EQ(s.misses + s.refreshes, s.unique_ids) << s.table;
    EXPECT_EQ(s.hits + s.misses + s.refreshes, s.lookups) << s.table;
  }
}

// Push-through pushes carry the caller's step (synchronous servers
// aggregate a round by it); step 0 is the table's step + 1.
TEST(PushThroughTest, PushesCarryTheCallersStep) {
  auto store = OpenStore({MakeSpec("t", 2, OptimizerKind::kSgd)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.mode = CacheMode::kPushThrough;
  options.capacity_rows = 4;
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  const std::vector<uint64_t> ids = {7};
  const std::vector<float> g = {1.0f, -1.0f};
  std::vector<std::vector<float>> rows;
  RowBatch pulled;
  ASSERT_OK(cache->Lookup({{"t", ids}}, &rows));
  ASSERT_OK(cache->Update({absl::MakeConstSpan(g)}, 41));
  ASSERT_OK(store->client->PullRows("t", ids, &pulled));
  EXPECT_EQ(pulled.headers[0].last_update_step, 41);
  ASSERT_OK(cache->Lookup({{"t", ids}}, &rows));
  ASSERT_OK(cache->Update({absl::MakeConstSpan(g)}));
  ASSERT_OK(store->client->PullRows("t", ids, &pulled));
  EXPECT_EQ(pulled.headers[0].last_update_step, 42);
  EXPECT_EQ(pulled.headers[0].update_count, 2u);
}

TEST(PushThroughTest, RefreshesRowsOlderThanMaxStaleness) {
  auto store = OpenStore({MakeSpec("t", 2, OptimizerKind::kSgd)});
  ASSERT_NE(store, nullptr);
  VocabCacheOptions options;
  options.mode = CacheMode::kPushThrough;
  options.capacity_rows = 4;
  options.max_staleness = 2;
  ASSERT_OK_AND_ASSIGN(auto cache,
                       VocabCache::Create(store->client.get(), {"t"}, options));
  const std::vector<uint64_t> ids = {7};
  std::vector<float> g = {1.0f, -1.0f};
  std::vector<std::vector<float>> first, rows;
  for (int t = 0; t < 10; ++t) {
    ASSERT_OK(cache->Lookup({{"t", ids}}, &rows));
    if (t == 0) first = rows;
    // Fetched at push 0, 3, 6, 9: the value changes only then.
    if (t == 1 || t == 2) {
      EXPECT_EQ(rows, first) << t;
    }
    if (t == 3) {
      EXPECT_NE(rows, first);
    }
    ASSERT_OK(cache->Update({absl::MakeConstSpan(g)}));
  }
  // Ten lookups: the fetch at push 0 misses, the three re-fetches refresh,
  // the other six hit.
  EXPECT_EQ(cache->Stats()[0].lookups, 10u);
  EXPECT_EQ(cache->Stats()[0].misses, 1u);
  EXPECT_EQ(cache->Stats()[0].refreshes, 3u);
  EXPECT_EQ(cache->Stats()[0].hits, 6u);
  std::vector<float> stored(2);
  ASSERT_OK(store->client->Pull("t", ids, absl::MakeSpan(stored), {}));
  // SGD, lr 0.05, wd 0.001: ten pushes reached the store.
  EXPECT_NE(stored, rows[0]);
}

}  // namespace
}  // namespace psdb::cache
