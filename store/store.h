// Store: psdb's embedded, tiered parameter engine, opened in-process on a
// local directory the way an application opens RocksDB.
//
//   psdb::StoreOptions options;
//   options.memory_budget_bytes = 2ull << 30;
//   PSDB_ASSIGN_OR_RETURN(std::unique_ptr<psdb::Store> store,
//                         psdb::Store::Open(options, "/data/psdb"));
//
// Tiers: hot rows live in a memory tier (striped key -> slot index, rows in a
// slab arena, a byte budget, CLOCK or sampled-LRU eviction); the rest live in
// RocksDB under <path>/db, one column family per table, keys and rows encoded
// as in store/row_codec.h. Dirty rows reach RocksDB on eviction (WriteBatch)
// and at checkpoint; a background evictor keeps part of the budget free so
// that misses rarely evict on the request path. Misses are read with
// MultiGet from memory-mapped SST files. A table larger than the budget is
// normal: it runs at the speed its hot-set hit rate allows.
//
// Directory layout:
//   <path>/db/                 the live RocksDB database (table specs are
//                              stored in its default column family)
// Checkpoint layout, under the root directory given to Checkpoint():
//   <root>/ckpt-<step>-<seq>/MANIFEST.json   written last, by atomic rename
//   <root>/ckpt-<step>-<seq>/shard-<id>/     a rocksdb::Checkpoint (hard links)
// A checkpoint directory without MANIFEST.json does not exist: readers ignore
// it and the next Checkpoint() removes it.
//
// Decisions a user can observe (details in store/table.h, store/admission.h,
// store/store_impl.h):
//  - Table step = the largest push step seen (PushOptions::step, or +1 per
//    push when 0). Steps and exact row counts are persisted at Flush(),
//    Checkpoint() and close, and restored from a checkpoint's manifest.
//  - TTL compares a row's last_update_step with the table step at
//    checkpoint time: rows with last_update_step + ttl_steps < step are
//    deleted from both tiers. Rows never updated (last_update_step 0) are
//    dropped too once step > ttl_steps; they re-initialize identically.
//  - Admission counts are in memory only: they do not survive a restart.
//  - Row writes skip RocksDB's WAL; durability comes from checkpoints (and a
//    clean close, which flushes everything). After a crash the live
//    directory opens cleanly with the rows that had reached RocksDB.
//  - A memory-tier hit never touches RocksDB. The budget may be exceeded
//    briefly by the rows of batches in flight (bound below).
//  - Bad input (unknown table, sizes, non-finite values, empty or oversized
//    batches, bad names) fails before anything changes. A corrupt stored
//    row fails the call with DataLoss naming table and key; a push that
//    needed it applies nothing.
//
// Disk full and I/O errors (issue 16's contract; the opt-in write-ahead
// log, StoreOptions::durability, and restore validation are written by
// their own parts and described with them):
//  - An eviction write the disk refuses is never swallowed: a dirty row
//    leaves memory only once its write succeeded. Refused: ENOSPC or EIO
//    from RocksDB, RocksDB's writes stopped by a background error (a failed
//    memtable flush), or the headroom rule: an eviction is written only if
//    the file system keeps room, after it, for RocksDB's memtables plus the
//    memory tier's rows (+1/8, +1 MiB), which is what a close must write.
//    So when the store itself fills the disk, pushes start failing while a
//    clean shutdown can still write everything.
//  - While the disk refuses, a Push or PutRows that needs room in a full
//    memory tier, and a Pull or PullRows that would create a row, fail
//    with RESOURCE_EXHAUSTED (full disk; UNAVAILABLE for another I/O
//    error) "table T: memory tier full and the disk refuses writes ...:
//    <cause>" and change nothing (no row, no value, no step). Updates of
//    resident rows and reads of existing rows keep working; rows read from
//    disk are then served without being cached. Bound: memory_used <=
//    budget + the rows of the calls in flight (each at most
//    max_batch_keys rows); a call that is refused adds nothing.
//    TableStats::disk_write_errors counts refused eviction writes.
//  - Once space returns, writes succeed without a restart: the next
//    eviction passes the headroom rule; after a RocksDB background error
//    the store calls DB::Resume() itself (RocksDB's own recovery is turned
//    off: it waits for write_buffer_size of free space). After a resume,
//    RocksDB 7.8's waited flushes return before the flush ran (a RocksDB
//    bug fixed in 8.9); the store waits for its flushes itself, so Flush,
//    checkpoints and Close still put every memtable in files.
//  - Close() (and the destructor) flush everything and report failure:
//    a close that cannot flush retries, deletes the disk_reserve_bytes
//    ballast if there is one and retries, and otherwise returns the error
//    naming the dirty rows and memtable bytes that are not in files. The
//    guarantee: every acknowledged update survives a clean close if the
//    disk can take what the close writes, which the headroom rule ensures
//    unless something else filled the disk, and the reserve extends to that
//    case up to its size. Beyond that bound the lost rows are exactly those
//    not yet in files (dirty rows and memtables, WAL-less); the data
//    directory then opens as after a crash (checkpoint rows + rows flushed
//    since, row counts recounted). Metadata writes skip RocksDB's WAL and
//    flush instead (a failed WAL append stops RocksDB 7.8 until a reopen).
//
// Thread-safety: every method is thread-safe. Pulls and pushes on different
// keys proceed in parallel (one lock per index stripe); operations on the same
// key are serialized. Checkpoint() may run concurrently with pulls and pushes;
// it captures every update that completed before it was called.
#ifndef PSDB_STORE_STORE_H_
#define PSDB_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "store/parameter_client.h"
#include "store/row.h"
#include "store/table_spec.h"

