// Store: the memory/disk tiers, checkpoints, restore, corruption and
// concurrency.
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "rocksdb/db.h"
#include "store/row_codec.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

namespace fs = std::filesystem;
using optim::OptimizerKind;
using ::psdb::testing::MakeSpec;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::SmallOptions;
using ::testing::HasSubstr;

// dim 8, SGD: 32 B values + 24 B header + 24 B slot metadata.
constexpr uint64_t kSlotBytes = 80;

TableStats StatsOf(const Store& s, const std::string& name) {
  for (const TableStats& t : s.Stats().tables) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no stats for " << name;
  return TableStats{};
}

std::vector<float> Grad(uint64_t key, int round, int dim) {
  std::vector<float> g(dim);
  for (int j = 0; j < dim; ++j) {
    g[j] = static_cast<float>((key % 7 + 1) * (round + 1) + j);
  }
  return g;
}

class TieringTest : public ::testing::TestWithParam<EvictionPolicy> {};

TEST_P(TieringTest, TableEightTimesTheBudgetKeepsEveryValue) {
  ScratchDir dir;
  constexpr int kDim = 8;
  constexpr uint64_t kKeys = 800;
  constexpr uint64_t kBudgetRows = 100;
  constexpr uint64_t kBatch = 50;
  StoreOptions opts = SmallOptions(kBudgetRows * kSlotBytes);
  opts.eviction = GetParam();
  std::vector<float> expected(kKeys * kDim, 0.0f);
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, dir.path()));
    ASSERT_OK(store->CreateTable(MakeSpec("big", kDim)));
    for (int round = 0; round < 3; ++round) {
      for (uint64_t b = 0; b < kKeys; b += kBatch) {
        std::vector<uint64_t> keys;
        std::vector<float> grads;
        for (uint64_t k = b; k < b + kBatch; ++k) {
          // Keys in a scattered order so batches mix hot and cold rows.
          const uint64_t key = (k * 337) % kKeys;
          keys.push_back(key);
          std::vector<float> g = Grad(key, round, kDim);
          grads.insert(grads.end(), g.begin(), g.end());
          for (int j = 0; j < kDim; ++j) expected[key * kDim + j] -= g[j];
        }
        ASSERT_OK(store->Push("big", keys, grads));
        // The memory tier's rows (memory_used_bytes adds RocksDB's cache).
        ASSERT_LE(store->Stats().tables[0].memory_bytes,
                  (kBudgetRows + kBatch) * kSlotBytes);
      }
    }
    std::vector<uint64_t> all(kKeys);
    for (uint64_t k = 0; k < kKeys; ++k) all[k] = k;
    std::vector<float> got(kKeys * kDim);
    for (uint64_t b = 0; b < kKeys; b += kBatch) {
      ASSERT_OK(
          store->Pull("big", absl::MakeSpan(all).subspan(b, kBatch),
                      absl::MakeSpan(got).subspan(b * kDim, kBatch * kDim)));
    }
    EXPECT_EQ(got, expected);
    const TableStats st = StatsOf(*store, "big");
    EXPECT_EQ(st.created, kKeys);
    EXPECT_GT(st.evictions, kKeys);
    EXPECT_GT(st.dirty_writes, kKeys);
    EXPECT_GT(st.misses, kKeys);
    EXPECT_LE(st.memory_rows, kBudgetRows + kBatch);
  }
  // Closed and reopened: still exact.
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, dir.path()));
  std::vector<uint64_t> some = {0, 1, 399, 799};
  std::vector<float> got(some.size() * kDim);
  ASSERT_OK(store->Pull("big", some, absl::MakeSpan(got)));
  for (size_t i = 0; i < some.size(); ++i) {
    for (int j = 0; j < kDim; ++j) {
      EXPECT_EQ(got[i * kDim + j], expected[some[i] * kDim + j]);
    }
  }
  EXPECT_EQ(StatsOf(*store, "big").created, 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, TieringTest,
                         ::testing::Values(EvictionPolicy::kClock,
                                           EvictionPolicy::kSampledLru),
                         [](const auto& info) {
                           return info.param == EvictionPolicy::kClock
                                      ? std::string("Clock")
                                      : std::string("SampledLru");
                         });

