#include "store/memory_budget.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psdb::internal {
namespace {

// The derived RocksDB share: an eighth of the budget gives a 1 GiB budget
// 128 MiB, i.e. 64 MiB of memtables (RocksDB's default write_buffer_size,
// what the store used before the budget covered RocksDB) and at least as
// much for blocks; never below 1 MiB unless the budget is under 2 MiB, never
// above 256 MiB (past that, rows use memory better than blocks do: a
// memory-tier hit costs no block search and no decoding).
constexpr uint64_t kMinDerivedRocksdb = 1 << 20;
constexpr uint64_t kMaxDerivedRocksdb = 256ull << 20;

}  // namespace

MemorySplit SplitMemoryBudget(const StoreOptions& options) {
  const uint64_t budget = options.memory_budget_bytes;
  MemorySplit split;
  if (options.rocksdb_block_cache_bytes != 0) {
    split.rocksdb_cache_bytes =
        std::min(options.rocksdb_block_cache_bytes, budget);
  } else {
    split.rocksdb_cache_bytes =
        std::min(std::clamp(budget / 8, kMinDerivedRocksdb, kMaxDerivedRocksdb),
                 budget / 2);
  }
  split.memtable_bytes =
      std::max(split.rocksdb_cache_bytes / 2, kMinMemtableBytes);
  split.row_bytes = budget - split.rocksdb_cache_bytes;
  return split;
}

absl::Status ValidateMemoryBudget(const StoreOptions& options) {
  if (options.rocksdb_block_cache_bytes != 0 &&
      options.rocksdb_block_cache_bytes >= options.memory_budget_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rocksdb_block_cache_bytes (", options.rocksdb_block_cache_bytes,
        ") is part of memory_budget_bytes (", options.memory_budget_bytes,
        ") and must be smaller, to leave room for rows"));
  }
  return absl::OkStatus();
}

}  // namespace psdb::internal
