// Store on a disk that fills up (psdb/store.h, "Disk full and I/O errors"),
// on a real small tmpfs: pushes that need eviction are refused with
// RESOURCE_EXHAUSTED and change nothing, memory stays within its bound,
// reads keep working, writes resume without a reopen once space returns
// (through the headroom rule, through RocksDB's stopped writes and
// DiskTier's Resume, and for a store restarted read-only on the full
// disk), a clean close keeps every acknowledged push, and the disk reserve
// gives a restart on a full disk its room.
// Exact checks use a counting-gradient table: SGD, learning rate 1, zero
// init, every push of gradient -1 adds exactly 1 to each value of its row.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "psdb/store.h"
#include "tests/store/counting_table.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/small_tmpfs.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

using ::psdb::testing::BatchKeys;
using ::psdb::testing::Counts;
using ::psdb::testing::ExpectAbsent;
using ::psdb::testing::ExpectCounts;
using ::psdb::testing::kBatch;
using ::psdb::testing::kBudget;
using ::psdb::testing::kDim;
using ::psdb::testing::kSlotBytes;
using ::psdb::testing::MakeSpec;
using ::psdb::testing::PushOnes;
using ::psdb::testing::PushOnesOnceResumed;
using ::psdb::testing::RowBytes;
using ::psdb::testing::RowsBound;
using ::psdb::testing::SmallOptions;
using ::psdb::testing::SmallTmpfs;
using ::psdb::testing::WaitFor;
using ::testing::AnyOf;
using ::testing::HasSubstr;