TEST(TieringTest, MemoryHitsDoNotTouchRocksDb) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  ASSERT_OK(store->CreateTable(MakeSpec("t", 8)));
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> out(24);
  ASSERT_OK(store->Pull("t", keys, absl::MakeSpan(out)));
  const TableStats a = StatsOf(*store, "t");
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(store->Pull("t", keys, absl::MakeSpan(out)));
    ASSERT_OK(store->Push("t", keys, std::vector<float>(24, 1)));
  }
  const TableStats b = StatsOf(*store, "t");
  EXPECT_EQ(b.misses, a.misses);
  EXPECT_EQ(b.hits, a.hits + 60);
  EXPECT_EQ(b.evictions, 0u);
  EXPECT_EQ(b.disk_rows, 0u);  // nothing written before a checkpoint
}

TEST(TieringTest, BackgroundEvictorKeepsTwoReservesFree) {
  // Budget 6400 rows: the reserve is budget / 64 = 100 rows. One push of
  // 6350 new rows fits the budget (no request-path eviction) but leaves
  // fewer than 100 rows free, which wakes the evictor; it evicts (writing
  // the dirty rows) until 200 are free: exactly 150 rows.
  constexpr uint64_t kBudgetRows = 6400;
  constexpr uint64_t kKeys = 6350;
  constexpr int kDim = 8;
  std::vector<uint64_t> keys(kKeys);
  std::vector<float> grads(kKeys * kDim);
  for (uint64_t k = 0; k < kKeys; ++k) {
    keys[k] = k;
    for (int j = 0; j < kDim; ++j) grads[k * kDim + j] = static_cast<float>(j);
  }
  for (const bool background : {true, false}) {
    SCOPED_TRACE(background ? "background eviction" : "request path only");
    ScratchDir dir;
    StoreOptions opts = SmallOptions(kBudgetRows * kSlotBytes);
    opts.background_eviction = background;
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, dir.path()));
    ASSERT_OK(store->CreateTable(MakeSpec("t", kDim)));
    ASSERT_OK(store->Push("t", keys, grads));
    if (background) {
      ASSERT_TRUE(::psdb::testing::WaitFor([&] {
        return StatsOf(*store, "t").memory_rows == kKeys - 150;
      })) << StatsOf(*store, "t").memory_rows;
    }
    const TableStats st = StatsOf(*store, "t");
    EXPECT_EQ(st.memory_rows, background ? kKeys - 150 : kKeys);
    EXPECT_EQ(st.evictions, background ? 150u : 0u);
    EXPECT_EQ(st.background_evictions, st.evictions);
    EXPECT_EQ(st.dirty_writes, st.evictions);
    // Every row, evicted or not, holds its update.
    std::vector<float> got(kKeys * kDim);
    ASSERT_OK(store->Pull("t", keys, absl::MakeSpan(got)));
    for (uint64_t i = 0; i < kKeys * kDim; ++i) {
      ASSERT_EQ(got[i], -static_cast<float>(i % kDim)) << "key " << i / kDim;
    }
  }
}

// ---------------------------------------------------------------------------
// Checkpoints

class CheckpointTest : public ::testing::Test {
 protected:
  static constexpr int kDim = 4;
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, Store::Open(SmallOptions(), dir_.path()));
    TableSpec spec = MakeSpec("ada", kDim, OptimizerKind::kAdagrad, 0.1f,
                              InitKind::kUniform);
    ASSERT_OK(store_->CreateTable(spec));
    ASSERT_OK(store_->CreateTable(MakeSpec("sgd", 2)));
    for (uint64_t k = 0; k < 1000; ++k) keys_.push_back(k * 1000003);
    ASSERT_OK(store_->Push("ada", keys_,
                           std::vector<float>(keys_.size() * kDim, 0.5f)));
  }
  RowBatch Rows(Store& s) {
    RowBatch r;
    EXPECT_OK(s.PullRows("ada", keys_, &r));
    return r;
  }
  static void ExpectSameRows(const RowBatch& a, const RowBatch& b) {
    EXPECT_EQ(a.values, b.values);
    EXPECT_EQ(a.state, b.state);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a.headers[i].update_count, b.headers[i].update_count);
      EXPECT_EQ(a.headers[i].last_update_step, b.headers[i].last_update_step);
    }
  }
  ScratchDir dir_, root_;
  std::unique_ptr<Store> store_;
  std::vector<uint64_t> keys_;
};

