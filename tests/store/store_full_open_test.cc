// A store restarted on a full disk (psdb/store.h, "Disk full and I/O
// errors"), through the fault-injecting file system. With a disk reserve
// (StoreOptions::disk_reserve_bytes): an open that the disk refuses gives
// the ballast's room back and opens writable; an open where the ballast
// cannot be written opens without it; either way every acknowledged row
// reads exactly, writes work, Stats() says the reserve is missing, and the
// reserve comes back once the disk has room for it. Without one: the store
// opens read-only and becomes writable by itself once the disk takes
// writes, with calls in flight across the switch. Exact checks use the
// counting-gradient table (tests/store/counting_table.h).
// tests/store/store_disk_full_test.cc checks the reserve on a real tmpfs.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "psdb/store.h"
#include "tests/store/counting_table.h"
#include "tests/store/fault_file_system.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

using ::psdb::testing::BatchKeys;
using ::psdb::testing::Counts;
using ::psdb::testing::ExpectAbsent;
using ::psdb::testing::ExpectCounts;
using ::psdb::testing::FaultFileSystem;
using ::psdb::testing::kBatch;
using ::psdb::testing::kBudget;
using ::psdb::testing::kDim;
using ::psdb::testing::kSlotBytes;
using ::psdb::testing::MakeSpec;
using ::psdb::testing::PushOnes;
using ::psdb::testing::PushOnesOnceResumed;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::SmallOptions;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

constexpr uint64_t kReserve = 2 << 20;

// The fault file system, with the room the ballast holds: deleting the
// whole ballast ends an injected full-disk fault (its room is free now),
// and while `ballast_refused` is set, creating the ballast fails with
// ENOSPC by itself (a disk with room for RocksDB's open, not for it).
class BallastFileSystem : public FaultFileSystem {
 public:
  std::atomic<bool> ballast_refused{false};
  // Whether deleting the ballast ends a full-disk fault.
  std::atomic<bool> ballast_frees_room{true};

  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    if (IsBallast(f) && ballast_refused.load()) {
      return rocksdb::IOStatus::NoSpace("no room for " + f);
    }
    return FaultFileSystem::NewWritableFile(f, o, r, dbg);
  }
  rocksdb::IOStatus DeleteFile(const std::string& f,
                               const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override {
    uint64_t size = 0;
    const bool whole =
        IsBallast(f) && GetFileSize(f, o, &size, dbg).ok() && size == kReserve;
    rocksdb::IOStatus s = FaultFileSystem::DeleteFile(f, o, dbg);
    if (s.ok() && whole && ballast_frees_room.load()) ClearFaults();
    return s;
  }

  // The ballast's size, or -1 if there is none.
  int64_t BallastSize(const std::string& store) {
    uint64_t size = 0;
    if (!GetFileSize(store + "/disk-reserve", rocksdb::IOOptions(), &size,
                     nullptr)
             .ok()) {
      return -1;
    }
    return static_cast<int64_t>(size);
  }

 private:
  static bool IsBallast(const std::string& f) {
    return absl::EndsWith(f, "/disk-reserve");
  }
};

class StoreFullOpenTest : public ::testing::Test {
 protected:
  StoreOptions Options() const {
    StoreOptions o = SmallOptions(kBudget);
    o.file_system = fs_;
    o.disk_reserve_bytes = reserve_;
    return o;
  }

  // Opens a new store, pushes two budgets of rows (about half evicted into
  // RocksDB) and some of them again, and leaves it open.
  std::unique_ptr<Store> OpenAndFill() {
    auto store = Store::Open(Options(), path_);
    EXPECT_OK(store);
    if (!store.ok()) return nullptr;
    EXPECT_OK((*store)->CreateTable(MakeSpec("emb", kDim)));
    const uint64_t batches = 2 * kBudget / kSlotBytes / kBatch;
    for (uint64_t b = 0; b < batches; ++b) {
      EXPECT_OK(PushOnes(**store, BatchKeys(1 + b, kBatch), &counts_));
    }
    EXPECT_OK(PushOnes(**store, BatchKeys(1, kBatch), &counts_));
    EXPECT_OK(PushOnes(**store, BatchKeys(batches, kBatch), &counts_));
    return *std::move(store);
  }

