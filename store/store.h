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
// MultiGet through RocksDB's block cache (or from memory-mapped SST files:
// rocksdb_mmap_reads). A table larger than the budget is
// normal: it runs at the speed its hot-set hit rate allows.
//
// Directory layout:
//   <path>/db/                 the live RocksDB database (table specs are
//                              stored in its default column family)
//   <path>/wal/                the write-ahead log (Durability::kWal)
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
//  - Durability (StoreOptions::durability): by default row writes skip
//    RocksDB's WAL; durability comes from checkpoints (and a clean close,
//    which flushes everything). After a crash the live directory opens
//    cleanly with the rows that had reached RocksDB. With kWal every
//    acknowledged push, PutRows, DeleteRows and CreateTable also survives
//    SIGKILL (store/wal.h; <path>/wal/ holds the log).
//  - A memory-tier hit never touches RocksDB. The budget may be exceeded
//    briefly by the rows of batches in flight (bound below).
//  - memory_budget_bytes covers rows, RocksDB's memtables and its block
//    cache together; Stats() reports it and what of it is in use (rows +
//    the cache's usage).
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
//    disk are then served without being cached. Bound: the memory tier's
//    rows <= their share of the budget + the rows of the calls in flight
//    (each at most max_batch_keys rows); a call that is refused adds
//    nothing. The whole budget: Stats().memory_used_bytes (rows + RocksDB's
//    cache) <= budget + the rows of the calls in flight + what a flush or
//    compaction charged to the cache since the last eviction round (its
//    filter being built, its files' metadata and index and filter blocks,
//    each kind charged in 256 KiB units). Before each eviction round the
//    rows' budget drops by what RocksDB pins beyond its share
//    (StoreStats::memory_yielded_bytes: a memtable filling while the one
//    before it flushes or cannot, index and filter blocks, charging
//    units), so the rows give way to RocksDB's charges instead of adding
//    to them; while the disk refuses, evictions move rows into memtables
//    until RocksDB stops writes (tests/store/store_fault_test.cc
//    MemoryUsedWithinStatedBound, memory_budget_test.cc). A table whose
//    index and filter blocks outgrow the whole budget passes it.
//    TableStats::disk_write_errors counts refused eviction writes.
//  - Once space returns, writes succeed without a restart: the next
//    eviction passes the headroom rule; after a RocksDB background error
//    the store calls DB::Resume() itself (RocksDB's own recovery is turned
//    off: it waits for write_buffer_size of free space). After a resume,
//    RocksDB 7.8's waited flushes return before the flush ran (a RocksDB
//    bug fixed in 8.9); the store waits for its flushes itself, so Flush,
//    checkpoints and Close still put every memtable in files.
//  - Close() (and the destructor) flush everything and report failure:
//    a close that cannot flush retries, deletes the disk_reserve_bytes ballast
//    if there is one and retries, and otherwise returns the error naming the
//    dirty rows and memtable bytes that are not in files. The guarantee: every
//    acknowledged update survives a clean close if the disk can take what the
//    close writes, which the headroom rule ensures unless something else filled
//    the disk, and the reserve extends to that case up to its size. The rule
//    does not count a running compaction's output (it can be as large as the
//    table's last level): so a close starts no compaction and, when its flush
//    fails, waits for the running ones to end (they free their output, failed
//    or done) and tries again. An I/O error other than "no space" (EIO) in a
//    memtable flush or a MANIFEST write is treated as a full disk is: writes
//    stop, the memtables stay, and writes resume without a reopen once the disk
//    takes writes (store/disk_tier.h). When a close still fails, the lost rows
//    are exactly those not yet in files (dirty rows and memtables, WAL-less);
//    the data directory then opens as after a crash (checkpoint rows + rows
//    flushed since, row counts recounted). Metadata writes skip RocksDB's WAL
//    and flush instead (a failed WAL append stops RocksDB 7.8 until a reopen).
//  - A restart on a disk that is still full: an open of an existing store
//    writes nothing of psdb's own unless it must (the "not closed cleanly"
//    mark waits for the first row write; a restore, a log to replay or a
//    format upgrade must write). RocksDB's open itself writes a new
//    MANIFEST (and an OPTIONS file); when the disk refuses that (or any
//    write the open needs, ResourceExhausted) and the store has its
//    disk_reserve_bytes ballast, the ballast is deleted and the open tried
//    again: its room is for exactly such a write. The store then opens
//    writable without the ballast: every row reads exactly, writes work
//    within the room given back (the headroom rule still keeps what a close
//    needs), and Stats().disk_reserve_held_bytes is 0 until the ballast is
//    written again (below). Otherwise, or if the disk still refuses, the
//    store opens read-only instead: every row in its files reads exactly
//    (Pull answers a missing key with its default without creating it, as
//    on a serving copy), read_only() is true, and every write fails with
//    RESOURCE_EXHAUSTED "<call> refused: store P was opened read-only
//    because the disk refused writes (<cause>) ...". Once space returns it
//    becomes writable by itself, without a reopen: a write call (Push,
//    PutRows, CreateTable, Flush, ...) that finds it read-only first opens
//    the database writable again (at most once a second, beside the
//    read-only instance; skipped while the file system reports less than
//    1 MiB free) and, if that open succeeds, goes on as on any writable
//    store; read_only() is false from then on. Tables switch under the
//    store's table lock: calls already in flight finish on the read-only
//    tables, which stay open until the last of them returns; the new
//    tables warm lazily (their hit, miss and eviction counters restart
//    from zero). Nothing is lost in the switch: a read-only store wrote
//    nothing and its memory tier held clean rows only. A store whose
//    write-ahead log holds records to replay cannot open so (replay
//    writes): Open fails with RESOURCE_EXHAUSTED naming the full disk and
//    the records; the files and the log keep every acknowledged update for
//    the next open.
//  - The reserve while the disk is short of room: an existing store whose
//    ballast is missing or short (a close or an open deleted it, or it was
//    never written) and cannot be written opens without it rather than
//    fail (a new store, with no database yet, still fails: the disk does
//    not have the reserve asked for). Stats() reports the reserve asked
//    for (disk_reserve_bytes) and what the ballast holds now
//    (disk_reserve_held_bytes). A missing ballast is written again once
//    the disk has room for it plus the headroom rule's (RoomFor with the
//    ballast as the write: it never takes room a close needs), tried at
//    open, after a successful Flush or checkpoint, and after each round of
//    the background evictor, at most once per
//    disk_reserve_retry_interval (1 s by default).
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
  // Outside it (README.md, "Memory"): the key index (about 16 bytes per
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
  // budget in BENCHMARKS.md). Default: false
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
  // writes it once the disk has room: "Disk full and I/O errors" above).
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
  // ("Disk full and I/O errors" above).
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
    };
    std::vector<File> files;
  };
  absl::StatusOr<ShardCheckpoint> CheckpointShard(absl::string_view shard_dir);

  StoreStats Stats() const;

  // Whether the store came from OpenCheckpoint, or was opened read-only on
  // a full disk and has not become writable since ("Disk full and I/O
  // errors" above).
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