TEST_F(CheckpointTest, IncrementalWritesOnlyDirtyRows) {
  ASSERT_OK_AND_ASSIGN(CheckpointInfo c1, store_->Checkpoint(root_.path()));
  EXPECT_EQ(c1.rows_flushed, 1000u);
  EXPECT_EQ(c1.step, 1);
  std::vector<uint64_t> ten(keys_.begin(), keys_.begin() + 10);
  ASSERT_OK(store_->Push("ada", ten, std::vector<float>(10 * kDim, 1.0f)));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo c2, store_->Checkpoint(root_.path()));
  EXPECT_EQ(c2.rows_flushed, 10u);
  EXPECT_EQ(c2.step, 2);
  // Pulls make nothing dirty.
  std::vector<float> out(ten.size() * kDim);
  ASSERT_OK(store_->Pull("ada", ten, absl::MakeSpan(out)));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo c3, store_->Checkpoint(root_.path()));
  EXPECT_EQ(c3.rows_flushed, 0u);
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(c3.path));
  EXPECT_EQ(m.format_version(), kManifestFormatVersion);
  EXPECT_EQ(m.checkpoint_id(), fs::path(c3.path).filename().string());
  ASSERT_EQ(m.tables_size(), 2);
  EXPECT_EQ(m.tables(0).spec().name(), "ada");
  EXPECT_EQ(m.tables(0).rows(), 1000u);
  EXPECT_EQ(m.tables(0).step(), 2);
  EXPECT_EQ(m.tables(1).rows(), 0u);
  ASSERT_EQ(m.shards_size(), 1);
  EXPECT_TRUE(fs::exists(fs::path(c3.path) / m.shards(0).dir() / "CURRENT"));
  const StoreStats st = store_->Stats();
  EXPECT_EQ(st.checkpoints, 3u);
  EXPECT_GT(st.total_checkpoint_duration, absl::ZeroDuration());
}

TEST_F(CheckpointTest, RestoreReproducesTheCheckpoint) {
  ASSERT_OK_AND_ASSIGN(CheckpointInfo c1, store_->Checkpoint(root_.path()));
  const RowBatch at_c1 = Rows(*store_);
  ASSERT_OK(store_->Push("ada", keys_,
                         std::vector<float>(keys_.size() * kDim, -0.25f)));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo c2, store_->Checkpoint(root_.path()));
  const RowBatch at_c2 = Rows(*store_);
  // Changes after the last checkpoint are not in it.
  ASSERT_OK(store_->Push("ada", keys_,
                         std::vector<float>(keys_.size() * kDim, 3.0f)));

  ScratchDir r1, r2;
  StoreOptions from_root = SmallOptions(4096);  // small: warms lazily
  from_root.restore_from = root_.path();
  ASSERT_OK_AND_ASSIGN(auto latest, Store::Open(from_root, r1.path()));
  EXPECT_EQ(latest->ListTables().size(), 2u);
  EXPECT_EQ(StatsOf(*latest, "ada").step, 2);
  EXPECT_EQ(StatsOf(*latest, "ada").memory_rows, 0u);
  ExpectSameRows(Rows(*latest), at_c2);
  EXPECT_EQ(StatsOf(*latest, "ada").created, 0u);

  StoreOptions from_c1 = SmallOptions();
  from_c1.restore_from = c1.path;
  ASSERT_OK_AND_ASSIGN(auto first, Store::Open(from_c1, r2.path()));
  ExpectSameRows(Rows(*first), at_c1);
  // The restored store checkpoints on its own.
  ScratchDir root2;
  ASSERT_OK_AND_ASSIGN(CheckpointInfo c3, first->Checkpoint(root2.path()));
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(c3.path));
  EXPECT_EQ(m.tables(0).rows(), 1000u);
}

