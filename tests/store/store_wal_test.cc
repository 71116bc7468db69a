// A Durability::kWal store killed (SIGKILL, no close) at a random moment
// of wal_workload.h's operations reopens with every row bit-identical to a
// store that never crashed and ran the acknowledged operations (plus, at
// most, the one in flight at the kill, whole). The small memory budget
// makes rows reach RocksDB by eviction between flushes (the case where a
// row on disk already includes some logged pushes), and Flush ops (memtable
// flushes and log truncation) fall in between.
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "tests/store/wal_workload.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::kWalKeys;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WalOp;
using ::psdb::testing::WalSetup;

constexpr uint64_t kBudget = 96 << 10;  // ~600 of the 2000 adam rows

// The last op the ack file says was acknowledged (-1: none).
int LastAck(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int last = -1;
  while (std::getline(in, line)) {
    int i;
    if (absl::StartsWith(line, "ACK ") &&
        absl::SimpleAtoi(line.substr(4), &i)) {
      last = i;
    }
  }
  return last;
}

struct Snapshot {
  std::vector<std::string> tables;  // every row's bytes, per table
  std::vector<int64_t> steps;
};

// Every row of both tables (values, state, header, presence) as bytes.
absl::StatusOr<Snapshot> Take(Store& store) {
  Snapshot out;
  std::vector<uint64_t> keys(kWalKeys);
  for (uint64_t k = 0; k < kWalKeys; ++k) keys[k] = k;
  for (const char* name : {"adam", "sgd"}) {
    RowBatch rows;
    std::vector<uint8_t> present;
    if (absl::Status s = store.ReadRows(name, keys, &rows, &present); !s.ok()) {
      return s;
    }
    std::string b;
    b.append(reinterpret_cast<const char*>(rows.values.data()),
             4 * rows.values.size());
    b.append(reinterpret_cast<const char*>(rows.state.data()),
             4 * rows.state.size());
    b.append(reinterpret_cast<const char*>(rows.headers.data()),
             sizeof(RowHeader) * rows.headers.size());
    b.append(reinterpret_cast<const char*>(present.data()), present.size());
    out.tables.push_back(std::move(b));
  }
  for (const TableStats& t : store.Stats().tables) out.steps.push_back(t.step);
  return out;
}

// The rows of a store that never crashed after ops 0..last (and, with
// `half_next`, the first push of op last + 1).
Snapshot Reference(int last, bool half_next = false) {
  ScratchDir dir;
  StoreOptions o = testing::SmallOptions(64 << 20);
  auto store = Store::Open(o, dir.path());
  EXPECT_TRUE(store.ok()) << store.status();
  EXPECT_OK(WalSetup(**store));
  for (int i = 0; i <= last; ++i) EXPECT_OK(WalOp(**store, i));
  if (half_next) EXPECT_OK(WalOp(**store, last + 1, /*first_push_only=*/true));
  absl::StatusOr<Snapshot> s = Take(**store);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// Explains the first difference between two snapshots.
std::string Diff(const Snapshot& a, const Snapshot& b) {
  if (a.steps != b.steps) {
    return absl::StrCat("table steps differ: ", absl::StrJoin(a.steps, ","),
                        " vs ", absl::StrJoin(b.steps, ","));
  }
  for (size_t t = 0; t < a.tables.size(); ++t) {
    if (a.tables[t] == b.tables[t]) continue;
    size_t i = 0;
    while (a.tables[t][i] == b.tables[t][i]) ++i;
    return absl::StrCat("table ", t, " differs at byte ", i);
  }
  return "";
}

// Runs the helper until the ack file reaches op `target`, kills it, and
// returns the last acknowledged op.
int RunAndKill(const std::string& store_dir, const std::string& ack_file,
               int target) {
  ChildOptions o;
  o.binary = BuiltBinary("tests/store/store_wal_helper");
  o.args = {store_dir, absl::StrCat(kBudget), ack_file};
  o.ready_prefix = "READY";
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(o);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return -1;
  EXPECT_TRUE(psdb::testing::WaitFor(
      [&] { return LastAck(ack_file) >= target; }, absl::Seconds(120)))
      << (*child)->Stderr();
  (*child)->Signal(SIGKILL);
  absl::StatusOr<int> st = (*child)->Wait();
  EXPECT_TRUE(st.ok() && WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL)
      << (*child)->Stderr();
  return LastAck(ack_file);
}

// Reopens the killed store and checks it against the never-crashed one.
void ExpectRecovered(const std::string& store_dir, int last) {
  StoreOptions o = testing::SmallOptions(kBudget);
  o.durability = Durability::kWal;
  Snapshot got;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(o, store_dir));
    ASSERT_OK_AND_ASSIGN(got, Take(*store));
  }
  // Each push of the op in flight at the kill (a push op is two) is there
  // whole or not at all.
  const std::string diff = Diff(got, Reference(last));
  if (!diff.empty()) {
    const std::string half = Diff(got, Reference(last, /*half_next=*/true));
    const std::string whole =
        half.empty() ? "" : Diff(got, Reference(last + 1));
    EXPECT_TRUE(half.empty() || whole.empty())
        << "after ops 0.." << last << ": " << diff << "; with op " << last + 1
        << "'s first push: " << half << "; with all of op " << last + 1 << ": "
        << whole;
  }
  // Recovery is durable: a clean reopen has the same rows.
  ASSERT_OK_AND_ASSIGN(auto again, Store::Open(o, store_dir));
  ASSERT_OK_AND_ASSIGN(Snapshot reopened, Take(*again));
  EXPECT_EQ(Diff(reopened, got), "");
}

