// Store: tables, pull / push semantics, row transfer, admission, TTL, bad
// input. (Tiering, checkpoints and concurrency have their own files.)
#include "psdb/store.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/local_client.h"
#include "rocksdb/file_system.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

using optim::OptimizerKind;
using ::psdb::testing::MakeSpec;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::SmallOptions;
using ::testing::HasSubstr;

std::vector<float> PullAll(Store& s, const std::string& t,
                           const std::vector<uint64_t>& keys, int dim,
                           PullOptions o = {}) {
  std::vector<float> out(keys.size() * dim);
  EXPECT_OK(s.Pull(t, keys, absl::MakeSpan(out), o));
  return out;
}

TableStats StatsOf(const StoreStats& s, const std::string& name) {
  for (const TableStats& t : s.tables) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no stats for " << name;
  return TableStats{};
}

TEST(StoreTest, TablesPersistAcrossReopen) {
  ScratchDir dir;
  TableSpec a = MakeSpec("a", 4);
  TableSpec b =
      MakeSpec("b.v2", 16, OptimizerKind::kAdam, 0.01f, InitKind::kUniform);
  b.admission_threshold = 2;
  b.ttl_steps = 50;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
    ASSERT_OK(store->CreateTable(a));
    ASSERT_OK(store->CreateTable(b));
    ASSERT_OK(store->CreateTable(a));  // idempotent
    TableSpec a2 = a;
    a2.dim = 5;
    EXPECT_THAT(store->CreateTable(a2),
                StatusIs(absl::StatusCode::kAlreadyExists));
    ASSERT_OK(store->CreateTable(MakeSpec("gone", 2)));
    ASSERT_OK(store->DropTable("gone"));
    EXPECT_THAT(store->DropTable("gone"),
                StatusIs(absl::StatusCode::kNotFound));
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  std::vector<TableSpec> tables = store->ListTables();
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_TRUE(tables[0] == a);
  EXPECT_TRUE(tables[1] == b);
  ASSERT_OK_AND_ASSIGN(TableSpec got, store->GetTable("b.v2"));
  EXPECT_TRUE(got == b);
  EXPECT_THAT(store->GetTable("gone"), StatusIs(absl::StatusCode::kNotFound));
  // A dropped table can be created again, empty.
  ASSERT_OK(store->CreateTable(MakeSpec("gone", 3)));
}

// Counts the files RocksDB opens for writing through the injected file
// system: StoreOptions::file_system is the one RocksDB uses.
class CountingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  CountingFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "CountingFileSystem"; }
  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    ++writable_files;
    return FileSystemWrapper::NewWritableFile(f, o, r, dbg);
  }
  std::atomic<int> writable_files{0};
};

TEST(StoreTest, RocksDbFilesGoThroughTheInjectedFileSystem) {
  ScratchDir dir;
  auto fs = std::make_shared<CountingFileSystem>();
  StoreOptions options = SmallOptions();
  options.file_system = fs;
  std::vector<float> pushed;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(options, dir.path()));
    ASSERT_OK(store->CreateTable(MakeSpec("a", 4)));
    std::vector<float> grads(4, 1.0f);
    ASSERT_OK(store->Push("a", {7}, grads));
    pushed = PullAll(*store, "a", {7}, 4);
    ASSERT_OK(store->Flush());
  }
  EXPECT_GT(fs->writable_files.load(), 0);
  const int after_first = fs->writable_files.load();
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(options, dir.path()));
  EXPECT_GT(fs->writable_files.load(), after_first);
  EXPECT_EQ(PullAll(*store, "a", {7}, 4), pushed);
}

