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
//    briefly by the rows of batches in flight.
//  - Bad input (unknown table, sizes, non-finite values, empty or oversized
//    batches, bad names) fails before anything changes. A corrupt stored
//    row fails the call with DataLoss naming table and key; a push that
//    needed it applies nothing.
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
  // A restore (restore_from) is built in RestoreTmpPath(path), checked,
  // renamed to DbPath(path) and the rename fsynced; when the restore or
  // the open after it fails, <path> is left as before the attempt (the
  // temporary, the new database and a <path> this call created are
  // removed), so the next Open with a good checkpoint restores it. Open
  // removes a RestoreTmpPath(path) that a crash left behind.
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const StoreOptions& options, absl::string_view path);

  // The RocksDB directory of a store at `path` (`path`/db): what
  // restore_from populates, and what a restore done before Open (a
  // cluster server's, store/checkpoint_restore.h) creates.
  static std::string DbPath(absl::string_view path);
  // Where a restore builds DbPath(path) before renaming it into place:
  // DbPath(path) + ".restore-tmp".
  static std::string RestoreTmpPath(absl::string_view path);

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

  // Writes every dirty row to RocksDB (no checkpoint). Close() also does this.
  absl::Status Flush();

 private:
  class Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psdb

#endif  // PSDB_STORE_STORE_H_