  // Pushes new rows and updates of old ones; then every row is exact.
  void PushesWork(Store& store) {
    ASSERT_OK(PushOnes(store, BatchKeys(1, kBatch), &counts_));
    for (uint64_t b = 0; b < 4; ++b) {
      ASSERT_OK(PushOnes(store, BatchKeys(500000 + b, kBatch), &counts_));
    }
    ExpectCounts(store, counts_);
  }

  // Flushes until the reserve is held again (Flush tries to write it at
  // most once per Store's retry interval), for up to 10 s.
  void ReserveComesBack(Store& store) {
    EXPECT_TRUE(WaitFor(
        [&] {
          EXPECT_OK(store.Flush());
          return store.Stats().disk_reserve_held_bytes == kReserve;
        },
        absl::Seconds(10)));
    EXPECT_EQ(fs_->BallastSize(path_), static_cast<int64_t>(kReserve));
  }

  uint64_t reserve_ = kReserve;
  ScratchDir dir_;
  const std::string path_ = dir_.Sub("store");
  std::shared_ptr<BallastFileSystem> fs_ =
      std::make_shared<BallastFileSystem>();
  Counts counts_;
};

TEST_F(StoreFullOpenTest, OpenWritesTheReserveAndStatsSayIt) {
  std::unique_ptr<Store> store = OpenAndFill();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Stats().disk_reserve_bytes, kReserve);
  EXPECT_EQ(store->Stats().disk_reserve_held_bytes, kReserve);
  EXPECT_EQ(fs_->BallastSize(path_), static_cast<int64_t>(kReserve));
  ASSERT_OK(store->Close());
  EXPECT_EQ(fs_->BallastSize(path_), static_cast<int64_t>(kReserve));
}

// The disk is full at the restart and the ballast is there (the last close
// did not need it): RocksDB's open is refused, the store deletes the
// ballast and opens writable. Stats say the reserve is missing; every row
// is exact; pushes work in the room given back; the reserve is written
// again once the disk has room.
TEST_F(StoreFullOpenTest, RestartOnAFullDiskUsesTheReserve) {
  ASSERT_OK(OpenAndFill()->Close());
  ASSERT_GT(counts_.size(), kBudget / kSlotBytes);  // more than fit
  ASSERT_EQ(fs_->BallastSize(path_), static_cast<int64_t>(kReserve));
  FaultFileSystem::Fault full;  // every write and sync: ENOSPC
  fs_->InjectFault(full);
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
    EXPECT_TRUE(fs_->fault_fired());  // RocksDB's open tried to write
    EXPECT_FALSE(store->read_only());
    EXPECT_EQ(fs_->BallastSize(path_), -1);
    EXPECT_EQ(store->Stats().disk_reserve_bytes, kReserve);
    EXPECT_EQ(store->Stats().disk_reserve_held_bytes, 0u);
    ExpectCounts(*store, counts_);
    ASSERT_NO_FATAL_FAILURE(PushesWork(*store));
    ReserveComesBack(*store);
    ASSERT_OK(store->Close());
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
  EXPECT_EQ(store->Stats().disk_reserve_held_bytes, kReserve);
  ExpectCounts(*store, counts_);
}

