// Restore trusts nothing it can check (store/restore_check.h): checkpoints
// made bad from good ones (MANIFEST.json edited; an SST file truncated,
// zeroed or deleted) are refused by Store::Open with restore_from and by
// the restore onto another ring (checkpoint/restore.h), with exact
// messages, and the data directory is left exactly as it was before the
// attempt, so the next open with a good checkpoint restores it.
//
// The tables count: SGD with learning rate 1 and a zero initializer, so a
// push of gradient -g adds exactly g (integers, exactly representable).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/restore.h"
#include "checkpoint/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "psdb/store.h"
#include "rocksdb/db.h"
#include "rocksdb/file_system.h"
#include "shard/ring.h"
#include "store/shard_files.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::MakeSpec;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::SmallOptions;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kEmbRows = 100;  // keys 1..100, dim 2, row k = {k, 2k}
constexpr uint64_t kSideRows = 10;  // keys 1001..1010, dim 1, row k = {1}

// Every entry under `root` with its type and size, sorted: what "the data
// directory is as it was" compares. "<absent>" when root does not exist.
std::vector<std::string> Listing(const std::string& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return {"<absent>"};
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    out.push_back(e.is_directory() ? rel + "/"
                                   : absl::StrCat(rel, " ", e.file_size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A copy (not hard links) of checkpoint `src` at `dst`, so damaging it
// leaves the good one intact.
std::string CopyCheckpoint(const std::string& src, const std::string& dst) {
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

void EditManifest(const std::string& dir,
                  const std::function<void(v1::Manifest*)>& edit) {
  absl::StatusOr<v1::Manifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  edit(&*m);
  ASSERT_TRUE(WriteManifestAtomic(dir, *m).ok());
}

// The largest SST file of the checkpoint's shard 0 (the "emb" table's).
std::string LargestSst(const std::string& checkpoint_dir) {
  std::string best;
  uintmax_t best_size = 0;
  for (const auto& e : fs::directory_iterator(checkpoint_dir + "/shard-0")) {
    if (e.path().extension() != ".sst") continue;
    if (best.empty() || e.file_size() > best_size) {
      best = e.path().string();
      best_size = e.file_size();
    }
  }
  return best;
}

std::vector<uint64_t> EmbKeys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= kEmbRows; ++k) keys.push_back(k);
  return keys;
}

// Exactly the rows the good checkpoint holds: emb row k = {k, 2k}, side
// row k = {1}, and no other rows: the store's own checkpoint into
// `check_root` records exactly kEmbRows and kSideRows.
void ExpectGoodRows(Store& store, const std::string& check_root) {
  const std::vector<uint64_t> keys = EmbKeys();
  std::vector<float> got(keys.size() * 2);
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(store.Pull("emb", keys, absl::MakeSpan(got), serving));
  for (uint64_t k = 1; k <= kEmbRows; ++k) {
    EXPECT_EQ(got[(k - 1) * 2], static_cast<float>(k)) << k;
    EXPECT_EQ(got[(k - 1) * 2 + 1], static_cast<float>(2 * k)) << k;
  }
  std::vector<float> side(kSideRows);
  std::vector<uint64_t> side_keys;
  for (uint64_t k = 1001; k <= 1000 + kSideRows; ++k) side_keys.push_back(k);
  ASSERT_OK(store.Pull("side", side_keys, absl::MakeSpan(side), serving));
  EXPECT_EQ(side, std::vector<float>(kSideRows, 1.0f));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store.Checkpoint(check_root));
  ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(info.path));
  ASSERT_EQ(m.tables_size(), 2);
  EXPECT_EQ(m.tables(0).spec().name(), "emb");
  EXPECT_EQ(m.tables(0).rows(), kEmbRows);
  EXPECT_EQ(m.tables(1).spec().name(), "side");
  EXPECT_EQ(m.tables(1).rows(), kSideRows);
  ASSERT_OK_AND_ASSIGN(auto reader, ckpt::CheckpointReader::Open(info.path));
  ASSERT_OK_AND_ASSIGN(ckpt::VerifyReport report, ckpt::Verify(*reader));
  EXPECT_TRUE(report.ok()) << report.errors.front();
  EXPECT_EQ(report.rows, kEmbRows + kSideRows);
}

class RestoreCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(auto store,
                         Store::Open(SmallOptions(), dir_.Sub("src")));
    ASSERT_OK(store->CreateTable(MakeSpec("emb", 2)));
    ASSERT_OK(store->CreateTable(MakeSpec("side", 1)));
    const std::vector<uint64_t> keys = EmbKeys();
    std::vector<float> grads;
    for (uint64_t k : keys) {
      grads.push_back(-static_cast<float>(k));
      grads.push_back(-static_cast<float>(2 * k));
    }
    ASSERT_OK(store->Push("emb", keys, grads));
    std::vector<uint64_t> side;
    for (uint64_t k = 1001; k <= 1000 + kSideRows; ++k) side.push_back(k);
    ASSERT_OK(store->Push("side", side, std::vector<float>(kSideRows, -1.0f)));
    ASSERT_OK_AND_ASSIGN(CheckpointInfo info,
                         store->Checkpoint(dir_.Sub("ckpt")));
    good_ = info.path;
  }

  // Store::Open of `data` restoring `checkpoint`: refused with DataLoss and
  // exactly `message`; `data` is unchanged. Then a restore of the good
  // checkpoint into the same `data` gives exactly its rows.
  void ExpectRefused(const std::string& checkpoint, const std::string& data,
                     const std::function<void(const std::string&)>& message) {
    const std::vector<std::string> before = Listing(data);
    StoreOptions o = SmallOptions();
    o.restore_from = checkpoint;
    absl::StatusOr<std::unique_ptr<Store>> bad = Store::Open(o, data);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
    message(std::string(bad.status().message()));
    EXPECT_EQ(Listing(data), before);

    o.restore_from = good_;
    ASSERT_OK_AND_ASSIGN(auto restored, Store::Open(o, data));
    ExpectGoodRows(*restored, dir_.Sub("check"));
  }

  ScratchDir dir_;
  std::string good_;
};

TEST_F(RestoreCheckTest, GoodCheckpointRestoresAndItsCheckpointsVerify) {
  StoreOptions o = SmallOptions();
  o.restore_from = good_;
  ASSERT_OK_AND_ASSIGN(auto restored, Store::Open(o, dir_.Sub("data")));
  ExpectGoodRows(*restored, dir_.Sub("again"));
}

TEST_F(RestoreCheckTest, WrongRowCountIsRefusedNamingBothCounts) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  EditManifest(bad, [](v1::Manifest* m) {
    m->mutable_tables(0)->set_rows(kEmbRows + 1);
    m->mutable_tables(0)->set_shard_rows(0, kEmbRows + 1);
  });
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_EQ(msg, absl::StrCat("restore refused: checkpoint ", bad,
                                " shard 0 table 'emb': the manifest says 101 "
                                "rows, the files hold 100"));
  });
}

TEST_F(RestoreCheckTest, ManifestOmittingATableIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  EditManifest(bad, [](v1::Manifest* m) { m->mutable_tables()->RemoveLast(); });
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_EQ(msg, absl::StrCat("restore refused: checkpoint ", bad,
                                " shard 0: table 'side' is in the shard's "
                                "files but not in the manifest"));
  });
}

TEST_F(RestoreCheckTest, ManifestListingAnAbsentTableIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  EditManifest(bad, [](v1::Manifest* m) {
    v1::TableManifest* t = m->add_tables();
    *t = m->tables(0);
    t->mutable_spec()->set_name("ghost");
  });
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_EQ(msg, absl::StrCat("restore refused: checkpoint ", bad,
                                " shard 0: table 'ghost' is in the manifest "
                                "but not in the shard's files"));
  });
}

