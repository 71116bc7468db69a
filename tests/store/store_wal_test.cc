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
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "psdb/store.h"
#include "rocksdb/db.h"
#include "store/wal.h"
#include "tests/store/fault_file_system.h"
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
using ::testing::HasSubstr;

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

// A killed store's log cannot be replayed on a disk that refuses writes:
// the open fails naming the full disk and the records, the log stays, and
// once space returns the open recovers every acknowledged op.
TEST(StoreWalTest, LogToReplayOnAFullDiskRefusesTheOpenAndLosesNothing) {
  ScratchDir dir;
  const std::string ack_file = dir.path() + "/acks";
  const std::string store_dir = dir.path() + "/store";
  const int last = RunAndKill(store_dir, ack_file, 37);
  ASSERT_GE(last, 37);
  std::vector<std::pair<std::string, uintmax_t>> segments;
  for (const auto& e :
       std::filesystem::directory_iterator(store_dir + "/wal")) {
    segments.emplace_back(e.path().string(), e.file_size());
  }
  ASSERT_FALSE(segments.empty());
  auto fs = std::make_shared<testing::FaultFileSystem>();
  fs->InjectFault(testing::FaultFileSystem::Fault{});  // every write: ENOSPC
  StoreOptions o = testing::SmallOptions(kBudget);
  o.durability = Durability::kWal;
  o.file_system = fs;
  absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(o, store_dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted)
      << s.status();
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("cannot open: the disk refuses writes ("));
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("No space left on device"));
  EXPECT_THAT(
      std::string(s.status().message()),
      HasSubstr("records to replay; every acknowledged update is still in "
                "its files and log: free space and open it again"));
  for (const auto& [path, size] : segments) {
    EXPECT_EQ(std::filesystem::file_size(path), size) << path;
  }
  ExpectRecovered(store_dir, last);
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

// Reads the metadata `key` of the store at `store_dir` and, if `put` is
// set, writes it (RocksDB itself, every column family open).
absl::StatusOr<std::string> Meta(const std::string& store_dir,
                                 const std::string& key,
                                 const std::string* put = nullptr) {
  const std::string db_path = store_dir + "/db";
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), db_path, &names);
  if (!s.ok()) return absl::InternalError(s.ToString());
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const std::string& n : names)
    cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(rocksdb::DBOptions(), db_path, cfs, &handles, &raw);
  if (!s.ok()) return absl::InternalError(s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  s = db->Get(rocksdb::ReadOptions(), key, &value);
  if (s.ok() && put != nullptr) {
    s = db->Put(rocksdb::WriteOptions(), key, *put);
    if (s.ok()) s = db->Flush(rocksdb::FlushOptions());
  }
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  if (!s.ok()) return absl::InternalError(s.ToString());
  return value;
}

// A closed kWal store with the workload's tables and an empty log, made to
// look as a build of store format 1 left it; returns its wal id and the
// LSN its log's next record gets.
void OldFormatStore(const std::string& store_dir, uint64_t* wal_id,
                    uint64_t* next_lsn) {
  StoreOptions o = testing::SmallOptions(kBudget);
  o.durability = Durability::kWal;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(o, store_dir));
    ASSERT_OK(WalSetup(*store));
  }
  const std::string one = "1";
  ASSERT_OK_AND_ASSIGN(std::string version,
                       Meta(store_dir, "psdb/format_version", &one));
  EXPECT_EQ(version, "2");  // what a store with a log records now
  ASSERT_OK_AND_ASSIGN(std::string id, Meta(store_dir, "psdb/wal_id"));
  ASSERT_OK_AND_ASSIGN(std::string lsn, Meta(store_dir, "psdb/wal_next_lsn"));
  ASSERT_TRUE(absl::SimpleAtoi(id, wal_id));
  ASSERT_TRUE(absl::SimpleAtoi(lsn, next_lsn));
}

// Writes `records` (framed) as segment 1 of the store's log, with a
// header of format `version`.
void WriteSegment(const std::string& store_dir, uint32_t version,
                  uint64_t wal_id, const std::string& records) {
  std::filesystem::create_directories(store_dir + "/wal");
  std::ofstream out(store_dir + "/wal/" + internal::WalSegmentName(1),
                    std::ios::binary);
  out << internal::WalSegmentHeader(version, wal_id) << records;
}