namespace rocksdb {
class FileSystem;
}  // namespace rocksdb

namespace psdb {

enum class EvictionPolicy : int {
  kClock = 0,       // second-chance CLOCK over arena slots
  kSampledLru = 1,  // evict the least recently used of a small random sample
};

struct StoreOptions {
  // Bytes the memory tier may use for rows (values + state + header), across
  // all tables. Default: 1 GiB
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
  // Size of RocksDB's block cache. Default: 64 MiB
  uint64_t rocksdb_block_cache_bytes = 64ull << 20;
  // Create <path> if it does not exist. Default: true
  bool create_if_missing = true;
  // If set and <path>/db does not exist, the store starts from this
  // checkpoint directory (one containing MANIFEST.json, or a root whose
  // newest complete checkpoint is used): its files are hard-linked (copied
  // across filesystems) into <path>/db, the tables come back with their
  // specs and steps, and the memory tier warms lazily. Default: ""
  std::string restore_from;
  // Shard id recorded in checkpoints (cluster servers set their rank).
  // Default: 0
  int shard_id = 0;
  // Bytes of disk the store holds back in a ballast file, <path>/disk-reserve
  // (written at Open; Open fails with ResourceExhausted if the disk cannot
  // hold it). A Close whose flush fails deletes it and flushes again: a
  // clean shutdown then survives a disk that something else filled, as
  // long as what it must write (the dirty rows and the memtables) fits in
  // the reserve. The next Open writes it again. 0: no reserve. Default: 0
  uint64_t disk_reserve_bytes = 0;
  // The file system every file of the store goes through: RocksDB's (its
  // Env is built over it) and psdb's own. Tests inject faults here
  // (tests/store/fault_file_system.h). Default: nullptr, the local file
  // system (rocksdb::FileSystem::Default())
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

class Store {
 public:
  // Opens (or creates) the store under `path`. On error nothing is left
  // open and no partially initialized store is returned. Fails with
  // FailedPrecondition if another process holds the directory (RocksDB LOCK),
  // and with FailedPrecondition naming the version if the directory or
  // restore checkpoint has a newer format than this build understands.
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const StoreOptions& options, absl::string_view path);

  // The RocksDB directory of a store at `path` (`path`/db): what
  // restore_from populates, and what a restore done before Open (a
  // cluster server's, store/checkpoint_restore.h) creates.
  static std::string DbPath(absl::string_view path);

  // Opens shard `shard_id` of the checkpoint `checkpoint_dir` (a directory
  // holding MANIFEST.json) read-only: a serving replica's store. RocksDB
  // opens the shard's files with OpenForReadOnly and nothing is ever
  // written into the checkpoint (no LOCK, no LOG, no metadata). Tables,
  // specs and steps come from the manifest, row counts from its shard
  // column. The memory tier (options.memory_budget_bytes) caches rows read
  // from the files; every row in it is clean, so eviction only drops.
  // Pull and PullRows always behave as serving pulls (no row is created, no
  // sighting counted; a missing key gets its table's serving default);
  // CreateTable (except of a table that exists with the identical spec,
  // which is OK and writes nothing), DropTable, Push, PutRows, Checkpoint,
  // CheckpointShard and Flush fail with FailedPrecondition.
  // options.restore_from, create_if_missing and shard_id are ignored. NotFound
  // if the directory has no manifest or the manifest no shard `shard_id`.
  static absl::StatusOr<std::unique_ptr<Store>> OpenCheckpoint(
      const StoreOptions& options, absl::string_view checkpoint_dir,
      int shard_id);

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Tables. See ParameterClient for semantics.
  absl::Status CreateTable(const TableSpec& spec);
  absl::Status DropTable(absl::string_view name);
  std::vector<TableSpec> ListTables() const;
  absl::StatusOr<TableSpec> GetTable(absl::string_view name) const;

