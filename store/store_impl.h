// Store::Impl: the state behind psdb::Store. Internal to psdb_store; split
// over store.cc (open, tables, data path, stats, close) and
// store_checkpoint.cc (checkpoints, restore).
//
// Metadata kept in the default column family of <path>/db:
//   psdb/format_version  decimal; a newer one than kStoreFormatVersion is
//                        refused with FailedPrecondition
//   psdb/table/<name>    the table's spec (JSON of psdb.v1.TableSpec)
//   psdb/step/<name>     the table's step, persisted at Flush, Checkpoint and
//                        close (a crash loses at most the steps since)
//   psdb/rows/<name>     exact row count, same persistence
//   psdb/clean           "1" after a clean close; "0" while open. After an
//                        unclean stop the row counts are recounted on open.
//
// Background evictor: one thread per store (unless
// StoreOptions::background_eviction is off). Inserts wake it once fewer than
// reserve() bytes of the budget are free; it then evicts from the table
// holding the most memory, kEvictorChunkRows at a time, until 2 * reserve()
// are free. Request-path eviction (MakeRoom) remains for when it falls
// behind. Table::Evict serializes the two per table.
//
// Thread-safety: thread-safe. tables_mu_ is taken (shared) once per call to
// find the table, never per key; ckpt_mu_ serializes checkpoints.
#ifndef PSDB_STORE_STORE_IMPL_H_
#define PSDB_STORE_STORE_IMPL_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/disk_reserve.h"
#include "store/disk_tier.h"
#include "store/manifest.h"
#include "store/store.h"
#include "store/table.h"

namespace psdb {

inline constexpr uint32_t kStoreFormatVersion = 1;

class Store::Impl : public internal::BudgetArbiter {
 public:
  Impl(const StoreOptions& options, std::string path);
  ~Impl() override;

  absl::Status Open();
  // The read-only open of Store::OpenCheckpoint; path_ is the checkpoint.
  absl::Status OpenCheckpointShard(int shard_id);
  bool read_only() const { return read_only_; }
  // FailedPrecondition naming `what` if read_only().
  absl::Status CheckWritable(absl::string_view what) const;

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
  // Store::Close. Idempotent: later calls return the first one's status.
  absl::Status Close();
  // Flush without the writable check (Close flushes after closing_).
  absl::Status FlushAll();

  // BudgetArbiter.
  absl::Status MakeRoom(internal::Table* requester, uint64_t bytes) override;

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

  std::vector<std::shared_ptr<internal::Table>> Snapshot() const;
  absl::Status PersistMeta(bool clean);
  // Flush + TTL + rocksdb::Checkpoint into shard_dir.
  absl::StatusOr<ShardCheckpoint> CheckpointShardLocked(
      const std::string& shard_dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ckpt_mu_);
  // Populates <path>/db from options_.restore_from; returns its manifest.
  absl::StatusOr<v1::Manifest> RestoreInto(const std::string& db_path);
  void RecordCheckpoint(absl::Duration d);

  const StoreOptions options_;
  const std::string path_;
  std::unique_ptr<internal::DiskTier> disk_;
  // StoreOptions::disk_reserve_bytes; null when 0 or read-only.
  std::unique_ptr<internal::DiskReserve> reserve_;
  bool opened_ = false;
  bool read_only_ = false;
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

  absl::Mutex ckpt_mu_;
  mutable absl::Mutex stats_mu_;
  uint64_t checkpoints_ ABSL_GUARDED_BY(stats_mu_) = 0;
  absl::Duration last_checkpoint_ ABSL_GUARDED_BY(stats_mu_);
  absl::Duration total_checkpoint_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace psdb

#endif  // PSDB_STORE_STORE_IMPL_H_