TEST_F(CheckpointTest, KeepLastDeletesOlderCheckpoints) {
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(store_->Push("sgd", {1}, {1, 1}));
    ASSERT_OK_AND_ASSIGN(CheckpointInfo c,
                         store_->Checkpoint(root_.path(), {.keep_last = 2}));
    paths.push_back(c.path);
  }
  ASSERT_OK_AND_ASSIGN(auto all, ListCheckpoints(root_.path()));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].path, paths[3]);
  EXPECT_EQ(all[1].path, paths[2]);
  EXPECT_FALSE(fs::exists(paths[0]));
  EXPECT_FALSE(fs::exists(paths[1]));
  // keep_last = 0 keeps everything.
  ASSERT_OK(store_->Checkpoint(root_.path(), {.keep_last = 0}));
  EXPECT_EQ(ListCheckpoints(root_.path())->size(), 3u);
  // An incomplete checkpoint is ignored, then removed by the next one.
  fs::create_directories(fs::path(root_.path()) / CheckpointId(99, 99));
  EXPECT_EQ(ListCheckpoints(root_.path())->size(), 3u);
  ASSERT_OK_AND_ASSIGN(CheckpointInfo last,
                       store_->Checkpoint(root_.path(), {.keep_last = 0}));
  EXPECT_FALSE(fs::exists(fs::path(root_.path()) / CheckpointId(99, 99)));
  EXPECT_NE(last.path.find("-000100"), std::string::npos) << last.path;
}

TEST(FormatVersionTest, NewerCheckpointOrStoreIsRefused) {
  ScratchDir root, d1, d2;
  const std::string ck = absl::StrCat(root.path(), "/", CheckpointId(5, 1));
  fs::create_directories(ck + "/shard-0");
  std::ofstream(ck + "/MANIFEST.json") << R"({"formatVersion": 7})";
  StoreOptions o = SmallOptions();
  o.restore_from = root.path();
  absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(o, d1.path());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("7"));
  EXPECT_FALSE(fs::exists(d1.Sub("db")));

  { ASSERT_OK(Store::Open(SmallOptions(), d2.path())); }
  {
    rocksdb::DB* raw;
    rocksdb::Options ro;
    ASSERT_TRUE(rocksdb::DB::Open(ro, d2.Sub("db"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put({}, "psdb/format_version", "3").ok());
  }
  s = Store::Open(SmallOptions(), d2.path());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("version 3"));
}