TEST(StoreTest, SecondOpenOfSameDirectoryFails) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  EXPECT_THAT(Store::Open(SmallOptions(), dir.path()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  StoreOptions no_create = SmallOptions();
  no_create.create_if_missing = false;
  EXPECT_THAT(Store::Open(no_create, dir.Sub("nope")),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(StoreTest, PullIsDeterministicAndAnswersDuplicatesPerPosition) {
  ScratchDir d1, d2;
  const TableSpec spec =
      MakeSpec("emb", 8, OptimizerKind::kSgd, 0.1f, InitKind::kUniform);
  ASSERT_OK_AND_ASSIGN(auto s1, Store::Open(SmallOptions(), d1.path()));
  ASSERT_OK_AND_ASSIGN(auto s2, Store::Open(SmallOptions(), d2.path()));
  ASSERT_OK(s1->CreateTable(spec));
  ASSERT_OK(s2->CreateTable(spec));
  const std::vector<uint64_t> keys = {5, 7, 5, 1ull << 63, 7};
  std::vector<float> v1 = PullAll(*s1, "emb", keys, 8);
  // Second store, other order: same vectors.
  std::vector<float> v2 = PullAll(*s2, "emb", {7, 1ull << 63, 5}, 8);
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float> want(8);
    InitializeRow(spec, keys[i], absl::MakeSpan(want));
    EXPECT_EQ(std::vector<float>(v1.begin() + 8 * i, v1.begin() + 8 * i + 8),
              want);
  }
  EXPECT_EQ(std::vector<float>(v2.begin(), v2.begin() + 8),
            std::vector<float>(v1.begin() + 8, v1.begin() + 16));
  // Pulling again (now memory hits) gives the same answer.
  EXPECT_EQ(PullAll(*s1, "emb", keys, 8), v1);
  const TableStats st = StatsOf(s1->Stats(), "emb");
  EXPECT_EQ(st.created, 3u);
  EXPECT_EQ(st.memory_rows, 3u);
  EXPECT_EQ(st.hits, 5u);
}

TEST(StoreTest, PushSumsDuplicatesAndAppliesSgdOnce) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  ASSERT_OK(store->CreateTable(MakeSpec("t", 2, OptimizerKind::kSgd, 0.5f)));
  // keys 1, 2, 1: key 1 gets (1+3, 2+4) summed, one SGD step of lr 0.5.
  ASSERT_OK(store->Push("t", {1, 2, 1}, {1, 2, 10, 20, 3, 4}));
  std::vector<float> v = PullAll(*store, "t", {1, 2, 3}, 2);
  EXPECT_EQ(v, (std::vector<float>{-2, -3, -5, -10, 0, 0}));
  RowBatch rows;
  ASSERT_OK(store->PullRows("t", {1, 2}, &rows));
  EXPECT_EQ(rows.headers[0].update_count, 1u);
  EXPECT_EQ(rows.headers[0].last_update_step, 1);
  // Sightings: 2 in the push, 1 in the pull above, 1 in PullRows.
  EXPECT_EQ(rows.headers[0].frequency, 4u);
  EXPECT_EQ(rows.headers[1].frequency, 3u);
  // Step semantics: 0 = table step + 1; explicit steps raise the step.
  ASSERT_OK(store->Push("t", {1}, {0, 0}));
  EXPECT_EQ(StatsOf(store->Stats(), "t").step, 2);
  PushOptions at10;
  at10.step = 10;
  ASSERT_OK(store->Push("t", {2}, {1, 1}, at10));
  ASSERT_OK(store->Push("t", {2}, {1, 1}));
  EXPECT_EQ(StatsOf(store->Stats(), "t").step, 11);
  ASSERT_OK(store->PullRows("t", {2}, &rows));
  EXPECT_EQ(rows.headers[0].last_update_step, 11);
  EXPECT_EQ(rows.headers[0].update_count, 3u);
  EXPECT_EQ(rows.values, (std::vector<float>{-6, -11}));
}

TEST(StoreTest, ServingPullsNeverCreateRows) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  TableSpec spec =
      MakeSpec("s", 4, OptimizerKind::kSgd, 1.0f, InitKind::kUniform);
  ASSERT_OK(store->CreateTable(spec));
  TableSpec zspec = spec;
  zspec.name = "z";
  zspec.serving_default = MissingRowValue::kZeros;
  ASSERT_OK(store->CreateTable(zspec));
  PullOptions serving;
  serving.serving = true;
  std::vector<float> v = PullAll(*store, "s", {9, 9}, 4, serving);
  std::vector<float> init(4);
  InitializeRow(spec, 9, absl::MakeSpan(init));
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), init);
  EXPECT_EQ(std::vector<float>(v.begin() + 4, v.end()), init);
  EXPECT_EQ(PullAll(*store, "z", {9}, 4, serving), std::vector<float>(4, 0.0f));
  StoreStats st = store->Stats();
  EXPECT_EQ(StatsOf(st, "s").created, 0u);
  EXPECT_EQ(StatsOf(st, "s").memory_rows, 0u);
  EXPECT_EQ(StatsOf(st, "z").memory_rows, 0u);
  // An existing row is served as is.
  ASSERT_OK(store->Push("s", {9}, {1, 1, 1, 1}));
  v = PullAll(*store, "s", {9}, 4, serving);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(v[j], init[j] - 1.0f);
}

