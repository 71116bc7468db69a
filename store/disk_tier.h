// DiskTier: the RocksDB database under <store>/db. Internal to psdb_store.
//
// One column family per table, named after the table; the default column
// family holds the store's metadata (format version, table specs, steps,
// row counts) under "psdb/..." keys. Row keys and values are encoded as in
// store/row_codec.h.
//
// Durability: row writes (evictions, flushes) skip the WAL, because the
// durable state of a psdb store is its checkpoints, and checkpoints flush
// memtables first. With Durability::kWal they go through RocksDB's WAL
// (unsynced), so a row and its write-ahead log tag written in one batch
// survive a kill together (store/wal.h). A process that dies between
// checkpoints loses the rows it had not flushed, exactly as it loses its dirty
// in-memory rows. Metadata writes (table create/drop, steps) skip the WAL as
// well and are durable when they return: each flushes the default column
// family to an SST (a failed WAL append would stop RocksDB 7.8 until a
// reopen; see Open). For the same reason a wal-mode store whose disk fills
// up may need a reopen before RocksDB writes again.
//
// A disk that refuses writes (psdb/store.h, "Disk full and I/O errors"):
//  - Headroom: RoomFor() refuses an eviction write unless the file system
//    keeps room for everything not yet in a file after it: RocksDB's
//    memtables, the write, and the memory tier's rows (any of which a
//    close may have to write). So a full disk is met before it holds the
//    rows a clean shutdown needs, not after.
//  - Errors: a memtable flush that fails (ENOSPC, EIO) is a RocksDB
//    background error that stops every write. RocksDB 7.8 makes an EIO in a
//    flush or a MANIFEST write fatal (never resumed); the listener makes it
//    the hard error ENOSPC is, since the memtables are kept. RocksDB's own
//    recovery waits for write_buffer_size of free space, polls every 5 s and
//    makes a manual DB::Resume() answer Busy meanwhile, so a listener turns it
//    off and the DiskTier resumes itself: a write that fails while a background
//    error is pending calls Resume() (at most once per kResumeInterval) and, if
//    that flushed the memtables, writes again. Reads keep working throughout
//    (the memtables stay in memory).
//  - RocksDB 7.8's DB::Resume() leaves its "DB stopped" flag set
//    (ErrorHandler::ClearBGError does not reset is_db_stopped_; fixed in
//    RocksDB 8.9, facebook/rocksdb#11991). Writes work again, but from then
//    on every waited DB::Flush() returns OK at once, before the flush ran:
//    a close would then stop RocksDB while the flush of the WAL-less
//    memtables is still running, and lose them. So every flush of the
//    DiskTier waits itself until the memtables it sealed are in files
//    (AwaitFlushed), or a background error says they cannot be.
//

// Thread-safety: thread-safe (RocksDB is); column-family handles must not be
// used after DestroyCf.
#ifndef PSDB_STORE_DISK_TIER_H_
#define PSDB_STORE_DISK_TIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "manifest/manifest.pb.h"
#include "psdb/store_options.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/sst_file_manager.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"

namespace psdb::internal {

// Maps a RocksDB status to absl, prefixing `context`; a held LOCK file
// becomes FailedPrecondition, corruption DataLoss.
absl::Status FromRocks(const rocksdb::Status& s, absl::string_view context);

// A RocksDB info logger that drops everything: a database opened read-only
// (a checkpoint) must not gain or rotate LOG files in its directory.
std::shared_ptr<rocksdb::Logger> NewDiscardLogger();

class DiskTier {
 public:
  // Resume attempts are at least this far apart: each one rewrites the
  // memtables, so a full disk is not hammered by every eviction.
  static constexpr absl::Duration kResumeInterval = absl::Milliseconds(100);