TEST(StoreWalTest, KilledStoreRecoversEveryAcknowledgedOpBitIdentical) {
  std::mt19937 rng(std::random_device{}());
  // Targets spread over the workload: before and after the first flushes,
  // around the table drop/re-create at op 230.
  for (int target : {37, 120 + static_cast<int>(rng() % 60),
                     231 + static_cast<int>(rng() % 15),
                     260 + static_cast<int>(rng() % 300)}) {
    SCOPED_TRACE(absl::StrCat("kill target ", target));
    ScratchDir dir;
    const std::string ack_file = dir.path() + "/acks";
    const std::string store_dir = dir.path() + "/store";
    const int last = RunAndKill(store_dir, ack_file, target);
    ASSERT_GE(last, target);
    std::printf("killed after op %d (target %d)\n", last, target);
    ExpectRecovered(store_dir, last);
  }
}

TEST(StoreWalTest, CheckpointModeStoreReplaysALeftoverLogThenDropsIt) {
  ScratchDir dir;
  const std::string ack_file = dir.path() + "/acks";
  const std::string store_dir = dir.path() + "/store";
  const int last = RunAndKill(store_dir, ack_file, 70);
  ASSERT_GE(last, 70);
  {
    // Reopened without the log option: the log is still replayed.
    StoreOptions o = testing::SmallOptions(kBudget);
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(o, store_dir));
    ASSERT_OK_AND_ASSIGN(Snapshot got, Take(*store));
    EXPECT_TRUE(Diff(got, Reference(last)).empty() ||
                Diff(got, Reference(last, /*half_next=*/true)).empty() ||
                Diff(got, Reference(last + 1)).empty());
  }
  EXPECT_TRUE(!std::filesystem::exists(store_dir + "/wal") ||
              std::filesystem::is_empty(store_dir + "/wal"));
}

TEST(StoreWalTest, CleanCloseLeavesNoLogAndRestoreStartsAFreshOne) {
  ScratchDir dir, root;
  StoreOptions o = testing::SmallOptions(kBudget);
  o.durability = Durability::kWal;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(o, dir.path()));
    ASSERT_OK(WalSetup(*store));
    for (int i = 0; i < 40; ++i) ASSERT_OK(WalOp(*store, i));
    ASSERT_OK(store->Checkpoint(root.path()).status());
    for (int i = 40; i < 45; ++i) ASSERT_OK(WalOp(*store, i));
  }
  // Close flushed everything and truncated the log.
  size_t segments = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(dir.path() + "/wal")) {
    (void)e;
    ++segments;
  }
  EXPECT_EQ(segments, 0u);
  // A store restored from the checkpoint has ops 0..39 exactly, and its own
  // log (the tags that came with the checkpoint are dropped).
  ScratchDir restored;
  StoreOptions r = o;
  r.restore_from = root.path();
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(r, restored.path()));
  ASSERT_OK_AND_ASSIGN(Snapshot got, Take(*store));
  EXPECT_EQ(Diff(got, Reference(39)), "");
  ASSERT_OK(WalOp(*store, 40));
}

}  // namespace
}  // namespace psdb