TEST(StoreTest, PullRowsPutRowsRoundTripWithState) {
  ScratchDir d1, d2;
  const TableSpec spec =
      MakeSpec("ada", 3, OptimizerKind::kAdagrad, 0.1f, InitKind::kUniform);
  ASSERT_OK_AND_ASSIGN(auto s1, Store::Open(SmallOptions(), d1.path()));
  ASSERT_OK_AND_ASSIGN(auto s2, Store::Open(SmallOptions(), d2.path()));
  ASSERT_OK(s1->CreateTable(spec));
  ASSERT_OK(s2->CreateTable(spec));
  ASSERT_OK(s1->Push("ada", {1, 2}, {1, 2, 3, -1, -2, -3}));
  ASSERT_OK(s1->Push("ada", {1}, {0.5f, 0.5f, 0.5f}));
  RowBatch rows;
  ASSERT_OK(s1->PullRows("ada", {1, 2}, &rows));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.dim, 3);
  EXPECT_EQ(rows.state_size, 3);
  // Adagrad accumulators: initial 0.1 + sum of squared gradients.
  EXPECT_FLOAT_EQ(rows.state[0], 0.1f + 1 + 0.25f);
  EXPECT_FLOAT_EQ(rows.state[3], 0.1f + 1);
  ASSERT_OK(s2->PutRows("ada", {1, 2}, rows));
  RowBatch back;
  ASSERT_OK(s2->PullRows("ada", {1, 2}, &back));
  EXPECT_EQ(back.values, rows.values);
  EXPECT_EQ(back.state, rows.state);
  EXPECT_EQ(back.headers[0].update_count, 2u);
  EXPECT_EQ(back.headers[0].last_update_step, 2);
  // The next push continues from the transferred state identically.
  ASSERT_OK(s1->Push("ada", {1}, {1, 1, 1}));
  ASSERT_OK(s2->Push("ada", {1}, {1, 1, 1}, PushOptions{.step = 3}));
  EXPECT_EQ(PullAll(*s1, "ada", {1}, 3), PullAll(*s2, "ada", {1}, 3));
  // Duplicate keys in PutRows: the last one wins.
  RowBatch two;
  two.Resize(3, 3, 2);
  two.values = {1, 1, 1, 2, 2, 2};
  ASSERT_OK(s2->PutRows("ada", {7, 7}, two));
  EXPECT_EQ(PullAll(*s2, "ada", {7}, 3), (std::vector<float>{2, 2, 2}));
}