  // Opens (creating if needed) the database at `db_path` with every column
  // family it has. `cfs` receives (name, handle) of each non-default family.
  // `read_only`: rocksdb::DB::OpenForReadOnly of an existing database (a
  // checkpoint shard), which writes nothing into `db_path`; every write
  // method then fails.
  static absl::StatusOr<std::unique_ptr<DiskTier>> Open(
      const std::string& db_path, const StoreOptions& options,
      std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>>* cfs,
      bool read_only = false);
  ~DiskTier();  // closes the database; all handles must be destroyed first
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  rocksdb::DB* db() const { return db_.get(); }
  // The default column family (metadata, write-ahead log tags).
  rocksdb::ColumnFamilyHandle* meta_cf() const { return default_cf_; }
  const std::string& path() const { return path_; }

  absl::StatusOr<rocksdb::ColumnFamilyHandle*> CreateCf(
      const std::string& name);
  absl::Status DropCf(rocksdb::ColumnFamilyHandle* cf);
  void DestroyCf(rocksdb::ColumnFamilyHandle* cf);

  // Point lookups of n 8-byte keys in one column family. values[i] and
  // statuses[i] answer keys[i]. REQUIRES: arrays of n elements, keys in
  // ascending order.
  void MultiGet(rocksdb::ColumnFamilyHandle* cf, size_t n,
                const rocksdb::Slice* keys, rocksdb::PinnableSlice* values,
                rocksdb::Status* statuses);
  absl::Status Get(rocksdb::ColumnFamilyHandle* cf, const rocksdb::Slice& key,
                   std::string* value, bool* found);

  // Writes row data (no WAL). While a background error stops writes, first
  // tries to resume (at most once per kResumeInterval). First writes the
  // metadata of PutMetaBeforeRowWrites, if pending (its error fails the
  // write).
  absl::Status WriteRows(rocksdb::WriteBatch* batch);

  // OK if the file system of the database has room, after writing
  // `write_bytes` more, for RocksDB's memtables and `keep_bytes` (the
  // memory tier's rows a close may have to write) with a margin;
  // ResourceExhausted naming the figures otherwise. OK when the file system
  // cannot say how much is free.
  absl::Status RoomFor(uint64_t write_bytes, uint64_t keep_bytes);
  // Clears a background error (DB::Resume: flushes the memtables) if one
  // is pending; OK if none is. `force`: ignore kResumeInterval.
  absl::Status Resume(bool force);
  // Bytes of all memtables (active and immutable, every column family).
  uint64_t MemtableBytes();

  // Metadata in the default column family, durable on return (flushed).
  absl::Status PutMeta(absl::string_view key, absl::string_view value);
  absl::Status DeleteMeta(absl::string_view key);
  // Makes (key, value) durable, as PutMeta, before the next WriteRows, not
  // now; nothing if it is stored already. How a store marks itself open
  // (psdb/clean = "0", store_impl.h) without writing at open: a store that
  // only reads needs no free disk space.
  absl::Status PutMetaBeforeRowWrites(absl::string_view key,
                                      absl::string_view value);
  // Several metadata puts in one synced write.
  absl::Status PutMetaBatch(
      const std::vector<std::pair<std::string, std::string>>& kvs);
  // NotFound if absent.
  absl::StatusOr<std::string> GetMeta(absl::string_view key);
  // Deletes every metadata key starting with `prefix` (one range tombstone).
  absl::Status DeleteMetaPrefix(absl::string_view prefix);
  // Every (key, value) whose key starts with `prefix`.
  std::vector<std::pair<std::string, std::string>> ScanMeta(
      absl::string_view prefix);

  // Flushes the memtables of `cfs` and of the metadata column family,
  // resuming first if a background error is pending.
  absl::Status Flush(std::vector<rocksdb::ColumnFamilyHandle*> cfs);
  // Starts no more compactions (those running go on): for a close, whose
  // flush needs the disk space a compaction's output would take. Not
  // undone: the next open compacts as before.
  void StopCompactions();
  // Waits until every compaction that began has ended, for at most
  // `timeout` (one RocksDB cancels for want of room never begins). A
  // compaction's output takes disk space until it ends, when its inputs
  // are deleted or, if it failed (a full disk), its output: what a flush
  // that failed for want of space waits for before it is tried again.
  void AwaitCompactions(absl::Duration timeout);
  // rocksdb::Checkpoint of the whole database into `dir` (must not exist).
  absl::Status CreateCheckpoint(const std::string& dir);
  // The live SST files' sizes, checksums, column families and sequence
  // number ranges by file name, as RocksDB recorded them when it wrote each
  // (files written without a checksum are left out): what
  // RecordShardFiles (store/shard_files.h) need not read.
  absl::flat_hash_map<std::string, v1::ShardFile> LiveFiles() const;

