// StoreOptions: how a psdb::Store (psdb/store.h) opens: its memory budget,
// eviction, durability, disk reserve, restore source and file system. Plain
// values; every field documents its default.
//
// Thread-safety: plain values.
#ifndef PSDB_STORE_OPTIONS_H_
#define PSDB_STORE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rocksdb {
class FileSystem;
}  // namespace rocksdb

namespace psdb {

enum class EvictionPolicy : int {
  kClock = 0,       // second-chance CLOCK over arena slots
  kSampledLru = 1,  // evict the least recently used of a small random sample
};

// What survives a crash (SIGKILL) between checkpoints.
enum class Durability : int {
  // Rows reach disk at eviction, Flush, Checkpoint and close; a crash loses
  // the updates since (the store reopens with the rows that had reached
  // RocksDB). No log, nothing on the push path.
  kCheckpoint = 0,
  // Write-ahead log (store/wal.h): a push, PutRows, DeleteRows or
  // CreateTable returns OK only after its record is written to the OS
  // (group commit: concurrent calls share one write), so every acknowledged
  // one survives SIGKILL; the next Open replays the records logged since the
  // last flush through the optimizer and gives bit-identical rows. A call
  // in flight at the kill is present whole or not at all. Surviving a power
  // cut as well needs StoreOptions::wal_sync. Not logged: admission counts
  // and pull-only frequency counts (in memory only, as always).
  kWal = 1,
};

// "checkpoint" or "wal" (flags); InvalidArgument naming both otherwise.
absl::StatusOr<Durability> ParseDurability(absl::string_view name);

struct StoreOptions {
  // Bytes the store's data may use in memory, across all tables: the memory
  // tier's rows (values + state + header + slot metadata) and RocksDB's one
  // block cache, which holds data blocks and to which the memtables
  // (rocksdb::WriteBufferManager with cost_to_cache) and the SST files'
  // index and filter blocks (kept by the table readers, about 0.75% of the
  // table's bytes on disk) are charged.
  // RocksDB gets R = rocksdb_block_cache_bytes, or when that is 0,
  // min(clamp(budget / 8, 1 MiB, 256 MiB), budget / 2); memtables are
  // flushed once together they reach max(R / 2, 256 KiB); rows get
  // budget - R, less what RocksDB pins beyond R
  // (StoreStats::memory_yielded_bytes). A 64 MiB budget: 8 MiB for RocksDB (4
  // MiB of memtables), 56 MiB of rows; 1 GiB: 128 MiB (64 MiB), 896 MiB.
  // Outside it (docs/operations/memory.md): the key index (about 16 bytes per
  // resident row), admission counters, per-request buffers (gRPC, batches in
  // flight: about 2 x the request bytes per concurrent call), thread stacks,
  // malloc's free lists and the code: a base of about 100 MiB for a
  // ps-server. So is the OS page cache of the SST files, which RSS does not
  // count unless rocksdb_mmap_reads maps it into the process.
  // Default: 1 GiB
  uint64_t memory_budget_bytes = 1ull << 30;
  // Default: kClock
  EvictionPolicy eviction = EvictionPolicy::kClock;
  // Lock stripes of the key index; more stripes, less contention.
  // Default: 64
  int index_stripes = 64;
  // Largest number of keys one Pull/Push/PullRows/PutRows may carry; larger
  // requests fail with ResourceExhausted. Default: 1 << 20
  size_t max_batch_keys = 1 << 20;
  // A background thread keeps about 1/64 of the budget (at most 256 MiB)
  // free by evicting cold rows (writing the dirty ones to RocksDB) before
  // they are needed, so pulls and pushes that miss rarely evict, or write,
  // on the request path. Off: eviction happens only on the request path,
  // when an insert would exceed the budget. Default: true
  bool background_eviction = true;
  // RocksDB's share of memory_budget_bytes: the capacity of its block cache,
  // memtables included (see memory_budget_bytes). 0: derived from the
  // budget. Set, it must be smaller than memory_budget_bytes (Open fails
  // with InvalidArgument otherwise). Default: 0
  uint64_t rocksdb_block_cache_bytes = 0;
  // Read SST files through mmap (RocksDB's allow_mmap_reads) instead of
  // pread into the block cache: misses cost no read syscall and no copy,
  // but every SST page a read or a compaction touched stays mapped and
  // counts in the process's RSS, outside memory_budget_bytes (clean page
  // cache, which the kernel reclaims under pressure, yet an RSS that can
  // reach the size of the table: 543 MiB of a 719 MiB peak at a 64 MiB
  // budget in docs/benchmarks/memory.md). Default: false
  bool rocksdb_mmap_reads = false;
  // Create <path> if it does not exist. Default: true
  bool create_if_missing = true;
  // If set and <path>/db does not exist, the store starts from this
  // checkpoint directory (one containing MANIFEST.json, or a root whose
  // newest complete checkpoint is used): its files are hard-linked (copied
  // across filesystems) into <path>/db, the tables come back with their
  // specs and steps, and the memory tier warms lazily. The restore trusts
  // nothing it can check: before the copy is put in place, its column
  // families and table specs must be exactly the manifest's tables and
  // every table's rows, counted by reading them, the manifest's count for
  // the shard (so every SST file is opened and every data block read and
  // checksummed). A mismatch or unreadable file fails Open with DataLoss
  // naming the checkpoint, shard and table (and both counts), and leaves
  // <path> as it was before the attempt (see Open). Default: ""
  std::string restore_from;
  // Shard id recorded in checkpoints (cluster servers set their rank).
  // Default: 0
  int shard_id = 0;
  // Bytes of disk the store holds back in a ballast file, <path>/disk-reserve
  // (written at Open; the Open of a new store fails with ResourceExhausted
  // if the disk cannot hold it, an existing store opens without it and
  // writes it once the disk has room: docs/operations/disk-full.md).
  // A Close whose flush fails deletes it and flushes again: a clean
  // shutdown then survives a disk that something else filled, as long as
  // what it must write (the dirty rows and the memtables) fits in the
  // reserve. An Open that the full disk refuses deletes it and opens
  // again (a reserve smaller than what that open writes, a new MANIFEST
  // preallocated to 64 KiB and an OPTIONS file, cannot make room for it).
  // 0: no reserve. Default: 0
  uint64_t disk_reserve_bytes = 0;
  // While the ballast is missing, the least time between two tries to
  // write it back (each a free-space check, and a write when there is
  // room). Default: 1 s
  absl::Duration disk_reserve_retry_interval = absl::Seconds(1);
  // The file system every file of the store goes through: RocksDB's (its
  // Env is built over it) and psdb's own. Tests inject faults here
  // (tests/store/fault_file_system.h). Default: nullptr, the local file
  // system (rocksdb::FileSystem::Default())
  std::shared_ptr<rocksdb::FileSystem> file_system;
  // What survives a crash: see Durability. The log lives in <path>/wal/.
  // A store opened with kCheckpoint that finds a log left by a kWal run
  // replays it, flushes and removes it. Default: kCheckpoint
  Durability durability = Durability::kCheckpoint;
  // With kWal: fsync each group of log records before acknowledging it, so
  // acknowledged updates survive a power cut too, not only a process kill.
  // Default: false
  bool wal_sync = false;
};

}  // namespace psdb

#endif  // PSDB_STORE_OPTIONS_H_