TEST(StoreTest, AdmissionThreshold) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  TableSpec spec =
      MakeSpec("adm", 2, OptimizerKind::kSgd, 1.0f, InitKind::kConstant);
  spec.initializer.a = 0.5f;
  spec.admission_threshold = 3;
  ASSERT_OK(store->CreateTable(spec));
  // Sightings 1 and 2 (push, pull): not materialized, push not applied.
  ASSERT_OK(store->Push("adm", {4}, {1, 1}));
  EXPECT_EQ(PullAll(*store, "adm", {4}, 2), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(StatsOf(store->Stats(), "adm").created, 0u);
  EXPECT_EQ(StatsOf(store->Stats(), "adm").not_admitted, 2u);
  // Sighting 3 materializes the row and applies this push.
  ASSERT_OK(store->Push("adm", {4}, {2, 4}));
  EXPECT_EQ(StatsOf(store->Stats(), "adm").created, 1u);
  EXPECT_EQ(PullAll(*store, "adm", {4}, 2), (std::vector<float>{-1.5f, -3.5f}));
  // Duplicates in one batch count as sightings: 3 at once admit key 5.
  ASSERT_OK(store->Push("adm", {5, 5, 5}, {1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(PullAll(*store, "adm", {5}, 2), (std::vector<float>{-2.5f, 0.5f}));
  // Serving pulls do not count.
  PullOptions serving;
  serving.serving = true;
  for (int i = 0; i < 5; ++i) PullAll(*store, "adm", {6}, 2, serving);
  EXPECT_EQ(StatsOf(store->Stats(), "adm").created, 2u);
}

TEST(StoreTest, TtlDropsStaleRowsAtCheckpoint) {
  ScratchDir dir, ckpt;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  TableSpec spec = MakeSpec("ttl", 2);
  spec.ttl_steps = 5;
  ASSERT_OK(store->CreateTable(spec));
  ASSERT_OK(store->Push("ttl", {1}, {1, 1}, PushOptions{.step = 1}));
  ASSERT_OK(store->Push("ttl", {2}, {1, 1}, PushOptions{.step = 4}));
  ASSERT_OK(store->Push("ttl", {3}, {1, 1}, PushOptions{.step = 10}));
  // Step 10: key 1 (1 + 5 < 10) expires; key 2 (4 + 5 = 9 < 10) expires too;
  // key 3 stays.
  ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store->Checkpoint(ckpt.path()));
  EXPECT_EQ(info.rows_expired, 2u);
  EXPECT_EQ(PullAll(*store, "ttl", {1, 2, 3}, 2),
            (std::vector<float>{0, 0, 0, 0, -1, -1}));
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(info.path));
  EXPECT_EQ(m.tables(0).rows(), 1u);
  // Also for rows that were evicted to disk: a tiny budget forces that.
  ScratchDir dir2, ckpt2;
  ASSERT_OK_AND_ASSIGN(auto small, Store::Open(SmallOptions(100), dir2.path()));
  ASSERT_OK(small->CreateTable(spec));
  for (uint64_t k = 0; k < 20; ++k) {
    ASSERT_OK(small->Push("ttl", {k}, {1, 1},
                          PushOptions{.step = static_cast<int64_t>(k + 1)}));
  }
  // Step 20: keys with step + 5 < 20, i.e. steps 1..14 = keys 0..13.
  ASSERT_OK_AND_ASSIGN(info, small->Checkpoint(ckpt2.path()));
  EXPECT_EQ(info.rows_expired, 14u);
  ASSERT_OK(small->Push("ttl", {19}, {1, 1}));  // step 21
  std::vector<float> v = PullAll(*small, "ttl", {13, 14}, 2);
  EXPECT_EQ(v, (std::vector<float>{0, 0, -1, -1}));
}

TEST(StoreTest, BadInputChangesNothing) {
  ScratchDir dir;
  StoreOptions opts = SmallOptions();
  opts.max_batch_keys = 4;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, dir.path()));
  ASSERT_OK(store->CreateTable(MakeSpec("t", 2)));
  TableSpec skip = MakeSpec("skip", 2);
  skip.non_finite = NonFinitePolicy::kSkipRow;
  ASSERT_OK(store->CreateTable(skip));
  ASSERT_OK(store->Push("t", {1}, {1, 1}));
  const StoreStats before = store->Stats();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out(4);

  auto expect = [](absl::Status s, absl::StatusCode code, const char* text) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(text)) << s;
  };
  expect(store->Pull("nope", {1}, absl::MakeSpan(out).subspan(0, 2)),
         absl::StatusCode::kNotFound, "nope");
  expect(store->Push("bad/name", {1}, {1, 1}),
         absl::StatusCode::kInvalidArgument, "bad/name");
  expect(store->Pull("t", {1, 2}, absl::MakeSpan(out).subspan(0, 3)),
         absl::StatusCode::kInvalidArgument, "output floats");
  expect(store->Push("t", {1, 2}, {1, 1, 1}),
         absl::StatusCode::kInvalidArgument, "gradient floats");
  expect(store->Push("t", {2, 1}, {1, 1, nan, 1}),
         absl::StatusCode::kInvalidArgument,
         "non-finite or out-of-range gradient for key 1 at position 1");
  expect(store->Push("t", {2, 3}, {1, 1, 1, inf}),
         absl::StatusCode::kInvalidArgument, "key 3");
  // Finite but beyond kMaxGradient, alone or as the sum of duplicates.
  expect(store->Push("t", {2, 4}, {1, 1, 2e18f, 0}),
         absl::StatusCode::kInvalidArgument, "gradient for key 4");
  expect(store->Push("t", {4, 2, 4}, {6e17f, 0, 1, 1, 6e17f, 0}),
         absl::StatusCode::kInvalidArgument,
         "sum of the gradients for key 4 at position 2");
  expect(store->Push("t", {}, {}), absl::StatusCode::kInvalidArgument,
         "empty batch");
  expect(store->Pull("t", {}, {}), absl::StatusCode::kInvalidArgument,
         "empty batch");
  expect(store->Push("t", {1, 2, 3, 4, 5}, std::vector<float>(10, 1)),
         absl::StatusCode::kResourceExhausted, "max_batch_keys");
  expect(store->Push("t", {1}, {1, 1}, PushOptions{.step = -1}),
         absl::StatusCode::kInvalidArgument, "step");
  RowBatch rows;
  rows.Resize(3, 0, 1);
  expect(store->PutRows("t", {1}, rows), absl::StatusCode::kInvalidArgument,
         "dim");
  rows.Resize(2, 0, 1);
  rows.values[1] = nan;
  expect(store->PutRows("t", {1}, rows), absl::StatusCode::kInvalidArgument,
         "not finite");
  rows.Resize(2, 0, 2);
  expect(store->PutRows("t", {1}, rows), absl::StatusCode::kInvalidArgument,
         "PutRows of 1 keys");
  expect(store->PullRows("t", {}, &rows), absl::StatusCode::kInvalidArgument,
         "empty batch");
  TableSpec bad = MakeSpec("x", 0);
  expect(store->CreateTable(bad), absl::StatusCode::kInvalidArgument, "dim");
  expect(store->CreateTable(MakeSpec("a b", 2)),
         absl::StatusCode::kInvalidArgument, "a b");

  // Nothing changed: values, steps, counters, tables.
  const StoreStats after = store->Stats();
  ASSERT_EQ(after.tables.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(after.tables[i].step, before.tables[i].step);
    EXPECT_EQ(after.tables[i].created, before.tables[i].created);
    EXPECT_EQ(after.tables[i].memory_rows, before.tables[i].memory_rows);
  }
  EXPECT_EQ(PullAll(*store, "t", {1, 2, 3}, 2),
            (std::vector<float>{-1, -1, 0, 0, 0, 0}));

  // Skip-row policy: the finite rows are applied, the other is untouched.
  ASSERT_OK(store->Push("skip", {1, 2, 1}, {1, 1, nan, 1, 1, 1}));
  EXPECT_EQ(PullAll(*store, "skip", {1, 2}, 2),
            (std::vector<float>{-2, -2, 0, 0}));
  ASSERT_OK(store->Push("skip", {2, 3}, {1, inf, 2, 2}));
  EXPECT_EQ(PullAll(*store, "skip", {2, 3}, 2),
            (std::vector<float>{0, 0, -2, -2}));
  // Out of range (a duplicate sum beyond kMaxGradient): skipped the same way.
  ASSERT_OK(store->Push("skip", {3, 4, 3}, {6e17f, 0, 1, 1, 6e17f, 0}));
  EXPECT_EQ(PullAll(*store, "skip", {3, 4}, 2),
            (std::vector<float>{-2, -2, -1, -1}));
}