// The last close released the ballast (its flush failed until it did), and
// at the restart the disk has room for RocksDB's open but not for the
// ballast: the store opens writable without it, says so in Stats, and
// keeps trying (after flushes, rate limited) until the ballast fits.
TEST_F(StoreFullOpenTest, RestartWithoutRoomForTheReserveOpensWithoutIt) {
  {
    std::unique_ptr<Store> store = OpenAndFill();
    ASSERT_NE(store, nullptr);
    FaultFileSystem::Fault full;
    fs_->InjectFault(full);
    ASSERT_OK(store->Close());  // with the ballast's room
    EXPECT_TRUE(fs_->fault_fired());
  }
  ASSERT_EQ(fs_->BallastSize(path_), -1);
  fs_->ballast_refused = true;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
    EXPECT_FALSE(store->read_only());
    EXPECT_EQ(store->Stats().disk_reserve_bytes, kReserve);
    EXPECT_EQ(store->Stats().disk_reserve_held_bytes, 0u);
    EXPECT_EQ(fs_->BallastSize(path_), -1);
    ExpectCounts(*store, counts_);
    ASSERT_NO_FATAL_FAILURE(PushesWork(*store));
    ASSERT_OK(store->Flush());
    EXPECT_EQ(store->Stats().disk_reserve_held_bytes, 0u);
    fs_->ballast_refused = false;  // space returns
    ReserveComesBack(*store);
    ASSERT_OK(PushOnes(*store, BatchKeys(2, kBatch), &counts_));
    ASSERT_OK(store->Close());
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
  EXPECT_EQ(store->Stats().disk_reserve_held_bytes, kReserve);
  ExpectCounts(*store, counts_);
}

// The ballast's room is not enough for RocksDB's open (the disk stays
// full after it is deleted): the store opens read-only as one without a
// reserve does, every row exact, writes refused, the reserve reported
// missing.
TEST_F(StoreFullOpenTest, ReserveTooSmallForTheOpenFallsBackToReadOnly) {
  ASSERT_OK(OpenAndFill()->Close());
  fs_->ballast_frees_room = false;
  FaultFileSystem::Fault full;
  fs_->InjectFault(full);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
  EXPECT_TRUE(store->read_only());
  EXPECT_EQ(fs_->BallastSize(path_), -1);
  EXPECT_EQ(store->Stats().disk_reserve_bytes, kReserve);
  EXPECT_EQ(store->Stats().disk_reserve_held_bytes, 0u);
  ExpectCounts(*store, counts_);
  Counts refused = counts_;
  EXPECT_EQ(PushOnes(*store, BatchKeys(1, kBatch), &refused).code(),
            absl::StatusCode::kResourceExhausted);
  ExpectCounts(*store, counts_);
}

// Without a reserve the store opens read-only on the full disk: reads are
// exact, writes are refused and change nothing. Once the disk takes writes
// again, the next write makes it writable by itself (no reopen): every
// row exact, pushes that evict, flushes and new tables work, and the close
// keeps every acknowledged push.
TEST_F(StoreFullOpenTest, ReadOnlyStoreWritesOnceTheDiskTakesWrites) {
  reserve_ = 0;
  ASSERT_OK(OpenAndFill()->Close());
  FaultFileSystem::Fault full;
  fs_->InjectFault(full);
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
    EXPECT_TRUE(store->read_only());
    ExpectCounts(*store, counts_);
    const std::vector<uint64_t> fresh = BatchKeys(900000, kBatch);
    Counts refused = counts_;
    const absl::Status push = PushOnes(*store, fresh, &refused);
    EXPECT_EQ(push.code(), absl::StatusCode::kResourceExhausted) << push;
    EXPECT_THAT(push.message(),
                HasSubstr("Push refused: store " + path_ +
                          " was opened read-only because the disk refused "
                          "writes"));
    EXPECT_THAT(push.message(), HasSubstr("once the disk takes"));
    EXPECT_EQ(store->Flush().code(), absl::StatusCode::kResourceExhausted);
    // Refused on and on past the store's retry interval (1 s): the disk
    // still refuses the open's writes.
    EXPECT_FALSE(
        WaitFor([&] { return store->Flush().ok(); }, absl::Seconds(1.5)));
    EXPECT_TRUE(store->read_only());
    ExpectAbsent(*store, fresh);
    ExpectCounts(*store, counts_);

    fs_->ClearFaults();  // space returns
    ASSERT_OK(PushOnesOnceResumed(*store, fresh, &counts_));
    EXPECT_FALSE(store->read_only());
    ExpectCounts(*store, counts_);
    // Pushes that evict into RocksDB, a flush, a new table.
    for (uint64_t b = 0; b < 2 * kBudget / kSlotBytes / kBatch; ++b) {
      ASSERT_OK(PushOnes(*store, BatchKeys(600000 + b, kBatch), &counts_));
    }
    ASSERT_OK(PushOnes(*store, BatchKeys(1, kBatch), &counts_));
    ASSERT_OK(store->Flush());
    ASSERT_OK(store->CreateTable(MakeSpec("other", kDim)));
    ExpectCounts(*store, counts_);
    ASSERT_OK(store->Close());
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
  EXPECT_FALSE(store->read_only());
  ExpectCounts(*store, counts_);
  ASSERT_OK_AND_ASSIGN(TableSpec other, store->GetTable("other"));
  EXPECT_EQ(other.dim, kDim);
}

