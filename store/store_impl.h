// Store::Impl: the state behind psdb::Store. Internal to psdb_store; split
// over store.cc (tables, eviction, deletes, stats, flush, close),
// store_open.cc (open, restore's placement, a checkpoint shard, a full
// disk's read-only open and the way back to writable), store_checkpoint.cc
// (checkpoints, restore) and store_wal.cc (the write-ahead log's open,
// replay and truncation; store/wal.h).
//
// Metadata kept in the default column family of <path>/db:
//   psdb/format_version  decimal; a newer one than kStoreFormatVersion is
//                        refused with FailedPrecondition. 1: no log, or a
//                        log of format 1; 2: the log may be of format 2
//                        (store/wal.h), which builds of format 1 would not
//                        replay. A store records 2 when it opens with
//                        Durability::kWal, before it writes a log; one
//                        without a log stays at 1, which every build reads
//   psdb/table/<name>    the table's spec (JSON of psdb.v1.TableSpec)
//   psdb/step/<name>     the table's step, persisted at Flush, Checkpoint and
//                        close (a crash loses at most the steps since)
//   psdb/rows/<name>     exact row count, same persistence
//   psdb/clean           "1" after a clean close; "0" while open, written
//                        before the first row write after the open
//                        (DiskTier::PutMetaBeforeRowWrites: until then the
//                        files match the counts, and an open that only
//                        reads needs no disk space). After an unclean stop
//                        the row counts are recounted on open.
//   psdb/wal_id, psdb/wal_next_lsn, psdb/wal_tag/<table>/<key>
//                        the write-ahead log's (store/wal.h, store_meta.h)
//
// Background evictor: one thread per store (unless
// StoreOptions::background_eviction is off). Inserts wake it once fewer than
// reserve() bytes of the budget are free; it then evicts from the table
// holding the most memory, kEvictorChunkRows at a time, until 2 * reserve()
// are free. Request-path eviction (MakeRoom) remains for when it falls
// behind. Table::Evict serializes the two per table.
//
// Background deleter: one thread per store, started by the first
// DeleteRowsLater; it runs the queued deletes in order (Table::DeleteRows,
// max_batch_keys at a time) and exits when the store closes, after the
// queue is empty.
//
// Thread-safety: thread-safe. tables_mu_ is taken (shared) once per call to
// find the table, never per key; ckpt_mu_ serializes checkpoints. disk_
// changes once at most after the open, under tables_mu_ (a store opened
// read-only on a full disk becoming writable: MaybeBecomeWritable); a call
// reads it after it found the store writable (read_only(), acquire), or
// under tables_mu_.
#ifndef PSDB_STORE_STORE_IMPL_H_
#define PSDB_STORE_STORE_IMPL_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "store/disk_reserve.h"
#include "store/disk_tier.h"
#include "store/table.h"
#include "store/wal.h"
#include "util/file_io.h"

namespace psdb {

// The newest store format this build reads (see above).
inline constexpr uint32_t kStoreFormatVersion = 2;
// What a store without a write-ahead log records.
inline constexpr uint32_t kStoreFormatVersionWithoutLog = 1;

class Store::Impl : public internal::BudgetArbiter {
 public:
  // RestoreReserve tries at most this often: each try that passes the
  // headroom rule writes the whole ballast.
  // MaybeBecomeWritable tries at most this often: each try opens the
  // database (every SST file) and writes a new MANIFEST.
  static constexpr absl::Duration kWritableRetryInterval = absl::Seconds(1);

  Impl(const StoreOptions& options, std::string path);
  ~Impl() override;

  absl::Status Open();
  // The read-only open of Store::OpenCheckpoint; path_ is the checkpoint.
  absl::Status OpenCheckpointShard(int shard_id, ShardFileCheck check);
  bool read_only() const { return read_only_.load(std::memory_order_acquire); }
  // FailedPrecondition naming `what` if read_only() (ResourceExhausted
  // naming the cause if opened so on a full disk).
  absl::Status CheckWritable(absl::string_view what) const;
  // MaybeBecomeWritable, then CheckWritable: what a write call checks
  // first. REQUIRES: tables_mu_ not held.
  absl::Status Writable(absl::string_view what);
  // A store opened read-only on a full disk (OpenReadOnlyOnFullDisk) opens
  // its database writable again once the disk takes the open's writes, at
  // most once per kWritableRetryInterval, and then serves writes: new
  // tables over the writable database replace the read-only ones under
  // tables_mu_, and the read-only generation (its tables and database)
  // lives on until the last call in flight on it returns (ro_generation_).
  // Nothing to carry over: a read-only store wrote nothing and counted no
  // sighting, and its memory tier held clean rows only (the new tables
  // warm lazily; their hit and miss counters start from zero). A call
  // that is refused for want of the disk tries it; returns at once if
  // another call is trying. REQUIRES: tables_mu_ not held.
  void MaybeBecomeWritable();

  absl::Status CreateTable(const TableSpec& spec);
  absl::Status DropTable(absl::string_view name);
  std::vector<TableSpec> ListTables() const;
  absl::StatusOr<std::shared_ptr<internal::Table>> Find(
      absl::string_view name) const;

