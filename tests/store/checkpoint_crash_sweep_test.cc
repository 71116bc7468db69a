// The crash-point sweep: a store with two counting-gradient tables writes a
// checkpoint under the fault file system, and the power is cut at each of
// the checkpoint's writes and syncs in turn (every one, not a sample). After
// each cut the store must reopen with every row it had, every checkpoint
// that exists (has MANIFEST.json) must verify, and a restore from the newest
// one must give exactly the rows of the previous checkpoint or of the new
// one; a checkpoint taken after the cut must succeed and restore the live
// rows.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/verify.h"
#include "gtest/gtest.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "psdb/store.h"
#include "tests/store/fault_file_system.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb::testing {
namespace {

// Keys pushed in both rounds, and keys only the second round creates.
const std::vector<uint64_t> kOld = {1, 2, 3, 77, 1u << 20, 987654321};
const std::vector<uint64_t> kNew = {5, 6, 4242};
constexpr int kDimA = 4;
constexpr int kDimB = 2;

// What a table holds: its value for every key of kOld and kNew, in order
// (SGD with learning rate 1 on zeros: a push of -g adds g; a key never
// pushed reads 0).
struct Expected {
  float a_old, a_new, b_old, b_new;
};
// After round 1 (the previous checkpoint).
constexpr Expected kRound1 = {1.0f, 0.0f, 2.0f, 0.0f};
// After round 2 (the live store, and the new checkpoint).
constexpr Expected kRound2 = {3.0f, 2.0f, 6.0f, 4.0f};

std::vector<uint64_t> AllKeys() {
  std::vector<uint64_t> k = kOld;
  k.insert(k.end(), kNew.begin(), kNew.end());
  return k;
}

// The exact rows `e` describes for `table`, over AllKeys().
std::vector<float> Want(const Expected& e, bool table_a) {
  const int dim = table_a ? kDimA : kDimB;
  std::vector<float> out;
  for (size_t i = 0; i < kOld.size(); ++i) {
    out.insert(out.end(), dim, table_a ? e.a_old : e.b_old);
  }
  for (size_t i = 0; i < kNew.size(); ++i) {
    out.insert(out.end(), dim, table_a ? e.a_new : e.b_new);
  }
  return out;
}

// Pulls (serving: creates nothing) every key of both tables.
void ExpectRows(Store& store, const Expected& e, const std::string& what) {
  PullOptions serving;
  serving.serving = true;
  const std::vector<uint64_t> keys = AllKeys();
  std::vector<float> a(keys.size() * kDimA), b(keys.size() * kDimB);
  ASSERT_OK(store.Pull("a", keys, absl::MakeSpan(a), serving));
  ASSERT_OK(store.Pull("b", keys, absl::MakeSpan(b), serving));
  EXPECT_EQ(a, Want(e, true)) << what;
  EXPECT_EQ(b, Want(e, false)) << what;
}

void Push(Store& store, const std::vector<uint64_t>& keys, float a, float b) {
  ASSERT_OK(store.Push("a", keys, std::vector<float>(keys.size() * kDimA, a)));
  ASSERT_OK(store.Push("b", keys, std::vector<float>(keys.size() * kDimB, b)));
}

StoreOptions SweepOptions(std::shared_ptr<rocksdb::FileSystem> fs) {
  StoreOptions o = SmallOptions();
  o.file_system = std::move(fs);
  return o;
}

class CheckpointCrashSweepTest : public ::testing::Test {
 protected:
  // The state before the checkpoint under test: a store whose checkpoint
  // holds round 1 and whose live rows (flushed by a clean close) hold
  // round 2.
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(auto store,
                         Store::Open(SweepOptions(nullptr), StorePath()));
    ASSERT_OK(store->CreateTable(MakeSpec("a", kDimA)));
    ASSERT_OK(store->CreateTable(MakeSpec("b", kDimB)));
    Push(*store, kOld, -1.0f, -2.0f);
    ASSERT_OK(store->Checkpoint(Ckpts()).status());
    Push(*store, kOld, -2.0f, -4.0f);
    Push(*store, kNew, -2.0f, -4.0f);
    ExpectRows(*store, kRound2, "before the sweep");
  }

  std::string Pre() const { return dir_.Sub("pre"); }
  std::string StorePath() const { return Pre() + "/store"; }
  std::string Ckpts() const { return Pre() + "/ckpts"; }

  // A fresh copy of the pre-checkpoint state; returns its directory.
  std::string Copy(const std::string& name) {
    const std::string to = dir_.Sub(name);
    std::filesystem::copy(Pre(), to, std::filesystem::copy_options::recursive);
    return to;
  }

  ScratchDir dir_;
};