  // Bytes now charged to RocksDB's cache: blocks and memtables
  // (store/memory_budget.h).
  uint64_t CacheUsage() const;
  // Bytes by which what RocksDB pins in its cache passes the cache's
  // capacity: the memtables' charge (over their share by its rounding to
  // 256 KiB units and by a memtable's last arena block) and the table
  // readers' index and filter blocks, file metadata and filters being built
  // (each kind charged in 256 KiB units). Blocks not in use are not pinned:
  // the cache drops them to make room. What the memory tier's rows give up
  // so that the whole budget holds (store/memory_budget.h).
  uint64_t PinnedOverCapacity() const;
  rocksdb::Cache* cache() const { return cache_.get(); }
  rocksdb::WriteBufferManager* write_buffer_manager() const {
    return write_buffer_manager_.get();
  }

  // A RocksDB integer property of `cf` (nullptr: a DB-wide one); 0 if
  // unknown.
  uint64_t IntProperty(rocksdb::ColumnFamilyHandle* cf,
                       const std::string& property);

 private:
  class ErrorListener;
  struct FlushEvents;
  DiskTier();
  // Flushes the default column family (metadata).
  absl::Status FlushMeta();
  // After a waited DB::Flush of `cfs` that returned OK: waits until no
  // immutable memtable of `cfs` is left to flush (see the header comment:
  // RocksDB 7.8 may not have waited), or fails with the background error
  // that stopped a flush, or with Unavailable after 30 s without any flush
  // progress (no completion, no error, no fewer memtables).
  absl::Status AwaitFlushed(
      const std::vector<rocksdb::ColumnFamilyHandle*>& cfs);
  // Writes, syncs and deletes a small file next to the database: whether
  // the file system takes writes again (Resume's precondition).
  absl::Status ProbeWritable();
  // FromRocks for a write's status, except that a write which bailed out
  // of a write stall (Incomplete) while a background error is pending
  // reports that error (a full disk, an EIO): its code is the cause.
  absl::Status FromWrite(const rocksdb::Status& s,
                         absl::string_view context) const;
  // Whether RocksDB reported a background error not yet cleared.
  bool bg_error() const { return bg_error_->load(std::memory_order_acquire); }

  std::string path_;
  rocksdb::FileSystem* fs_ = nullptr;
  // Set by the listener, cleared by a successful Resume().
  std::shared_ptr<std::atomic<bool>> bg_error_ =
      std::make_shared<std::atomic<bool>>(false);
  // Flush completions and background errors, from the listener.
  std::shared_ptr<FlushEvents> flush_events_;
  absl::Mutex resume_mu_;
  absl::Time last_resume_ ABSL_GUARDED_BY(resume_mu_) = absl::InfinitePast();
  // Built over StoreOptions::file_system; outlives db_ (declared first).
  std::unique_ptr<rocksdb::Env> env_;
  // The DB's SstFileManager (nullptr when read-only), over env_:
  // StopCompactions.
  std::shared_ptr<rocksdb::SstFileManager> sst_files_;
  // RocksDB's share of the memory budget; outlive db_.
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffer_manager_;
  rocksdb::WriteOptions row_write_;
  rocksdb::WriteOptions meta_write_;
  rocksdb::ColumnFamilyOptions cf_options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* default_cf_ = nullptr;
  // PutMetaBeforeRowWrites's (key, value), while not yet written.
  std::atomic<bool> meta_pending_{false};
  absl::Mutex meta_pending_mu_;
  std::pair<std::string, std::string> meta_pending_kv_
      ABSL_GUARDED_BY(meta_pending_mu_);
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_DISK_TIER_H_