// Gradients within kMaxGradient whose squares pile up in Adagrad's
// accumulator until it would overflow float: from then on each update of
// the row is undone (counted), so the stored row stays finite and exactly
// what the last finite update left.
TEST(StoreTest, UpdateThatWouldOverflowIsUndone) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  TableSpec spec = MakeSpec("ada", 2);
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  ASSERT_OK(store->CreateTable(spec));
  const std::vector<float> huge = {kMaxGradient, 1};
  RowBatch last;
  uint64_t undone = 0;
  int finite_updates = 0;
  for (int i = 0; i < 400 && undone == 0; ++i) {
    ASSERT_OK(store->Push("ada", {7}, huge));
    undone = store->Stats().tables[0].non_finite_updates;
    RowBatch row;
    ASSERT_OK(store->PullRows("ada", {7}, &row));
    for (float v : row.values) ASSERT_TRUE(std::isfinite(v));
    for (float v : row.state) ASSERT_TRUE(std::isfinite(v));
    if (undone == 0) {
      ++finite_updates;
      last = row;
      continue;
    }
    // The undone update left values, state and header as they were.
    EXPECT_EQ(row.values, last.values);
    EXPECT_EQ(row.state, last.state);
    EXPECT_EQ(row.headers[0].update_count, last.headers[0].update_count);
  }
  EXPECT_EQ(undone, 1u);
  // 0.1 + n * 1e36 stays below FLT_MAX (3.4e38) for n <= 340 pushes.
  EXPECT_GE(finite_updates, 300);
  EXPECT_EQ(last.headers[0].update_count,
            static_cast<uint64_t>(finite_updates));
}