  // Data. See ParameterClient for semantics.
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out, const PullOptions& options = {});
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads,
                    const PushOptions& options = {});
  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys, RowBatch* out);
  absl::Status PutRows(absl::string_view table, absl::Span<const uint64_t> keys,
                       const RowBatch& rows);

  // Writes an incremental checkpoint under `root_dir` (layout above): dirty
  // rows are flushed to RocksDB with WriteBatch, memtables are flushed,
  // rocksdb::Checkpoint hard-links the SSTs into shard-<id>/, rows past their
  // TTL are dropped, and MANIFEST.json is written last by atomic rename. Then
  // all but the newest options.keep_last complete checkpoints, and any
  // incomplete ones, are deleted.
  absl::StatusOr<CheckpointInfo> Checkpoint(
      absl::string_view root_dir, const CheckpointOptions& options = {});

  // Writes only this store's shard (the rocksdb::Checkpoint) into
  // `shard_dir`, which must not exist, and returns the per-table row counts
  // for a manifest written by the caller (cluster checkpoints).
  struct ShardCheckpoint {
    std::vector<std::pair<TableSpec, uint64_t>> tables;  // spec, rows
    int64_t step = 0;
    uint64_t rows_flushed = 0;
    uint64_t rows_expired = 0;
  };
  absl::StatusOr<ShardCheckpoint> CheckpointShard(absl::string_view shard_dir);

  StoreStats Stats() const;

  // Whether the store came from OpenCheckpoint.
  bool read_only() const;

  // Up to `max` keys of `table` now resident in the memory tier, in no
  // particular order: what a successor store warms with (serving replicas
  // pull them from the next checkpoint before swapping it in). NotFound for
  // an unknown table.
  absl::StatusOr<std::vector<uint64_t>> ResidentKeys(absl::string_view table,
                                                     size_t max) const;

  // Row transfer for live resharding (rpc/server's migration): the rows
  // that exist, read as they are: ReadRows creates no row, counts no
  // sighting and sets present[i] to 0 for a key with no row (its out row
  // is then the table's serving default). ScanKeys calls fn with every key
  // of `table` that exists when it starts, each once, `batch` keys at a
  // time: the resident ones first, then those only on disk (one RocksDB
  // snapshot); it writes nothing, and rows created meanwhile may or may
  // not be seen. DeleteRows removes rows from both tiers and returns how
  // many existed; with `existing` the caller vouches that every key has a
  // row (no disk read to check). NotFound for an unknown table.
  absl::Status ReadRows(absl::string_view table,
                        absl::Span<const uint64_t> keys, RowBatch* out,
                        std::vector<uint8_t>* present);
  absl::Status ScanKeys(
      absl::string_view table, size_t batch,
      absl::FunctionRef<absl::Status(absl::Span<const uint64_t>)> fn);
  absl::StatusOr<uint64_t> DeleteRows(absl::string_view table,
                                      absl::Span<const uint64_t> keys,
                                      bool existing = false);

  // Writes every dirty row to RocksDB and flushes its memtables to files (no
  // checkpoint). Close() also does this.
  absl::Status Flush();

  // Closes the store: stops the background evictor, writes every dirty row
  // and memtable to files, records steps, row counts and a clean mark. OK
  // means every acknowledged update is in the data directory's files. When
  // the disk refuses (see "Disk full and I/O errors" above) it tries the
  // flush again a few times (about 0.6 s in all), then gives up and returns
  // the error, naming how many dirty rows and memtable bytes are lost; the
  // store is closed either way. Every later call on the store fails with
  // FailedPrecondition (reads: NotFound); a second Close returns the
  // first one's status. The destructor closes too and drops the status.
  // REQUIRES: no other call on the store in flight.
  absl::Status Close();

 private:
  class Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psdb

#endif  // PSDB_STORE_STORE_H_