TEST_F(CheckpointCrashSweepTest, PowerCutAtEveryWriteAndSyncOfACheckpoint) {
  // 1. Count the writes and syncs one checkpoint does.
  int64_t n = 0;
  {
    const std::string trial = Copy("count");
    auto fs = std::make_shared<FaultFileSystem>();
    ASSERT_OK_AND_ASSIGN(auto store,
                         Store::Open(SweepOptions(fs), trial + "/store"));
    const int64_t before = fs->writes() + fs->syncs();
    ASSERT_OK(store->Checkpoint(trial + "/ckpts").status());
    n = fs->writes() + fs->syncs() - before;
  }
  ASSERT_GT(n, 0);
  std::printf("checkpoint crash sweep: %lld writes + syncs counted\n",
              static_cast<long long>(n));
  RecordProperty("writes_and_syncs", static_cast<int>(n));

  // 2. Cut the power at each of them, and go on until a cut comes after the
  // checkpoint returned: RocksDB's background threads may write a little
  // more or less in one run than in another (n varied from 20 to 23 over
  // runs), so every index up to n is cut, and at least one run more.
  const int64_t limit = 2 * n + 8;  // far more than any run was seen to do
  int new_made_it = 0, fired = 0;
  int64_t tried = 0;
  bool returned = false;  // some run's checkpoint returned before its cut
  for (int64_t i = 1; (i <= n || !returned) && i <= limit; ++i) {
    SCOPED_TRACE(
        absl::StrCat("power cut at write/sync ", i, " (", n, " counted)"));
    ++tried;
    const std::string trial = Copy(absl::StrCat("cut-", i));
    auto fs = std::make_shared<FaultFileSystem>();
    bool cut_during_checkpoint = false;
    bool returned_ok = false;
    std::string fired_op;  // the write or sync the cut failed
    {
      ASSERT_OK_AND_ASSIGN(auto store,
                           Store::Open(SweepOptions(fs), trial + "/store"));
      fs->InjectFault({.nth = i,
                       .error = i % 2 == 0 ? FaultFileSystem::Error::kIo
                                           : FaultFileSystem::Error::kNoSpace,
                       .sticky = true,
                       .freeze = true});
      absl::Status s = store->Checkpoint(trial + "/ckpts").status();
      cut_during_checkpoint = fs->fault_fired();
      fired_op = fs->fired_op();
      returned_ok = s.ok();
      fired += cut_during_checkpoint;
      if (!cut_during_checkpoint) EXPECT_OK(s);
    }  // The store closes with the power already off.
    fs->PowerCut();

    // The store reopens with every row it had.
    {
      ASSERT_OK_AND_ASSIGN(auto store,
                           Store::Open(SweepOptions(fs), trial + "/store"));
      ExpectRows(*store, kRound2, "reopened store");
    }
    // Every checkpoint that exists verifies.
    ASSERT_OK_AND_ASSIGN(std::vector<CheckpointRef> complete,
                         ListCheckpoints(trial + "/ckpts"));
    ASSERT_FALSE(complete.empty());
    ASSERT_LE(complete.size(), 2u);
    for (const CheckpointRef& c : complete) {
      ASSERT_OK_AND_ASSIGN(auto reader,
                           ckpt::CheckpointReader::Open(c.path, fs));
      ASSERT_OK_AND_ASSIGN(ckpt::VerifyReport report, ckpt::Verify(*reader));
      EXPECT_TRUE(report.ok())
          << c.path << ": " << report.error_count << " errors, first: "
          << (report.errors.empty() ? "" : report.errors[0]);
    }
    // The newest restores exactly: the old rows, or the new ones.
    const bool made_it = complete.front().seq == 2;
    new_made_it += made_it;
    // A checkpoint that returned OK is durable, even when the cut fell
    // during it: on a write of a background job (RocksDB's, or its info
    // LOG, which the store appends best-effort) after the checkpoint's own
    // last write. One that swallowed a failed write of its own would not
    // be (the cut drops everything not synced, and fails every later op).
    if (cut_during_checkpoint && returned_ok) {
      std::printf("cut %lld failed %s and the checkpoint returned OK\n",
                  static_cast<long long>(i), fired_op.c_str());
    }
    if (returned_ok) {
      EXPECT_TRUE(made_it) << "a checkpoint that returned OK is lost; the "
                              "cut failed "
                           << fired_op;
    }
    returned |= !cut_during_checkpoint;
    {
      StoreOptions o = SweepOptions(fs);
      o.restore_from = trial + "/ckpts";
      ASSERT_OK_AND_ASSIGN(auto restored, Store::Open(o, trial + "/restored"));
      ExpectRows(*restored, made_it ? kRound2 : kRound1, "restored");
    }
    // A checkpoint after the cut succeeds and holds the live rows.
    {
      ASSERT_OK_AND_ASSIGN(auto store,
                           Store::Open(SweepOptions(fs), trial + "/store"));
      ASSERT_OK_AND_ASSIGN(CheckpointInfo info,
                           store->Checkpoint(trial + "/ckpts"));
      StoreOptions o = SweepOptions(fs);
      o.restore_from = info.path;
      ASSERT_OK_AND_ASSIGN(auto restored, Store::Open(o, trial + "/again"));
      ExpectRows(*restored, kRound2, "checkpoint after the cut");
    }
    std::filesystem::remove_all(trial);
    if (HasFatalFailure()) return;
  }
  std::printf(
      "checkpoint crash sweep: %lld writes + syncs counted, %lld cut points "
      "tried (%d during the checkpoint), the new checkpoint survived %d\n",
      static_cast<long long>(n), static_cast<long long>(tried), fired,
      new_made_it);
  RecordProperty("cut_points_tried", static_cast<int>(tried));
  EXPECT_TRUE(returned) << "no run finished within " << limit << " ops";
  EXPECT_GT(fired, 0);
  // A cut at the first write keeps the old checkpoint, one after the
  // checkpoint returned keeps the new one.
  EXPECT_GT(new_made_it, 0);
  EXPECT_LT(new_made_it, tried);
}

}  // namespace
}  // namespace psdb::testing