// Reads in flight while the store switches from read-only to writable
// (other threads pull, pull whole rows and scan, without pause): every
// answer is exact, none fails, and the read-only database they used stays
// open until they return (ASan would see it freed under them).
TEST_F(StoreFullOpenTest, ReadsInFlightAcrossTheSwitchAreExact) {
  reserve_ = 0;
  ASSERT_OK(OpenAndFill()->Close());
  FaultFileSystem::Fault full;
  fs_->InjectFault(full);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options(), path_));
  ASSERT_TRUE(store->read_only());
  const Counts before = counts_;  // the readers' keys: never pushed below
  std::vector<uint64_t> keys;
  for (const auto& [k, n] : before) keys.push_back(k);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<int64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      for (size_t i = r * kBatch; !stop.load();
           i = (i + 3 * kBatch) % keys.size()) {
        const std::vector<uint64_t> chunk(
            keys.begin() + i, keys.begin() + std::min(keys.size(), i + kBatch));
        std::vector<float> out(chunk.size() * kDim);
        RowBatch rows;
        absl::Status s = r == 2
                             ? store->PullRows("emb", chunk, &rows)
                             : store->Pull("emb", chunk, absl::MakeSpan(out));
        if (!s.ok()) {
          ADD_FAILURE() << s;
          ++bad;
          continue;
        }
        const std::vector<float>& got = r == 2 ? rows.values : out;
        for (size_t j = 0; j < chunk.size(); ++j) {
          if (got[j * kDim] != static_cast<float>(before.at(chunk[j])) ||
              got[j * kDim + kDim - 1] !=
                  static_cast<float>(before.at(chunk[j]))) {
            ++bad;
          }
        }
        ++reads;
      }
    });
  }
  // The switch happens with the readers running.
  ASSERT_TRUE(WaitFor([&] { return reads.load() >= 6; }, absl::Seconds(10)));
  fs_->ClearFaults();
  Counts pushed;
  ASSERT_OK(PushOnesOnceResumed(*store, BatchKeys(700000, kBatch), &pushed));
  EXPECT_FALSE(store->read_only());
  const int64_t at_switch = reads.load();
  for (uint64_t b = 1; b < 2 * kBudget / kSlotBytes / kBatch; ++b) {
    ASSERT_OK(PushOnes(*store, BatchKeys(700000 + b, kBatch), &pushed));
  }
  EXPECT_TRUE(WaitFor([&] { return reads.load() >= at_switch + 6; },
                      absl::Seconds(10)));
  stop = true;
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  ExpectCounts(*store, before);
  ExpectCounts(*store, pushed);
  ASSERT_OK(store->Close());
}

}  // namespace
}  // namespace psdb