TEST(StoreTest, LocalClientServesTheStore) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto client,
                       LocalClient::Open(dir.path(), SmallOptions()));
  ParameterClient& c = *client;
  ASSERT_OK(c.CreateTable(MakeSpec("t", 2)));
  ASSERT_OK_AND_ASSIGN(auto tables, c.ListTables());
  ASSERT_EQ(tables.size(), 1u);
  ASSERT_OK(c.Push("t", {3}, {1, 2}, {}));
  std::vector<float> out(2);
  ASSERT_OK(c.Pull("t", {3}, absl::MakeSpan(out), {}));
  EXPECT_EQ(out, (std::vector<float>{-1, -2}));
  ASSERT_OK_AND_ASSIGN(StoreStats st, c.Stats());
  EXPECT_EQ(st.tables[0].step, 1);
  ASSERT_OK_AND_ASSIGN(TableSpec spec, c.GetTable("t"));
  EXPECT_EQ(spec.dim, 2);
  ASSERT_OK(c.DropTable("t"));
}

}  // namespace
}  // namespace psdb

namespace psdb {
namespace {

// A read-only checkpoint store accepts CreateTable of a table it holds with
// the identical spec (nothing to write: a model opening its tables
// idempotently) and refuses every other CreateTable; LocalClient serves it.
TEST(StoreTest, ReadOnlyCheckpointAcceptsOnlyIdenticalCreateTable) {
  ScratchDir dir, ckpt;
  const TableSpec spec = ::psdb::testing::MakeSpec("t", 2);
  std::string path;
  {
    ASSERT_OK_AND_ASSIGN(
        auto store, Store::Open(::psdb::testing::SmallOptions(), dir.path()));
    ASSERT_OK(store->CreateTable(spec));
    ASSERT_OK(store->Push("t", {1}, {1, 1}, PushOptions{.step = 1}));
    ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store->Checkpoint(ckpt.path()));
    path = info.path;
  }
  ASSERT_OK_AND_ASSIGN(auto client, LocalClient::OpenCheckpoint(path));
  EXPECT_OK(client->CreateTable(spec));
  TableSpec other = spec;
  other.dim = 3;
  EXPECT_EQ(client->CreateTable(other).code(),
            absl::StatusCode::kFailedPrecondition);
  other = spec;
  other.name = "new";
  EXPECT_EQ(client->CreateTable(other).code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<float> out(2);
  EXPECT_OK(client->Pull("t", {1}, absl::MakeSpan(out), {}));
  EXPECT_NE(out, (std::vector<float>{0, 0}));
}

}  // namespace
}  // namespace psdb

namespace psdb {
namespace {

// weight_decay is lazy: the store applies it to the rows a push touches,
// when it touches them, never to the rest of the table.
TEST(StoreTest, WeightDecayTouchesOnlyPushedRows) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(SmallOptions(), dir.path()));
  TableSpec spec = MakeSpec("wd", 1, OptimizerKind::kSgd, 0.5f);
  spec.initializer = {InitKind::kConstant, 2.0f, 0.0f};
  spec.optimizer.weight_decay = 0.5f;
  ASSERT_OK(store->CreateTable(spec));
  EXPECT_EQ(PullAll(*store, "wd", {1, 2}, 1), (std::vector<float>{2, 2}));
  // Key 1: g = 1 + 0.5 * 2 = 2, w = 2 - 0.5 * 2 = 1. Key 2: untouched.
  ASSERT_OK(store->Push("wd", {1}, {1.0f}, PushOptions{.step = 1}));
  ASSERT_OK(store->Push("wd", {1}, {0.0f}, PushOptions{.step = 2}));
  // Key 1 again with g = 0: w = 1 - 0.5 * (0.5 * 1) = 0.75.
  EXPECT_EQ(PullAll(*store, "wd", {1, 2}, 1), (std::vector<float>{0.75f, 2}));
}

}  // namespace
}  // namespace psdb