#define MOUNT_OR_SKIP(var, bytes)                    \
  auto var##_or = SmallTmpfs::Mount(bytes);          \
  if (absl::IsPermissionDenied(var##_or.status())) { \
    GTEST_SKIP() << var##_or.status().message();     \
  }                                                  \
  ASSERT_OK(var##_or);                               \
  std::unique_ptr<SmallTmpfs> var = *std::move(var##_or)

// Pushes batches of new keys until one is refused; returns the refused
// batch (empty if none was within `max_batches`).
std::vector<uint64_t> PushUntilRefused(Store& store, uint64_t* next_key,
                                       Counts* counts, int max_batches,
                                       absl::Status* refusal) {
  for (int b = 0; b < max_batches; ++b) {
    std::vector<uint64_t> keys = BatchKeys(*next_key, kBatch);
    *next_key += 1;
    const absl::Status s = PushOnes(store, keys, counts);
    EXPECT_LE(RowBytes(store), RowsBound());
    if (!s.ok()) {
      *refusal = s;
      return keys;
    }
  }
  return {};
}

int64_t TableStep(const Store& store) { return store.Stats().tables[0].step; }

// On a real file system RocksDB's compactions take and give back space at
// moments the test cannot control: a refusal comes from the headroom rule
// ("bytes free") or from RocksDB's own ENOSPC, and a refused push tried
// again may go through once a compaction ended. What must hold whatever
// the timing: refusals change nothing, reads are exact, writes resume
// without a reopen, and the close on the full disk keeps every
// acknowledged row (it waits for the compactions it races: before, it
// failed about one run in three under load).
// tests/store/store_fault_test.cc checks the same contract deterministically
// through the fault file system, and tests/tools/ps_server_disk_full_test.cc
// with a real ps-server.
TEST(StoreDiskFullTest, FullDiskRefusesPushesKeepsReadsAndResumesWithSpace) {
  MOUNT_OR_SKIP(fs, 40 << 20);
  // Room to give back later.
  ASSERT_OK_AND_ASSIGN(uint64_t filler, fs->Fill("filler", 8 << 20));
  ASSERT_EQ(filler, 8u << 20);
  const std::string path = fs->Sub("store");
  const StoreOptions opts = SmallOptions(kBudget);
  Counts counts;
  uint64_t next_key = 1;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
    ASSERT_OK(store->CreateTable(MakeSpec("emb", kDim)));
    absl::Status refusal;
    std::vector<uint64_t> refused =
        PushUntilRefused(*store, &next_key, &counts, 2000, &refusal);
    ASSERT_FALSE(refused.empty()) << "the disk never filled";
    EXPECT_EQ(refusal.code(), absl::StatusCode::kResourceExhausted) << refusal;
    EXPECT_THAT(refusal.message(),
                HasSubstr("table emb: memory tier full and the disk refuses "
                          "writes"));
    EXPECT_THAT(refusal.message(), AnyOf(HasSubstr("bytes free"),
                                         HasSubstr("No space left on device")));
    EXPECT_GT(store->Stats().tables[0].disk_write_errors, 0u);
    // The refused push changed nothing: no row.
    ExpectAbsent(*store, refused);
    // Tried again: refused again, changing nothing (no row, no step), or
    // through if a compaction gave space back meanwhile (then counted).
    const int64_t step = TableStep(*store);
    const absl::Status again = PushOnes(*store, refused, &counts);
    if (!again.ok()) {
      EXPECT_EQ(again.code(), absl::StatusCode::kResourceExhausted) << again;
      EXPECT_EQ(TableStep(*store), step);
      ExpectAbsent(*store, refused);
      // A pull that would create rows is refused too, unless the memory
      // tier has room by then without an eviction (its budget grows back
      // as RocksDB unpins what the rows yielded): then the rows are
      // created, zeros, and a close must keep them like any other.
      std::vector<float> out(refused.size() * kDim);
      const absl::Status pulled =
          store->Pull("emb", refused, absl::MakeSpan(out));
      if (pulled.ok()) {
        for (uint64_t k : refused) counts.emplace(k, 0);
      } else {
        EXPECT_EQ(pulled.code(), absl::StatusCode::kResourceExhausted)
            << pulled;
        ExpectAbsent(*store, refused);
      }
    }
    // Reads keep working, exact, within the memory bound.
    ExpectCounts(*store, counts);
    EXPECT_LE(RowBytes(*store), RowsBound());

    // Space comes back: the same push goes through, no reopen (once the
    // store's rate-limited Resume of RocksDB ran, if RocksDB itself hit
    // the full disk).
    ASSERT_OK(fs->Remove("filler"));
    ASSERT_OK(PushOnesOnceResumed(*store, refused, &counts));
    // And pushes go on until the disk is full again.
    refused = PushUntilRefused(*store, &next_key, &counts, 2000, &refusal);
    ASSERT_FALSE(refused.empty()) << "the disk never filled again";
    EXPECT_EQ(refusal.code(), absl::StatusCode::kResourceExhausted) << refusal;
    // Updates of resident rows need no room: they are accepted, and the
    // close below must keep them too.
    std::vector<uint64_t> resident;
    ASSERT_OK_AND_ASSIGN(resident, store->ResidentKeys("emb", 64));
    ASSERT_FALSE(resident.empty());
    ASSERT_OK(PushOnes(*store, resident, &counts));
    // A clean close on the full disk keeps everything: the headroom rule
    // left room for the dirty rows and the memtables, and the close waits
    // out a compaction whose output took that room.
    ASSERT_OK(store->Close());
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
  ExpectCounts(*store, counts);
}

// After a memtable flush failed with ENOSPC and DB::Resume() succeeded,
// RocksDB 7.8 keeps its "DB stopped" flag, and a waited DB::Flush returns
// before the flush ran: without DiskTier's own wait (AwaitFlushed), the
// close below stopped RocksDB mid-flush and the reopen found the rows
// written after the resume gone (zeros: created fresh by the pull).
TEST(StoreDiskFullTest, WritesStoppedByRocksDbResumeWhenSpaceReturns) {
  MOUNT_OR_SKIP(fs, 32 << 20);
  const std::string path = fs->Sub("store");
  const StoreOptions opts = SmallOptions(kBudget);
  Counts counts;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
  ASSERT_OK(store->CreateTable(MakeSpec("emb", kDim)));
  // Three budgets of rows: most are evicted into RocksDB's memtable.
  for (uint64_t b = 0; b < 3 * kBudget / kSlotBytes / kBatch; ++b) {
    ASSERT_OK(PushOnes(*store, BatchKeys(1 + b, kBatch), &counts));
  }
  // Something else fills the disk: the memtable flush fails with ENOSPC
  // and RocksDB stops every write. Filled once no compaction runs: one
  // ending after the fill would give the flush its inputs' room.
  ASSERT_TRUE(WaitFor(
      [&] {
        const StoreStats stats = store->Stats();
        return stats.disk_running_compactions == 0 &&
               !stats.tables[0].disk_compaction_pending;
      },
      absl::Seconds(60)));
  ASSERT_OK(fs->Fill("filler").status());
  const absl::Status flushed = store->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kResourceExhausted) << flushed;
  EXPECT_THAT(flushed.message(), HasSubstr("No space left on device"));
  // Reads work (rows in memory and in the memtable).
  ExpectCounts(*store, counts);
  // Every resident row is made dirty (updates of resident rows need no
  // room): a push of new keys now needs a write, and is refused.
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> resident,
                       store->ResidentKeys("emb", 1 << 20));
  ASSERT_OK(PushOnes(*store, resident, &counts));
  const std::vector<uint64_t> fresh = BatchKeys(1000, kBatch);
  const absl::Status refused = PushOnes(*store, fresh, &counts);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("table emb"));
  ExpectAbsent(*store, fresh);
  // Space returns: the next push that needs room resumes RocksDB (its
  // memtable reaches a file) and goes through; so does a flush.
  ASSERT_OK(fs->Remove("filler"));
  ASSERT_OK(PushOnesOnceResumed(*store, fresh, &counts));
  ASSERT_OK(store->Flush());
  for (uint64_t b = 0; b < 8; ++b) {
    ASSERT_OK(PushOnes(*store, BatchKeys(2000 + b, kBatch), &counts));
  }
  ExpectCounts(*store, counts);
  ASSERT_OK(store->Close());
  ASSERT_OK_AND_ASSIGN(store, Store::Open(opts, path));
  ExpectCounts(*store, counts);
}