  absl::StatusOr<CheckpointInfo> Checkpoint(absl::string_view root_dir,
                                            const CheckpointOptions& options);
  absl::StatusOr<ShardCheckpoint> CheckpointShard(absl::string_view shard_dir);
  StoreStats Stats() const;
  absl::Status Flush();
  // Writes the reserve's ballast if the store has one that is not held,
  // the store is open and writable, and the disk has room for it plus the
  // headroom rule's (DiskTier::RoomFor with the memory tier's rows: the
  // ballast never takes room a close needs). Unless `force`, at most once
  // per options_.disk_reserve_retry_interval. Called at open, after a
  // successful Flush or checkpoint, and by the background evictor after each
  // round.
  void RestoreReserve(bool force);
  // Store::Close. Idempotent: later calls return the first one's status.
  absl::Status Close();
  // Flush without the writable check (Close flushes after closing_).
  absl::Status FlushAll();

  // Background deletes (Store::DeleteRowsLater): one thread, started by
  // the first call, runs them in call order; the store's close finishes
  // them before its last flush.
  void DeleteLater(std::shared_ptr<internal::Table> table,
                   std::vector<uint64_t> keys);
  // Waits until none is queued or running.
  void AwaitDeletes() const;
  // AwaitDeletes, then the first error since the last call.
  absl::Status WaitForDeletes();

  // BudgetArbiter.
  absl::Status MakeRoom(internal::Table* requester, uint64_t bytes) override;
  // Lowers the rows' budget by what RocksDB pins beyond its share, so that
  // rows and RocksDB together keep the whole budget.
  void YieldToRocksdb();

 protected:
  void WakeEvictor() override;

 private:
  // The background evictor (StoreOptions::background_eviction): waits to be
  // woken, then evicts until two reserves are free.
  void EvictorLoop();
  bool EvictorShouldRun() const ABSL_SHARED_LOCKS_REQUIRED(evictor_mu_) {
    return evictor_wake_ || evictor_stop_;
  }
  void StopEvictor();
  void DeleterLoop();
  bool DeleterShouldRun() const ABSL_SHARED_LOCKS_REQUIRED(deletes_mu_) {
    return !delete_jobs_.empty() || deleter_stop_;
  }
  void StopDeleter();

  std::vector<std::shared_ptr<internal::Table>> Snapshot() const;
  // Write-ahead log (store_wal.cc). PrepareWal, before the tables are
  // built: drops a log that belongs to no database of ours (`fresh`: the
  // database was just created or restored), reads what the log holds and
  // opens the writer (kWal). ReplayWal, once they are: replays the records
  // and flushes. WalCut / WalTruncate bracket a flush point (Flush,
  // Checkpoint): the cut is taken before rows are flushed, the segments
  // before it are deleted once the rows and memtables are on disk.
  absl::Status PrepareWal(bool fresh);
  absl::Status ReplayWal();
  // The records of the database's log (none without one), read without
  // writing anything.
  absl::StatusOr<uint64_t> WalRecordsToReplay();
  bool wal_lsn_slots() const { return wal_ != nullptr || wal_records_ > 0; }
  std::optional<internal::Wal::Cut> WalCut();
  absl::Status WalTruncate(const std::optional<internal::Wal::Cut>& cut);
  absl::Status PersistMeta(bool clean);
  // Flush + TTL + rocksdb::Checkpoint into shard_dir.
  absl::StatusOr<ShardCheckpoint> CheckpointShardLocked(
      const std::string& shard_dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ckpt_mu_);
  // Opens (or creates) the database at DbPath(path_); `restored`: the
  // manifest of the checkpoint RestoreInto just put there. `fresh`: the
  // database did not exist before this open (created or restored), so any
  // write-ahead log found is not its own.
  absl::Status OpenDb(std::optional<v1::Manifest> restored, bool fresh);
  // The part of OpenDb after DiskTier::Open (disk_, `cfs`): the format
  // version, the log (PrepareWal) and the tables (TablesFromMeta; column
  // families without a spec dropped). On error every handle of `cfs` is
  // destroyed.
  absl::StatusOr<std::vector<std::shared_ptr<internal::Table>>> TablesOfDb(
      const std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>>&
          cfs,
      const v1::Manifest* restored, bool fresh);
  // The tables whose specs disk_'s metadata holds, each over its column
  // family in `by_name` (taken out of it). A spec without one gets it
  // created, unless !create_missing: then FailedPrecondition "table <name>
  // needs its column family created". Step and row count come from the
  // metadata, or from `restored`'s manifest where it lists the table; rows
  // are counted after an unclean stop. On error the tables made so far are
  // released (their handles with them) and the rest stay in `by_name`.
  absl::StatusOr<std::vector<std::shared_ptr<internal::Table>>> TablesFromMeta(
      absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*>& by_name,
      const v1::Manifest* restored, bool create_missing);
  // After OpenDb of an existing database failed with ResourceExhausted
  // (`cause`, the disk refused a write the open needs): opens it read-only
  // (rocksdb::DB::OpenForReadOnly writes nothing), every acknowledged row
  // readable, writes refused naming the cause. ResourceExhausted if that
  // cannot be done without writing (a write-ahead log to replay).
  absl::Status OpenReadOnlyOnFullDisk(const absl::Status& cause);
  // MaybeBecomeWritable's try, once it holds reopen_mu_.
  void BecomeWritableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reopen_mu_);
  // Undoes a failed OpenDb of an existing database (tables, log writer,
  // database closed) so that it can be opened again, differently.
  void DropFailedOpen();
  // Populates <path>/db from options_.restore_from (built in
  // RestoreTmpPath, checked by internal::CheckRestoredShard, renamed into
  // place); returns its manifest with each table's rows set to the shard's
  // count. On error <path>/db was not created and no temporary is left.
  absl::StatusOr<v1::Manifest> RestoreInto(const std::string& db_path);
  void RecordCheckpoint(absl::Duration d);