// A log of format 1, as builds before kPushSums wrote it (raw gradients in
// kPush records), replays bit-identical to the same pushes on a live store.
TEST(StoreWalTest, LogOfFormatOneWithRawPushRecordsStillReplays) {
  ScratchDir dir;
  const std::string store_dir = dir.path() + "/store";
  uint64_t wal_id = 0, lsn = 0;
  ASSERT_NO_FATAL_FAILURE(OldFormatStore(store_dir, &wal_id, &lsn));

  ScratchDir ref_dir;
  ASSERT_OK_AND_ASSIGN(
      auto ref, Store::Open(testing::SmallOptions(64 << 20), ref_dir.path()));
  ASSERT_OK(WalSetup(*ref));
  std::string records;
  for (int i = 0; i < 40; ++i) {
    // 16 keys of 60 with repeats; gradients that make summation order show.
    std::vector<uint64_t> keys(16);
    std::vector<float> grads(16 * 8);
    for (size_t j = 0; j < keys.size(); ++j) {
      keys[j] = testing::WalMix(i * 100 + j) % 60;
    }
    for (size_t j = 0; j < grads.size(); ++j) {
      grads[j] = static_cast<float>(static_cast<int64_t>(
                                        testing::WalMix(i * 1000 + j) % 20001) -
                                    10000) /
                 3000.0f;
    }
    ASSERT_OK(ref->Push("adam", keys, grads));
    std::string framed;
    internal::EncodePushRecord("adam", /*step=*/i + 1, keys, grads, 8, &framed);
    internal::AppendWalRecord(
        internal::WalRecordType::kPush, lsn++,
        absl::string_view(framed).substr(internal::kWalRecordHeaderBytes),
        &records);
  }
  WriteSegment(store_dir, 1, wal_id, records);

  StoreOptions o = testing::SmallOptions(kBudget);
  o.durability = Durability::kWal;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(o, store_dir));
    ASSERT_OK_AND_ASSIGN(Snapshot got, Take(*store));
    ASSERT_OK_AND_ASSIGN(Snapshot want, Take(*ref));
    EXPECT_EQ(Diff(got, want), "");
    EXPECT_EQ(got.steps, (std::vector<int64_t>{40, 0}));
  }
  // Replayed, flushed, and the store now records format 2.
  ASSERT_OK_AND_ASSIGN(std::string version,
                       Meta(store_dir, "psdb/format_version"));
  EXPECT_EQ(version, "2");
}

// A log this build cannot read whole (a newer segment format, a record type
// it does not know) refuses the open, naming the file, and changes nothing:
// skipping it would lose acknowledged pushes.
TEST(StoreWalTest, LogOfANewerFormatOrUnknownRecordIsRefused) {
  StoreOptions o = testing::SmallOptions(kBudget);
  o.durability = Durability::kWal;
  for (const bool newer_segment : {true, false}) {
    SCOPED_TRACE(newer_segment ? "segment format 3" : "record type 7");
    ScratchDir dir;
    const std::string store_dir = dir.path() + "/store";
    uint64_t wal_id = 0, lsn = 0;
    ASSERT_NO_FATAL_FAILURE(OldFormatStore(store_dir, &wal_id, &lsn));
    std::string records;
    internal::AppendWalRecord(internal::WalRecordType::kCreateTable, lsn, "x",
                              &records);
    internal::AppendWalRecord(static_cast<internal::WalRecordType>(7), lsn + 1,
                              "whatever a newer psdb writes", &records);
    const uint32_t version = newer_segment ? 3 : internal::kWalFormatVersion;
    WriteSegment(store_dir, version, wal_id, newer_segment ? "" : records);
    const std::string segment =
        store_dir + "/wal/" + internal::WalSegmentName(1);
    const uintmax_t size = std::filesystem::file_size(segment);
    for (const Durability d : {Durability::kWal, Durability::kCheckpoint}) {
      StoreOptions od = o;
      od.durability = d;
      absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(od, store_dir);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition)
          << s.status();
      EXPECT_THAT(std::string(s.status().message()), HasSubstr(segment));
      EXPECT_THAT(
          std::string(s.status().message()),
          HasSubstr(newer_segment ? "has format version 3, newer than this "
                                    "build reads (2)"
                                  : "has type 7, unknown to this build"));
      EXPECT_EQ(std::filesystem::file_size(segment), size);
    }
  }
}

}  // namespace
}  // namespace psdb