// The close of a store whose disk something else filled: without a reserve
// it says so and loses exactly what was not in files; with one, it deletes
// the ballast, flushes and keeps every push.
TEST(StoreDiskFullTest, CloseOnADiskFilledByOthers) {
  for (const uint64_t reserve : {uint64_t{0}, uint64_t{4} << 20}) {
    SCOPED_TRACE(absl::StrCat("disk_reserve_bytes ", reserve));
    MOUNT_OR_SKIP(fs, 24 << 20);
    const std::string path = fs->Sub("store");
    StoreOptions opts = SmallOptions(kBudget);
    opts.disk_reserve_bytes = reserve;
    Counts counts;
    const std::vector<uint64_t> keys = BatchKeys(1, kBatch);
    {
      ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
      ASSERT_OK(store->CreateTable(MakeSpec("emb", kDim)));
      ASSERT_OK(PushOnes(*store, keys, &counts));
      ASSERT_OK(store->Flush());                   // in files: counts 1
      ASSERT_OK(PushOnes(*store, keys, &counts));  // resident: dirty only
      ASSERT_OK(fs->Fill("filler").status());
      const absl::Status closed = store->Close();
      if (reserve == 0) {
        EXPECT_FALSE(closed.ok());
        EXPECT_THAT(closed.message(), HasSubstr("could not flush"));
        EXPECT_THAT(closed.message(), HasSubstr(path));
        for (auto& [k, n] : counts) n = 1;  // the stated loss, exactly
      } else {
        EXPECT_OK(closed);
      }
      EXPECT_EQ(store->Close().code(), closed.code());  // idempotent
      EXPECT_EQ(
          store->Push("emb", keys, std::vector<float>(kBatch * kDim)).code(),
          absl::StatusCode::kFailedPrecondition);
    }
    if (reserve > 0) {
      // The close used the ballast's room, and something takes what it
      // left free: the ballast cannot be written again, and RocksDB's open
      // is refused with no ballast to give room back, so the store opens
      // read-only, every row exact, the reserve reported missing.
      ASSERT_OK(fs->Fill("filler2").status());
      ASSERT_OK_AND_ASSIGN(auto full, Store::Open(opts, path));
      EXPECT_TRUE(full->read_only());
      EXPECT_EQ(full->Stats().disk_reserve_bytes, reserve);
      EXPECT_EQ(full->Stats().disk_reserve_held_bytes, 0u);
      ExpectCounts(*full, counts);
      ASSERT_OK(full->Close());
      ASSERT_OK(fs->Remove("filler2"));
    }
    ASSERT_OK(fs->Remove("filler"));
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
    EXPECT_FALSE(store->read_only());
    // Room again: the open writes the ballast back.
    EXPECT_EQ(store->Stats().disk_reserve_held_bytes, reserve);
    ExpectCounts(*store, counts);
  }
}