TEST_F(RestoreCheckTest, ManifestSpecOtherThanTheShardsIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  EditManifest(bad, [](v1::Manifest* m) {
    m->mutable_tables(1)->mutable_spec()->set_dim(3);
  });
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_THAT(msg, StartsWith(absl::StrCat(
                         "restore refused: checkpoint ", bad,
                         " shard 0 table 'side': the manifest's spec is not "
                         "the one in the shard's metadata (")));
  });
}

TEST_F(RestoreCheckTest, MetadataSpecOfAnUnlistedTableIsRefused) {
  // The shard's metadata gains a spec for a table without a column family
  // (Store::Open would create it empty): written with RocksDB directly.
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  {
    const std::string shard = bad + "/shard-0";
    std::vector<std::string> names;
    ASSERT_TRUE(
        rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), shard, &names)
            .ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descs;
    for (const std::string& n : names)
      descs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::Open(rocksdb::DBOptions(), shard, descs, &handles, &raw)
            .ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "psdb/table/extra",
                        TableSpecToJson(MakeSpec("extra", 1)))
                    .ok());
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  // Listed as the manifest's files, so the check of the files passes and
  // the metadata's is what refuses it.
  EditManifest(bad, [&](v1::Manifest* m) {
    ASSERT_TRUE(RecordShardFiles(*rocksdb::FileSystem::Default(),
                                 bad + "/shard-0", {}, m->mutable_shards(0))
                    .ok());
  });
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_EQ(msg, absl::StrCat("restore refused: checkpoint ", bad,
                                " shard 0: table 'extra' has a spec in the "
                                "shard's metadata but is not in the manifest"));
  });
}

TEST_F(RestoreCheckTest, TruncatedSstIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  const std::string sst = LargestSst(bad);
  const uintmax_t size = fs::file_size(sst);
  fs::resize_file(sst, size / 2);
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_EQ(
        msg, absl::StrCat("restore refused: checkpoint ", bad,
                          " shard 0: file '", fs::path(sst).filename().string(),
                          "': ", size / 2, " bytes, the manifest says ", size));
  });
}

TEST_F(RestoreCheckTest, ZeroedSstIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  const std::string sst = LargestSst(bad);
  const uintmax_t size = fs::file_size(sst);
  std::ofstream(sst, std::ios::binary | std::ios::trunc)
      << std::string(size, '\0');
  ASSERT_EQ(fs::file_size(sst), size);
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_THAT(msg, StartsWith(absl::StrCat("restore refused: checkpoint ",
                                             bad, " shard 0")));
    EXPECT_THAT(msg, HasSubstr(fs::path(sst).filename().string()));
  });
}

TEST_F(RestoreCheckTest, DeletedSstIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  const std::string sst = LargestSst(bad);
  fs::remove(sst);
  ExpectRefused(bad, dir_.Sub("data"), [&](const std::string& msg) {
    EXPECT_THAT(msg,
                StartsWith(absl::StrCat(
                    "restore refused: checkpoint ", bad, " shard 0: file '",
                    fs::path(sst).filename().string(), "': missing (")));
    EXPECT_THAT(msg, HasSubstr("No such file or directory"));
  });
}

TEST_F(RestoreCheckTest, ExistingDataDirectoryIsLeftAsItWas) {
  // A data directory with a file of the user's and an empty db/ (no
  // CURRENT: a restore is attempted) keeps both, byte for byte.
  const std::string data = dir_.Sub("data");
  fs::create_directories(data + "/db");
  std::ofstream(data + "/notes.txt") << "mine";
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  EditManifest(bad, [](v1::Manifest* m) {
    m->mutable_tables(1)->set_shard_rows(0, 0);
    m->mutable_tables(1)->set_rows(0);
  });
  ExpectRefused(bad, data, [&](const std::string& msg) {
    EXPECT_EQ(msg, absl::StrCat("restore refused: checkpoint ", bad,
                                " shard 0 table 'side': the manifest says 0 "
                                "rows, the files hold 10"));
  });
}