  const StoreOptions options_;
  const std::string path_;
  // FileSystemOr(options_.file_system): every file goes through it.
  const std::shared_ptr<rocksdb::FileSystem> fs_;
  // psdb's own file operations, over fs_.
  const std::shared_ptr<const FileIo> io_;
  std::unique_ptr<internal::DiskTier> disk_;
  // The write-ahead log's writer (Durability::kWal); outlives the tables.
  std::unique_ptr<internal::Wal> wal_;
  std::string wal_dir_;
  uint64_t wal_id_ = 0;
  uint64_t wal_records_ = 0;  // records found at open, to replay
  // The ballast of StoreOptions::disk_reserve_bytes (store/disk_reserve.h);
  // null when 0 and for OpenCheckpoint. Not held while the disk has had no
  // room for it (released by a close or an open, or never written); then
  // RestoreReserve writes it again once the headroom rule allows.
  mutable absl::Mutex reserve_mu_;
  std::unique_ptr<internal::DiskReserve> reserve_ ABSL_GUARDED_BY(reserve_mu_);
  // When RestoreReserve last tried (rate limit:
  // options_.disk_reserve_retry_interval).
  absl::Time last_reserve_try_ ABSL_GUARDED_BY(reserve_mu_) =
      absl::InfinitePast();
  bool opened_ = false;
  // Set at open; cleared once by MaybeBecomeWritable (release: after
  // disk_, wal_ and tables_ are the writable ones).
  std::atomic<bool> read_only_{false};
  // Why the store opened read-only on a full disk (OpenReadOnlyOnFullDisk);
  // empty otherwise. Not changed after the open.
  std::string full_disk_;
  // The tables and database of a store opened read-only on a full disk.
  // tables_ holds aliases of `tables` that share ownership of the whole
  // generation, so that after MaybeBecomeWritable (which moves the
  // read-only database into `disk`) the calls still using a read-only
  // table keep its database open; the last one frees both, tables first.
  struct ReadOnlyGeneration {
    std::unique_ptr<internal::DiskTier> disk;  // once retired
    std::vector<std::shared_ptr<internal::Table>> tables;
  };
  std::shared_ptr<ReadOnlyGeneration> ro_generation_
      ABSL_GUARDED_BY(tables_mu_);
  absl::Mutex reopen_mu_;
  absl::Time last_writable_try_ ABSL_GUARDED_BY(reopen_mu_) =
      absl::InfinitePast();
  // RestoreInto renamed its database into <path>/db (Open undoes it when
  // the open fails after that).
  bool restore_placed_ = false;
  std::atomic<bool> closing_{false};  // Close() began: writes refused
  absl::Mutex close_mu_;
  std::optional<absl::Status> closed_ ABSL_GUARDED_BY(close_mu_);

  mutable absl::Mutex tables_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<internal::Table>> tables_
      ABSL_GUARDED_BY(tables_mu_);

  absl::Mutex evictor_mu_;
  bool evictor_wake_ ABSL_GUARDED_BY(evictor_mu_) = false;
  bool evictor_stop_ ABSL_GUARDED_BY(evictor_mu_) = false;
  std::atomic<bool> evictor_stopping_{false};
  std::thread evictor_;

  struct DeleteJob {
    std::shared_ptr<internal::Table> table;
    std::vector<uint64_t> keys;
  };
  mutable absl::Mutex deletes_mu_;
  std::deque<DeleteJob> delete_jobs_ ABSL_GUARDED_BY(deletes_mu_);
  // Jobs queued or running; read without the lock for a quick "none".
  std::atomic<size_t> deletes_pending_{0};
  bool deleter_stop_ ABSL_GUARDED_BY(deletes_mu_) = false;
  absl::Status delete_error_ ABSL_GUARDED_BY(deletes_mu_);
  std::thread deleter_ ABSL_GUARDED_BY(deletes_mu_);

  absl::Mutex ckpt_mu_;
  mutable absl::Mutex stats_mu_;
  uint64_t checkpoints_ ABSL_GUARDED_BY(stats_mu_) = 0;
  absl::Duration last_checkpoint_ ABSL_GUARDED_BY(stats_mu_);
  absl::Duration total_checkpoint_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace psdb

#endif  // PSDB_STORE_STORE_IMPL_H_