// A restart on a disk that something else filled while the store was
// down, its ballast in place (the last close did not need it): RocksDB's
// open is refused, the store deletes the ballast and opens writable in its
// room. Every row is exact; pushes work within that room (the headroom
// rule still guards the close); the ballast is not written back while
// the disk lacks room for it plus the headroom, and is once space returns.
TEST(StoreDiskFullTest, RestartOnAFullDiskUsesTheReserve) {
  constexpr uint64_t kReserve = 4 << 20;
  MOUNT_OR_SKIP(fs, 32 << 20);
  const std::string path = fs->Sub("store");
  StoreOptions opts = SmallOptions(kBudget);
  opts.disk_reserve_bytes = kReserve;
  opts.disk_reserve_retry_interval = absl::ZeroDuration();  // every flush
  Counts counts;
  uint64_t next_key = 1;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
    ASSERT_OK(store->CreateTable(MakeSpec("emb", kDim)));
    EXPECT_EQ(store->Stats().disk_reserve_held_bytes, kReserve);
    // Two budgets of rows: about half are evicted into RocksDB.
    for (; next_key <= 2 * kBudget / kSlotBytes / kBatch; ++next_key) {
      ASSERT_OK(PushOnes(*store, BatchKeys(next_key, kBatch), &counts));
    }
    ASSERT_OK(PushOnes(*store, BatchKeys(1, kBatch), &counts));
    ASSERT_OK(store->Close());
  }
  ASSERT_OK(fs->Fill("filler").status());
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
    EXPECT_FALSE(store->read_only());
    EXPECT_EQ(store->Stats().disk_reserve_bytes, kReserve);
    EXPECT_EQ(store->Stats().disk_reserve_held_bytes, 0u);
    ExpectCounts(*store, counts);
    // Updates of existing rows and a batch of new ones (room in memory).
    ASSERT_OK(PushOnes(*store, BatchKeys(2, kBatch), &counts));
    ASSERT_OK(PushOnes(*store, BatchKeys(next_key++, kBatch), &counts));
    ASSERT_OK(store->Flush());
    // A flush tries the ballast again: the disk has less room than it
    // plus the headroom, so it stays missing and the disk is not filled
    // by it.
    const uint64_t free_before = fs->FreeBytes();
    ASSERT_OK(store->Flush());
    EXPECT_EQ(store->Stats().disk_reserve_held_bytes, 0u);
    EXPECT_LT(free_before, kReserve + kReserve / 8 + (1 << 20));
    ExpectCounts(*store, counts);
    // Space returns: a flush writes the ballast back.
    ASSERT_OK(fs->Remove("filler"));
    EXPECT_TRUE(::psdb::testing::WaitFor(
        [&] {
          EXPECT_OK(store->Flush());
          return store->Stats().disk_reserve_held_bytes == kReserve;
        },
        absl::Seconds(10)));
    ASSERT_OK(PushOnes(*store, BatchKeys(3, kBatch), &counts));
    ASSERT_OK(store->Close());
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
  EXPECT_EQ(store->Stats().disk_reserve_held_bytes, kReserve);
  ExpectCounts(*store, counts);
}

// A restart on a disk that something else filled while the store was
// down, without a reserve: the store opens read-only (reads exact, writes
// refused); once the filler is deleted, writes go through without a
// reopen, and a close and reopen keep every acknowledged push.
TEST(StoreDiskFullTest, ReadOnlyRestartWritesOnceSpaceReturns) {
  MOUNT_OR_SKIP(fs, 32 << 20);
  const std::string path = fs->Sub("store");
  const StoreOptions opts = SmallOptions(kBudget);
  Counts counts;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
    ASSERT_OK(store->CreateTable(MakeSpec("emb", kDim)));
    for (uint64_t b = 1; b <= 2 * kBudget / kSlotBytes / kBatch; ++b) {
      ASSERT_OK(PushOnes(*store, BatchKeys(b, kBatch), &counts));
    }
    ASSERT_OK(store->Close());
  }
  ASSERT_OK(fs->Fill("filler").status());
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
    EXPECT_TRUE(store->read_only());
    ExpectCounts(*store, counts);
    const std::vector<uint64_t> fresh = BatchKeys(100000, kBatch);
    Counts refused = counts;
    const absl::Status push = PushOnes(*store, fresh, &refused);
    EXPECT_EQ(push.code(), absl::StatusCode::kResourceExhausted) << push;
    EXPECT_THAT(push.message(), HasSubstr("No space left on device"));
    ExpectAbsent(*store, fresh);
    ASSERT_OK(fs->Remove("filler"));  // space returns
    ASSERT_OK(PushOnesOnceResumed(*store, fresh, &counts));
    EXPECT_FALSE(store->read_only());
    for (uint64_t b = 0; b < 2 * kBudget / kSlotBytes / kBatch; ++b) {
      ASSERT_OK(PushOnes(*store, BatchKeys(200000 + b, kBatch), &counts));
    }
    ASSERT_OK(PushOnes(*store, BatchKeys(1, kBatch), &counts));
    ExpectCounts(*store, counts);
    ASSERT_OK(store->Close());
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(opts, path));
  EXPECT_FALSE(store->read_only());
  ExpectCounts(*store, counts);
}

}  // namespace
}  // namespace psdb