TEST_F(RestoreCheckTest, LeftoverRestoreTempIsRemovedAtTheNextStart) {
  const std::string data = dir_.Sub("data");
  const std::string tmp = Store::RestoreTmpPath(data);
  EXPECT_EQ(tmp, data + "/db.restore-tmp");
  // A restore killed before its rename: a half-built temp, no db.
  fs::create_directories(tmp);
  std::ofstream(tmp + "/000001.sst") << "half";
  StoreOptions o = SmallOptions();
  o.restore_from = good_;
  {
    ASSERT_OK_AND_ASSIGN(auto restored, Store::Open(o, data));
    ExpectGoodRows(*restored, dir_.Sub("check1"));
    EXPECT_FALSE(fs::exists(tmp));
  }
  // Also when the database exists and nothing is restored.
  fs::create_directories(tmp);
  ASSERT_OK_AND_ASSIGN(auto reopened, Store::Open(SmallOptions(), data));
  EXPECT_FALSE(fs::exists(tmp));
  ExpectGoodRows(*reopened, dir_.Sub("check2"));
}

// A two-shard checkpoint as a cluster writes one (Store::CheckpointShard
// per server, one manifest with per-shard counts): shard s holds keys
// 1..10 * (s + 1) of "emb". Returns its directory.
std::string TwoShardCheckpoint(const ScratchDir& dir) {
  const std::string ckpt = dir.Sub("cluster/" + CheckpointId(1, 1));
  v1::Manifest m;
  m.set_checkpoint_id(CheckpointId(1, 1));
  m.set_step(1);
  v1::TableManifest* t = m.add_tables();
  *t->mutable_spec() = TableSpecToProto(MakeSpec("emb", 2));
  t->set_step(1);
  for (int s = 0; s < 2; ++s) {
    StoreOptions o = SmallOptions();
    o.shard_id = s;
    absl::StatusOr<std::unique_ptr<Store>> store =
        Store::Open(o, dir.Sub(absl::StrCat("server-", s)));
    EXPECT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE((*store)->CreateTable(MakeSpec("emb", 2)).ok());
    std::vector<uint64_t> keys;
    for (uint64_t k = 1; k <= 10 * static_cast<uint64_t>(s + 1); ++k) {
      keys.push_back(k);
    }
    EXPECT_TRUE(
        (*store)
            ->Push("emb", keys, std::vector<float>(keys.size() * 2, -1.0f))
            .ok());
    absl::StatusOr<Store::ShardCheckpoint> shard =
        (*store)->CheckpointShard(absl::StrCat(ckpt, "/", ShardDirName(s)));
    EXPECT_TRUE(shard.ok()) << shard.status();
    t->add_shard_rows(shard->tables[0].second);
    t->set_rows(t->rows() + shard->tables[0].second);
    v1::ShardManifest* sm = m.add_shards();
    sm->set_shard_id(s);
    sm->set_dir(ShardDirName(s));
    AppendShardFiles(shard->files, sm->mutable_files());
  }
  EXPECT_TRUE(WriteManifestAtomic(ckpt, m).ok());
  return ckpt;
}

