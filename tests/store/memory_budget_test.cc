// The memory budget's split (store/memory_budget.h) and that a store applies
// it: RocksDB's one cache and write buffer manager are sized from the budget
// and carry the memtables, and the memory tier evicts at the rest.
#include "store/memory_budget.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "psdb/store.h"
#include "rocksdb/cache.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"
#include "store/disk_tier.h"
#include "store/row_codec.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb::internal {
namespace {

using ::psdb::testing::MakeSpec;
using ::psdb::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr uint64_t kKiB = 1 << 10;
constexpr uint64_t kMiB = 1 << 20;

StoreOptions Budget(uint64_t budget, uint64_t rocksdb = 0) {
  StoreOptions o;
  o.memory_budget_bytes = budget;
  o.rocksdb_block_cache_bytes = rocksdb;
  return o;
}

void ExpectSplit(const StoreOptions& o, uint64_t cache, uint64_t memtables,
                 uint64_t rows) {
  const MemorySplit s = SplitMemoryBudget(o);
  EXPECT_EQ(s.rocksdb_cache_bytes, cache) << o.memory_budget_bytes;
  EXPECT_EQ(s.memtable_bytes, memtables) << o.memory_budget_bytes;
  EXPECT_EQ(s.row_bytes, rows) << o.memory_budget_bytes;
  EXPECT_EQ(s.rocksdb_cache_bytes + s.row_bytes, o.memory_budget_bytes);
}

TEST(MemoryBudgetTest, DerivedSplit) {
  // An eighth for RocksDB, half of it memtables, the rest rows.
  ExpectSplit(Budget(64 * kMiB), 8 * kMiB, 4 * kMiB, 56 * kMiB);
  ExpectSplit(Budget(1024 * kMiB), 128 * kMiB, 64 * kMiB, 896 * kMiB);
  // At most 256 MiB for RocksDB.
  ExpectSplit(Budget(4096 * kMiB), 256 * kMiB, 128 * kMiB, 3840 * kMiB);
  // At least 1 MiB once the budget allows it, at most half the budget.
  ExpectSplit(Budget(4 * kMiB), 1 * kMiB, 512 * kKiB, 3 * kMiB);
  ExpectSplit(Budget(1 * kMiB), 512 * kKiB, 256 * kKiB, 512 * kKiB);
  // A test-sized budget: the memtables' floor exceeds RocksDB's share.
  ExpectSplit(Budget(16 * kKiB), 8 * kKiB, kMinMemtableBytes, 8 * kKiB);
}

TEST(MemoryBudgetTest, ExplicitRocksdbShare) {
  ExpectSplit(Budget(64 * kMiB, 4 * kMiB), 4 * kMiB, 2 * kMiB, 60 * kMiB);
  ExpectSplit(Budget(2 * kMiB + 100, 1 * kMiB), 1 * kMiB, 512 * kKiB,
              1 * kMiB + 100);
  EXPECT_OK(ValidateMemoryBudget(Budget(64 * kMiB, 63 * kMiB)));
  EXPECT_THAT(ValidateMemoryBudget(Budget(64 * kMiB, 64 * kMiB)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MemoryBudgetTest, OpenRefusesAShareWithoutRoomForRowsAndCreatesNothing) {
  ScratchDir dir;
  const std::string path = dir.Sub("store");
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(Budget(8 * kMiB, 8 * kMiB), path);
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("rocksdb_block_cache_bytes"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(MemoryBudgetTest, DiskTierSizesItsCacheAndChargesMemtablesToIt) {
  ScratchDir dir;
  const StoreOptions options = Budget(64 * kMiB);
  const MemorySplit split = SplitMemoryBudget(options);
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> cfs;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DiskTier> disk,
                       DiskTier::Open(dir.Sub("db"), options, &cfs));
  ASSERT_OK_AND_ASSIGN(rocksdb::ColumnFamilyHandle * cf, disk->CreateCf("t"));

  EXPECT_EQ(disk->cache()->GetCapacity(), 8 * kMiB);
  ASSERT_NE(disk->write_buffer_manager(), nullptr);
  EXPECT_EQ(disk->write_buffer_manager()->buffer_size(), split.memtable_bytes);
  EXPECT_TRUE(disk->write_buffer_manager()->cost_to_cache());
  EXPECT_EQ(disk->db()->GetDBOptions().write_buffer_manager.get(),
            disk->write_buffer_manager());
  const rocksdb::Options cf_options = disk->db()->GetOptions(cf);
  EXPECT_EQ(cf_options.write_buffer_size, split.memtable_bytes);
  const auto* table =
      cf_options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->block_cache.get(), disk->cache());
  // Index and filter blocks stay in the table readers, charged to the cache.
  EXPECT_FALSE(table->cache_index_and_filter_blocks);
  for (rocksdb::CacheEntryRole role :
       {rocksdb::CacheEntryRole::kBlockBasedTableReader,
        rocksdb::CacheEntryRole::kFilterConstruction,
        rocksdb::CacheEntryRole::kFileMetadata}) {
    ASSERT_EQ(table->cache_usage_options.options_overrides.count(role), 1u);
    EXPECT_EQ(table->cache_usage_options.options_overrides.at(role).charged,
              rocksdb::CacheEntryRoleOptions::Decision::kEnabled);
  }

  // 2 MiB of rows (under the 4 MiB of memtables: no flush) are charged to
  // the cache, in the write buffer manager's dummy entries.
  const std::string value(1000, 'x');
  for (uint64_t batch = 0; batch < 16; ++batch) {
    rocksdb::WriteBatch wb;
    for (uint64_t i = 0; i < 128; ++i) {
      const std::string key = EncodeKey(batch * 128 + i);
      ASSERT_TRUE(wb.Put(cf, key, value).ok());
    }
    ASSERT_OK(disk->WriteRows(&wb));
  }
  const uint64_t memtables =
      disk->IntProperty(cf, "rocksdb.cur-size-all-mem-tables");
  EXPECT_GE(memtables, 2 * kMiB);
  EXPECT_GE(disk->write_buffer_manager()->memory_usage(), memtables);
  EXPECT_GE(disk->CacheUsage(), memtables);
  disk->DestroyCf(cf);
  for (auto& [name, handle] : cfs) disk->DestroyCf(handle);
}

TEST(MemoryBudgetTest, MemoryTierEvictsAtTheBudgetLessRocksdbsShare) {
  ScratchDir dir;
  // 3 MiB: 1 MiB for RocksDB, 2 MiB of rows.
  StoreOptions options = Budget(3 * kMiB, 1 * kMiB);
  options.background_eviction = false;  // evict exactly at the budget
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       Store::Open(options, dir.Sub("store")));
  ASSERT_OK(store->CreateTable(MakeSpec("t", 8)));
  constexpr uint64_t kSlotBytes = 80;  // 8 floats + header + slot metadata
  constexpr uint64_t kRows = 40000;    // 3.2 MB of rows
  std::vector<float> out(1000 * 8);
  for (uint64_t start = 0; start < kRows; start += 1000) {
    std::vector<uint64_t> keys;
    for (uint64_t k = start; k < start + 1000; ++k) keys.push_back(k);
    ASSERT_OK(store->Pull("t", keys, absl::MakeSpan(out)));
  }
  // The rows give way to what RocksDB pins beyond its 1 MiB (a memtable
  // filling while the one before it flushes, charged in 256 KiB units), and
  // that changes as flushes end. Once they are over (Flush; the rows
  // evicted from now on are clean and write nothing), new keys fill the
  // tier until a call evicts again: then it is full to within a call and
  // what that call evicted beyond its need, at a yield that holds still.
  ASSERT_OK(store->Flush());
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  while (store->Stats().disk_running_compactions > 0) {
    ASSERT_LT(absl::Now(), deadline) << "compactions still running";
    absl::SleepFor(absl::Milliseconds(10));
  }
  uint64_t pulled = kRows;
  const uint64_t evictions_before = store->Stats().tables[0].evictions;
  // 2 MiB of new rows at most: the yield cannot have dropped by more.
  while (store->Stats().tables[0].evictions == evictions_before &&
         pulled < kRows + 2 * kMiB / kSlotBytes) {
    std::vector<uint64_t> keys;
    for (uint64_t k = pulled; k < pulled + 1000; ++k) keys.push_back(k);
    ASSERT_OK(store->Pull("t", keys, absl::MakeSpan(out)));
    pulled += 1000;
  }
  const StoreStats stats = store->Stats();
  ASSERT_EQ(stats.tables.size(), 1u);
  const TableStats& t = stats.tables[0];
  ASSERT_GT(t.evictions, evictions_before);
  EXPECT_EQ(t.memory_bytes, t.memory_rows * kSlotBytes);
  EXPECT_LE(t.memory_bytes, 2 * kMiB - stats.memory_yielded_bytes);
  EXPECT_GT(t.memory_bytes,
            2 * kMiB - stats.memory_yielded_bytes - 2 * 1000 * kSlotBytes);
  EXPECT_EQ(t.memory_rows + t.evictions, pulled);
  EXPECT_EQ(stats.memory_budget_bytes, 3 * kMiB);
  // Rows plus what RocksDB's cache holds now.
  EXPECT_GE(stats.memory_used_bytes, t.memory_bytes);
}

// What RocksDB pins in its cache (memtables, the table readers' index and
// filter blocks, file metadata: each kind charged in 256 KiB units per
// column family) outgrows its 1 MiB share, and the rows give way so that
// the whole budget still holds.
TEST(MemoryBudgetTest, RowsYieldWhatRocksdbPinsBeyondItsShare) {
  ScratchDir dir;
  // 8 MiB: 512 KiB for RocksDB (256 KiB of memtables), the rest rows.
  const StoreOptions options = Budget(8 * kMiB, 512 * kKiB);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       Store::Open(options, dir.Sub("store")));
  ASSERT_OK(store->CreateTable(MakeSpec("t", 1)));
  constexpr uint64_t kKeys = 300000;  // 15.6 MB of rows, 2x the budget
  constexpr uint64_t kCall = 1000;
  constexpr uint64_t kSlotBytes = 52;  // 1 float + header + slot metadata
  std::vector<float> out(kCall);
  auto pull_new_keys = [&](uint64_t start) {
    std::vector<uint64_t> keys;
    for (uint64_t k = start; k < start + kCall; ++k) keys.push_back(k);
    ASSERT_OK(store->Pull("t", keys, absl::MakeSpan(out)));
  };
  for (uint64_t start = 0; start < kKeys; start += kCall) {
    pull_new_keys(start);
  }
  // Once the flushes and compactions that add charges behind the rows'
  // back are over, one more call yields to all of them: then the stated
  // bound (psdb/store.h) holds, the budget plus the rows of the call in
  // flight plus what RocksDB charged since (the call's evictions fill a
  // memtable, charged in 256 KiB units; a flush may follow).
  ASSERT_OK(store->Flush());
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  while (store->Stats().disk_running_compactions > 0) {
    ASSERT_LT(absl::Now(), deadline) << "compactions still running";
    absl::SleepFor(absl::Milliseconds(10));
  }
  pull_new_keys(kKeys);
  const StoreStats stats = store->Stats();
  EXPECT_LE(stats.memory_used_bytes,
            8 * kMiB + kCall * kSlotBytes + 512 * kKiB);
  // Rows alone would fill their 7.5 MiB: RocksDB pins more than its
  // 512 KiB (the index and filter blocks of 300,000 keys, about 440 KB,
  // file metadata and the memtables' charge, in 256 KiB units).
  EXPECT_GE(stats.memory_yielded_bytes, 512 * kKiB);
  EXPECT_LE(
      stats.tables[0].memory_bytes,
      8 * kMiB - 512 * kKiB - stats.memory_yielded_bytes + kCall * kSlotBytes);
  EXPECT_EQ(stats.tables[0].created, kKeys + kCall);
}

}  // namespace
}  // namespace psdb::internal
