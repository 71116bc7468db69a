// MemorySplit: how a store shares StoreOptions::memory_budget_bytes between
// its memory tier (rows) and RocksDB (one block cache that also carries the
// memtables, charged to it through a rocksdb::WriteBufferManager). Internal
// to psdb_store; the rule is documented for users at
// StoreOptions::memory_budget_bytes (psdb/store.h).
//
//   rocksdb = rocksdb_block_cache_bytes if set, otherwise
//             min(clamp(budget / 8, 1 MiB, 256 MiB), budget / 2)
//   memtables (WriteBufferManager::buffer_size) =
//             max(rocksdb / 2, kMinMemtableBytes), charged to the cache
//   rows    = budget - rocksdb, less what RocksDB pins beyond its share at
//             each eviction round (Store::Impl::YieldToRocksdb)
//
// Thread-safety: pure functions.
#ifndef PSDB_STORE_MEMORY_BUDGET_H_
#define PSDB_STORE_MEMORY_BUDGET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "psdb/store_options.h"

namespace psdb::internal {

// RocksDB cannot flush memtables smaller than this without flushing on
// nearly every write (and stalling on the L0 files that makes): the floor of
// the memtables' share, even where that exceeds the cache (tiny test
// budgets).
inline constexpr uint64_t kMinMemtableBytes = 256 << 10;

struct MemorySplit {
  // Capacity of the one rocksdb::Cache of the store: data, index and filter
  // blocks, and the memtables' charge.
  uint64_t rocksdb_cache_bytes = 0;
  // The WriteBufferManager's buffer size: RocksDB flushes a memtable once
  // all of the store's memtables together reach about this.
  uint64_t memtable_bytes = 0;
  // What the memory tier's rows may use (its budget, for eviction).
  uint64_t row_bytes = 0;
};

// The split of options.memory_budget_bytes (see the file comment).
// REQUIRES: ValidateMemoryBudget(options) is OK, or the result is clamped
// (row_bytes 0 when the RocksDB share takes the whole budget).
MemorySplit SplitMemoryBudget(const StoreOptions& options);

// InvalidArgument if an explicit rocksdb_block_cache_bytes leaves nothing of
// memory_budget_bytes for rows.
absl::Status ValidateMemoryBudget(const StoreOptions& options);

}  // namespace psdb::internal

#endif  // PSDB_STORE_MEMORY_BUDGET_H_