TEST(CorruptionTest, CorruptRowIsDataLossNamingTableAndKey) {
  ScratchDir dir;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
    ASSERT_OK(store->CreateTable(MakeSpec("emb", 2)));
    ASSERT_OK(store->Push("emb", {1, 42}, {1, 1, 2, 2}));
  }
  {
    // Flip one byte of key 42's row through RocksDB itself.
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {"emb", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw;
    ASSERT_TRUE(rocksdb::DB::Open({}, dir.Sub("db"), cfs, &handles, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string v;
    ASSERT_TRUE(db->Get({}, handles[1], EncodeKey(42), &v).ok());
    v[kRowHeaderBytes + 1] ^= 0x10;
    ASSERT_TRUE(db->Put({}, handles[1], EncodeKey(42), v).ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  std::vector<float> out(4);
  absl::Status s = store->Pull("emb", {42}, absl::MakeSpan(out).subspan(0, 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("table emb key 42"));
  // A push that includes the corrupt key applies nothing.
  s = store->Push("emb", {1, 42}, {5, 5, 5, 5});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  ASSERT_OK(store->Pull("emb", {1}, absl::MakeSpan(out).subspan(0, 2)));
  EXPECT_EQ(out[0], -1.0f);
  RowBatch rows;
  EXPECT_THAT(store->PullRows("emb", {42}, &rows),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(store->Pull("emb", {42}, absl::MakeSpan(out).subspan(0, 2),
                          PullOptions{.serving = true}),
              StatusIs(absl::StatusCode::kDataLoss));
  // PutRows replaces a corrupt row.
  rows.Resize(2, 0, 1);
  rows.values = {7, 8};
  ASSERT_OK(store->PutRows("emb", {42}, rows));
  ASSERT_OK(store->Pull("emb", {42}, absl::MakeSpan(out).subspan(0, 2)));
  EXPECT_EQ(out[0], 7.0f);
}

// ---------------------------------------------------------------------------
// Concurrency

void RunConcurrentPushes(uint64_t budget_bytes, bool with_checkpoints) {
  ScratchDir dir, root;
  ASSERT_OK_AND_ASSIGN(auto store,
                       Store::Open(SmallOptions(budget_bytes), dir.path()));
  constexpr int kDim = 8;
  constexpr int kThreads = 4;
  constexpr int kIters = 150;
  constexpr int kBatch = 16;
  constexpr uint64_t kKeys = 64;
  ASSERT_OK(store->CreateTable(MakeSpec("c", kDim)));
  std::vector<std::vector<double>> sums(kThreads,
                                        std::vector<double>(kKeys * kDim));
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      for (int it = 0; it < kIters; ++it) {
        std::vector<uint64_t> keys(kBatch);
        std::vector<float> grads(kBatch * kDim);
        for (int i = 0; i < kBatch; ++i) {
          keys[i] = rng() % kKeys;  // overlapping, with duplicates
          for (int j = 0; j < kDim; ++j) {
            const float g = static_cast<float>(static_cast<int>(rng() % 7) - 3);
            grads[i * kDim + j] = g;
            sums[t][keys[i] * kDim + j] += g;
          }
        }
        if (!store->Push("c", keys, grads).ok()) failed = true;
        std::vector<float> out(kBatch * kDim);
        if (!store->Pull("c", keys, absl::MakeSpan(out)).ok()) failed = true;
      }
    });
  }
  std::thread checkpointer;
  std::atomic<bool> stop{false};
  if (with_checkpoints) {
    checkpointer = std::thread([&] {
      while (!stop) {
        if (!store->Checkpoint(root.path(), {.keep_last = 1}).ok()) {
          failed = true;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  if (checkpointer.joinable()) checkpointer.join();
  ASSERT_FALSE(failed);
  std::vector<uint64_t> all(kKeys);
  for (uint64_t k = 0; k < kKeys; ++k) all[k] = k;
  std::vector<float> got(kKeys * kDim);
  ASSERT_OK(store->Pull("c", all, absl::MakeSpan(got)));
  for (uint64_t i = 0; i < kKeys * kDim; ++i) {
    double total = 0;
    for (int t = 0; t < kThreads; ++t) total += sums[t][i];
    ASSERT_EQ(got[i], static_cast<float>(-total)) << "key " << i / kDim;
  }
  EXPECT_EQ(StatsOf(*store, "c").created, kKeys);
  EXPECT_EQ(StatsOf(*store, "c").step, kThreads * kIters);
}

TEST(ConcurrencyTest, OverlappingPushesEqualTheSerialResult) {
  RunConcurrentPushes(1 << 20, /*with_checkpoints=*/false);
}

TEST(ConcurrencyTest, ExactUnderEviction) {
  RunConcurrentPushes(12 * kSlotBytes, /*with_checkpoints=*/false);
}

TEST(ConcurrencyTest, ExactUnderEvictionAndCheckpoints) {
  // 12 rows of budget for 64 hot keys: nearly every access misses.
  RunConcurrentPushes(12 * kSlotBytes, /*with_checkpoints=*/true);
}

TEST(ConcurrencyTest, ConcurrentCreationCreatesEachRowOnce) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store,
                       Store::Open(SmallOptions(20 * kSlotBytes), dir.path()));
  const TableSpec spec =
      MakeSpec("u", 8, OptimizerKind::kSgd, 1.0f, InitKind::kNormal);
  ASSERT_OK(store->CreateTable(spec));
  std::vector<std::thread> threads;
  std::atomic<bool> wrong{false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t b = 0; b < 200; b += 10) {
        std::vector<uint64_t> keys;
        for (uint64_t k = 0; k < 10; ++k) keys.push_back((b + k + t * 3) % 200);
        std::vector<float> out(keys.size() * 8);
        if (!store->Pull("u", keys, absl::MakeSpan(out)).ok()) wrong = true;
        std::vector<float> want(8);
        for (size_t i = 0; i < keys.size(); ++i) {
          InitializeRow(spec, keys[i], absl::MakeSpan(want));
          for (int j = 0; j < 8; ++j) {
            if (out[i * 8 + j] != want[j]) wrong = true;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(wrong);
  EXPECT_EQ(StatsOf(*store, "u").created, 200u);
}

}  // namespace
}  // namespace psdb