TEST(ShardedRestoreCheckTest, EachShardIsCheckedAgainstItsOwnCount) {
  ScratchDir dir;
  const std::string ckpt = TwoShardCheckpoint(dir);
  // Shard 1 restores its 20 rows; its own checkpoint records 20, not the
  // manifest's total of 30.
  StoreOptions o = SmallOptions();
  o.restore_from = ckpt;
  o.shard_id = 1;
  {
    ASSERT_OK_AND_ASSIGN(auto restored, Store::Open(o, dir.Sub("data")));
    ASSERT_OK_AND_ASSIGN(CheckpointInfo info,
                         restored->Checkpoint(dir.Sub("again")));
    ASSERT_OK_AND_ASSIGN(v1::Manifest m, ReadManifest(info.path));
    EXPECT_EQ(m.tables(0).rows(), 20u);
    ASSERT_OK_AND_ASSIGN(auto reader, ckpt::CheckpointReader::Open(info.path));
    ASSERT_OK_AND_ASSIGN(ckpt::VerifyReport report, ckpt::Verify(*reader));
    EXPECT_TRUE(report.ok()) << report.errors.front();
  }
  // Shard 1's count swapped with shard 0's (the total still adds up).
  EditManifest(ckpt, [](v1::Manifest* m) {
    m->mutable_tables(0)->set_shard_rows(0, 20);
    m->mutable_tables(0)->set_shard_rows(1, 10);
  });
  const std::string data = dir.Sub("data2");
  absl::StatusOr<std::unique_ptr<Store>> bad = Store::Open(o, data);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  EXPECT_EQ(bad.status().message(),
            absl::StrCat("restore refused: checkpoint ", ckpt,
                         " shard 1 table 'emb': the manifest says 10 rows, "
                         "the files hold 20"));
  EXPECT_EQ(Listing(data), std::vector<std::string>{"<absent>"});
}

// The restore onto another ring (a cluster server's): the same refusals.
class RingRestoreCheckTest : public RestoreCheckTest {
 protected:
  // A restore of `checkpoint` as server 0 of a 2-server ring (the
  // checkpoint is a one-shard embedded one: another ring).
  absl::Status PrepareOntoTwo(const std::string& checkpoint,
                              const std::string& data) {
    absl::StatusOr<Ring> ring =
        Ring::Create(RingOptions(), {{0, 1.0}, {1, 1.0}});
    if (!ring.ok()) return ring.status();
    return ckpt::PrepareRestoreForRing(checkpoint, *ring, 0, data).status();
  }
};

TEST_F(RingRestoreCheckTest, WrongRowCountIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  EditManifest(bad, [](v1::Manifest* m) {
    m->mutable_tables(0)->set_rows(7);
    m->mutable_tables(0)->set_shard_rows(0, 7);
  });
  const std::string data = dir_.Sub("data");
  const absl::Status st = PrepareOntoTwo(bad, data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_EQ(st.message(),
            absl::StrCat("restore refused: checkpoint ", bad,
                         " shard 0 table 'emb': the manifest says 7 rows, the "
                         "files hold 100"));
  EXPECT_EQ(Listing(data), std::vector<std::string>{"<absent>"});
  EXPECT_OK(PrepareOntoTwo(good_, data));
  EXPECT_TRUE(fs::exists(Store::DbPath(data) + "/CURRENT"));
}

TEST_F(RingRestoreCheckTest, ManifestOmittingATableIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  EditManifest(bad, [](v1::Manifest* m) { m->mutable_tables()->RemoveLast(); });
  const std::string data = dir_.Sub("data");
  fs::create_directories(data);
  const absl::Status st = PrepareOntoTwo(bad, data);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_EQ(st.message(),
            absl::StrCat("restore refused: checkpoint ", bad,
                         " shard 0: table 'side' is in the shard's files but "
                         "not in the manifest"));
  EXPECT_EQ(Listing(data), std::vector<std::string>{});
}

TEST_F(RingRestoreCheckTest, DeletedSstIsRefused) {
  const std::string bad = CopyCheckpoint(good_, dir_.Sub("bad"));
  const std::string sst = LargestSst(bad);
  fs::remove(sst);
  const std::string data = dir_.Sub("data");
  const absl::Status st = PrepareOntoTwo(bad, data);
  const std::string msg(st.message());
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(msg, StartsWith(absl::StrCat(
                       "restore refused: checkpoint ", bad, " shard 0: file '",
                       fs::path(sst).filename().string(), "': missing (")));
  EXPECT_THAT(msg, HasSubstr("No such file or directory"));
  EXPECT_EQ(Listing(data), std::vector<std::string>{"<absent>"});
}

}  // namespace
}  // namespace psdb
