// Store: psdb's embedded, tiered parameter engine, opened in-process on a
// local directory the way an application opens RocksDB: hot rows in memory
// within a byte budget, the rest in RocksDB, incremental checkpoints, an
// optional write-ahead log.
//
//   psdb::StoreOptions options;  // psdb/store_options.h
//   options.memory_budget_bytes = 2ull << 30;
//   absl::StatusOr<std::unique_ptr<psdb::Store>> store =
//       psdb::Store::Open(options, "/data/psdb");
//
// The semantics are ParameterClient's (psdb/parameter_client.h). Tiers,
// directory and checkpoint layout and the decisions a user can observe:
// docs/store.md; durability and the contract when the disk is full or
// fails: docs/operations/disk-full.md.
//
// Thread-safety: every method is thread-safe. Pulls and pushes on different
// keys proceed in parallel; operations on the same key are serialized.
// Checkpoint() may run concurrently with pulls and pushes; it captures every
// update that completed before it was called.
#ifndef PSDB_STORE_H_
#define PSDB_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/parameter_client.h"
#include "psdb/row.h"
#include "psdb/store_options.h"
#include "psdb/table_spec.h"

namespace psdb {

class Store {
 public:
  // Opens (or creates) the store under `path`. On error nothing is left
  // open and no partially initialized store is returned. Fails with
  // FailedPrecondition if another process holds the directory (RocksDB LOCK),
  // and with FailedPrecondition naming the version if the directory or
  // restore checkpoint has a newer format than this build understands (or
  // naming the segment, if its write-ahead log has a newer format or a
  // record type this build does not know). An existing store on a disk
  // that refuses the open's writes gives it the room of its disk reserve,
  // if it has one, or opens read-only until the disk takes writes again
  // (docs/operations/disk-full.md).
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
  // cluster server's, checkpoint/restore.h) creates.
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
  // Before RocksDB reads the shard's files, their sizes and checksums are
  // checked against the manifest (store/shard_files.h; DataLoss), unless
  // `check` says the caller has just done so.
  enum class ShardFileCheck {
    kSizesAndChecksums,
    // Checked by the caller: ckpt::CheckpointReader::Open checks every
    // shard it opens, so a reader's caller need not read the files twice.
    kAlreadyChecked,
  };
  static absl::StatusOr<std::unique_ptr<Store>> OpenCheckpoint(
      const StoreOptions& options, absl::string_view checkpoint_dir,
      int shard_id, ShardFileCheck check = ShardFileCheck::kSizesAndChecksums);

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

  // Writes an incremental checkpoint under `root_dir` (layout: docs/store.md):
  // dirty rows are flushed to RocksDB with WriteBatch, memtables are flushed,
  // rocksdb::Checkpoint hard-links the SSTs into shard-<id>/, rows past their
  // TTL are dropped, and MANIFEST.json is written last by atomic rename. Then
  // all but the newest options.keep_last complete checkpoints, and any
  // incomplete ones, are deleted.
  absl::StatusOr<CheckpointInfo> Checkpoint(
      absl::string_view root_dir, const CheckpointOptions& options = {});

  // Writes only this store's shard (the rocksdb::Checkpoint) into
  // `shard_dir`, which must not exist, and returns the per-table row counts
  // and the shard's files for a manifest written by the caller (cluster
  // checkpoints).
  struct ShardCheckpoint {
    std::vector<std::pair<TableSpec, uint64_t>> tables;  // spec, rows
    int64_t step = 0;
    uint64_t rows_flushed = 0;
    uint64_t rows_expired = 0;
    // Every file of shard_dir: the manifest's ShardManifest.files
    // (store/shard_files.h).
    struct File {
      std::string name;
      uint64_t size = 0;
      std::string crc32c;  // 8 lower-case hex digits
      // An SST's column family and the smallest and largest sequence
      // number of its entries (what a serving replica orders files by).
      std::string column_family;
      std::optional<std::pair<uint64_t, uint64_t>> seqnos;
    };
    std::vector<File> files;
  };
  absl::StatusOr<ShardCheckpoint> CheckpointShard(absl::string_view shard_dir);

  StoreStats Stats() const;

  // Whether the store came from OpenCheckpoint, or was opened read-only on
  // a full disk and has not become writable since
  // (docs/operations/disk-full.md).
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

  // The same transfer with rows in their RocksDB encoding
  // (store/row_codec.h): the migration's fast path. ReadEncodedRows
  // appends each key of `keys` that has a row to *found and its encoding
  // (EncodedRowSize bytes) to *out, in the same order: resident rows are
  // encoded from memory, the others copied from RocksDB as stored (their
  // checksum checked); it creates no row and counts no sighting.
  // IngestRows assigns rows as PutRows does (the last occurrence of a key
  // wins; the row is resident and dirty afterwards), from `rows` =
  // keys.size() encodings back to back. Each encoding's length, version,
  // shape and checksum are checked before anything is written (DataLoss
  // naming the key otherwise), and so is that its values and state are
  // finite (InvalidArgument otherwise). A table created by
  // CreateTable in this process looks nothing up on disk for IngestRows
  // until it has written a row there (no row can exist there before).
  // IngestRows waits for the background deletes (DeleteRowsLater) first.
  // NotFound for an unknown table.
  absl::Status ReadEncodedRows(absl::string_view table,
                               absl::Span<const uint64_t> keys,
                               std::vector<uint64_t>* found, std::string* out);
  absl::Status IngestRows(absl::string_view table,
                          absl::Span<const uint64_t> keys,
                          absl::string_view rows);

  // DeleteRows(table, keys, /*existing=*/true) on a background thread
  // (one per store, in call order), returning at once: how a resharding
  // source drops the rows it handed over after it answered COMMIT. Until
  // those rows are gone, every reader of the store's key set or row
  // counts waits for them: ScanKeys, ResidentKeys, Stats, Flush,
  // Checkpoint, CheckpointShard, DropTable and IngestRows, so none sees a
  // row that is about to disappear. Closing the store finishes them.
  // A key listed twice is deleted once.
  // REQUIRES: every key has a row, and nothing else writes these keys
  // until WaitForDeletes() returns (a write meanwhile may be deleted).
  void DeleteRowsLater(absl::string_view table, std::vector<uint64_t> keys);
  // Waits until every DeleteRowsLater call so far is done; returns the
  // first error among them since the last call (the rows of a failed
  // delete stay).
  absl::Status WaitForDeletes();

  // Writes every dirty row to RocksDB and flushes its memtables to files (no
  // checkpoint). Close() also does this.
  absl::Status Flush();

  // Closes the store: stops the background evictor, writes every dirty row
  // and memtable to files, records steps, row counts and a clean mark. OK
  // means every acknowledged update is in the data directory's files. When
  // the disk refuses (see docs/operations/disk-full.md) it tries the
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

#endif  // PSDB_STORE_H_
