// Table: one psdb table inside a Store: its spec and step, its memory tier,
// its RocksDB column family, admission counter and statistics (table.cc),
// the miss path every operation shares (table_materialize.cc), the pull
// path (table_pull.cc), the push path and its log replay (table_push.cc),
// its whole-row reads and writes (table_rows.cc: PullRows, PutRows), its
// eviction, flush and TTL paths (table_evict.cc) and its encoded row
// transfer for live resharding (table_migrate.cc). Internal to psdb_store.
//
// Data path (DESIGN.md, store/):
//  - A batch's keys are grouped by index stripe (counting sort into
//    thread-local buffers); each stripe is locked once per batch. Hits copy
//    to / update the slot in place: no allocation, no RocksDB.
//  - Misses are de-duplicated and read with one MultiGet; keys not on disk
//    are created (deterministic init, InitState) unless admission or a
//    serving pull says otherwise. They are inserted under the stripe lock
//    after the store made room for them (evicting if over budget).
//  - Lost-update guard: a miss records its stripe's evict_seq under the
//    lock. If, when the loaded row is inserted, the key is still absent but
//    left memory since (Stripe::RemovedSince), a concurrent eviction may
//    have written a newer version after our read: the key is read again.
//    After 3 such rounds the read is done while holding the stripe lock,
//    which always succeeds. Admission is decided once per key and call, so
//    a retry never counts a key's sightings twice.
//  - Eviction writes dirty victims with one WriteBatch and only then removes
//    them from the index (if their version did not change meanwhile), so a
//    key is never absent from memory while its newest bytes are not on disk.
//  - Push: grads of duplicate keys are summed; rows are looked up first and
//    missing ones loaded (decoding every loaded row before any update, so a
//    corrupt row fails the request with nothing applied), then the optimizer
//    runs once per unique key under its stripe lock.
//
// Row header maintenance: frequency counts sightings (positions of
// non-serving pulls, PullRows and pushes); changing only the frequency does
// not make a row dirty, so it is persisted when the row is next written for
// another reason. last_update_step = max(its value, the push step);
// update_count counts optimizer applications. Created rows start at {0,0,0}.
//
// TTL: at checkpoint, rows with last_update_step + ttl_steps < table step
// are deleted from both tiers. A row created but never updated has
// last_update_step 0, so it is dropped once the step passes ttl_steps;
// that loses nothing, as its values are its deterministic initialization.
//
// Write-ahead log (Durability::kWal, store/wal.h): Push, PutRows and
// DeleteRows append their record and apply it while holding wal_mu_ (and a
// Wal::ApplyScope), so this table's rows apply records in LSN order; they
// return after WaitWritten. Each slot carries the LSN of the last record
// applied to its row; evictions and flushes write it as the row's tag in the
// same batch, after WaitWritten(the batch's largest tag). The Replay* calls
// (Store::Open, single-threaded, set_replaying(true)) apply a record to the
// rows whose LSN (slot, or tag on disk when the row is loaded) is below it.
//
// Thread-safety: thread-safe.
#ifndef PSDB_STORE_TABLE_H_
#define PSDB_STORE_TABLE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
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
#include "rocksdb/db.h"
#include "store/admission.h"
#include "store/disk_tier.h"
#include "store/memory_tier.h"
#include "store/wal.h"
#include "util/key_dedup.h"

namespace psdb::internal {

class Table;

// The store-wide memory budget, shared by all tables.
class BudgetArbiter {
 public:
  // `reserve`: free bytes a background evictor tries to keep (0: none).
  BudgetArbiter(uint64_t budget, uint64_t reserve)
      : budget_(budget), reserve_(reserve) {}
  virtual ~BudgetArbiter() = default;
  // Called (with no table lock held) before `requester` inserts rows that
  // need `bytes` more; evicts rows of some table(s) so they fit. OK when
  // they fit, or when nothing more could be evicted without a write error
  // (the caller may then run over the budget by its batch); the write
  // error when rows could not be written (the disk refuses) and the
  // budget is still short of `bytes`.
  virtual absl::Status MakeRoom(Table* requester, uint64_t bytes) = 0;
  // Called (with no table lock held) after rows were inserted: wakes the
  // background evictor once fewer than reserve() bytes are free. Cheap.
  void AfterInsert() {
    if (reserve_ > 0 &&
        used_.load(std::memory_order_relaxed) + reserve_ > budget_ &&
        !wake_pending_.exchange(true, std::memory_order_acq_rel)) {
      WakeEvictor();
    }
  }

  // The rows' budget now: the configured one less what they yield to
  // RocksDB (set_yielded).
  uint64_t budget() const {
    return budget_ -
           std::min(budget_, yielded_.load(std::memory_order_relaxed));
  }
  uint64_t reserve() const { return reserve_; }
  std::atomic<uint64_t>& used() { return used_; }
  // What the headroom rule (DiskTier::RoomFor) keeps on the disk for the
  // memory tier's rows at shutdown, given `rows` bytes of them resident
  // after the write being checked: the configured share, not the budget
  // now. Rows are admitted without a disk check whenever the budget has
  // room, and the budget grows back to the share as soon as RocksDB unpins
  // what the rows yielded to it; so a close may find the memory tier full
  // whatever it held when the disk last had room.
  uint64_t ShutdownRowBytes(uint64_t rows) const {
    return std::max(rows, budget_);
  }

 protected:
  virtual void WakeEvictor() = 0;
  // Re-arms AfterInsert; the evictor calls it before each round.
  void ClearWake() { wake_pending_.store(false, std::memory_order_release); }
  // Bytes of the budget the rows give up because RocksDB pins more than
  // its share (DiskTier::PinnedOverCapacity).
  uint64_t yielded() const { return yielded_.load(std::memory_order_relaxed); }
  void set_yielded(uint64_t bytes) {
    yielded_.store(bytes, std::memory_order_relaxed);
  }

 private:
  const uint64_t budget_;
  const uint64_t reserve_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> yielded_{0};
  std::atomic<bool> wake_pending_{false};
};

class Table {
 public:
  // `cf` is owned by the table from now on (destroyed with it).
  // `wal`: log every change (nullptr: no log). `lsn_slots`: slots carry
  // LSNs and row writes carry tags (kWal, or a replay at open).
  Table(TableSpec spec, rocksdb::ColumnFamilyHandle* cf, DiskTier* disk,
        BudgetArbiter* budget, const StoreOptions& options, int64_t step,
        uint64_t rows, Wal* wal = nullptr, bool lsn_slots = false);
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const TableSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  int dim() const { return spec_.dim; }
  int state_size() const { return state_size_; }
  rocksdb::ColumnFamilyHandle* cf() const { return cf_; }

  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // Raises the table step to at least `step`.
  void ObserveStep(int64_t step);
  // Exact number of rows of the table (both tiers).
  uint64_t rows() const { return rows_.load(std::memory_order_relaxed); }

  absl::Status Pull(absl::Span<const uint64_t> keys, absl::Span<float> out,
                    const PullOptions& options);
  absl::Status Push(absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads, const PushOptions& options);
  // `serving`: as a serving pull, create no row (a missing key gets its
  // DefaultRow, fresh state and a zero header) and count no sighting.
  // `present` (optional): set to 1 for each key whose row exists, 0 for
  // one that got the serving default (only a serving pull leaves rows
  // absent).
  absl::Status PullRows(absl::Span<const uint64_t> keys, RowBatch* out,
                        bool serving = false,
                        std::vector<uint8_t>* present = nullptr);
  absl::Status PutRows(absl::Span<const uint64_t> keys, const RowBatch& rows);

  // Replay of a logged record `lsn` (see above). ReplayPush's step is the
  // one the push resolved.
  void set_replaying(bool on) { replaying_ = on; }
  absl::Status ReplayPush(uint64_t lsn, absl::Span<const uint64_t> keys,
                          absl::Span<const float> grads, int64_t step);
  // A kPushSums record: distinct keys, their occurrences and summed
  // gradients (DataLoss if a key repeats or the sizes disagree).
  absl::Status ReplayPushSums(uint64_t lsn, absl::Span<const uint64_t> keys,
                              absl::Span<const uint32_t> occ,
                              absl::Span<const float> sums, int64_t step);
  absl::Status ReplayPutRows(uint64_t lsn, absl::Span<const uint64_t> keys,
                             const RowBatch& rows);
  absl::Status ReplayDeleteRows(uint64_t lsn, absl::Span<const uint64_t> keys);

  // Evicts up to n resident rows (dirty ones are written first); returns
  // how many left memory. A dirty row leaves only once its write succeeded:
  // if the disk refuses (DiskTier::RoomFor, or the write fails), the dirty
  // victims stay resident and dirty, *write_error gets the cause, and the
  // clean victims still leave. `background`: for statistics only.
  size_t Evict(size_t n, bool background, absl::Status* write_error);
  // Writes every dirty row to RocksDB; returns how many.
  absl::StatusOr<uint64_t> FlushDirty();
  // Resident rows not yet written to RocksDB (a scan of the index).
  uint64_t DirtyRows();
  // Deletes rows past their TTL from both tiers (no-op when ttl_steps is 0);
  // returns how many. Call after FlushDirty.
  absl::StatusOr<uint64_t> ExpireRows();

  // Migration (Store::ScanKeys, Store::DeleteRows; semantics there).
  absl::Status ScanKeys(
      size_t batch,
      absl::FunctionRef<absl::Status(absl::Span<const uint64_t>)> fn);
  absl::StatusOr<uint64_t> DeleteRows(absl::Span<const uint64_t> keys,
                                      bool existing);

  // Encoded row transfer (Store::ReadEncodedRows, Store::IngestRows;
  // semantics there), in table_migrate.cc.
  absl::Status ReadEncodedRows(absl::Span<const uint64_t> keys,
                               std::vector<uint64_t>* found, std::string* out);
  absl::Status IngestRows(absl::Span<const uint64_t> keys,
                          absl::string_view rows);

  // Store::CreateTable calls this on a table whose column family it has
  // just created, before anyone else can see the table: until a row is
  // written to disk, a key absent from memory has no row at all, and
  // IngestRows looks nothing up on disk.
  void MarkDiskEmpty() {
    disk_may_hold_rows_.store(false, std::memory_order_release);
  }

  // Drops the table's column family (Store::DropTable), after the table's
  // writes in flight; from then on the table writes nothing to disk (its
  // rows are discarded with it). A write to a dropped column family would
  // fail, and RocksDB fails every write of the same write group with it
  // (another table's, the store's metadata). If the drop fails, nothing
  // changed.
  absl::Status DropFamily();

  // Up to `max` keys resident in the memory tier, stripe by stripe.
  std::vector<uint64_t> ResidentKeys(size_t max);
  uint64_t resident_rows() const;
  uint64_t resident_bytes() const;
  size_t slot_bytes() const { return mem_.slot_bytes(); }
  TableStats Stats() const;
  AdmissionCounter& admission() { return admission_; }

 private:
  // kAssign: the caller assigns part of the row (a row on disk is decoded
  // first). kOverwrite: the caller overwrites all of it (nothing is decoded
  // or initialized).
  enum class MissMode { kCreate, kServing, kAssign, kOverwrite };
  // What a caller does with a row once it is resident (called under the
  // row's stripe lock) or when it stays absent (not admitted / serving).
  using ResidentFn = absl::FunctionRef<void(size_t i, uint32_t slot)>;
  using AbsentFn = absl::FunctionRef<void(size_t i)>;

  absl::Status CheckBatch(size_t n) const;
  // Writes a batch of this table's column family (every row write, delete
  // and tag goes through here: see disk_may_hold_rows_ and dropped_); OK
  // without writing once the table is dropped.
  absl::Status WriteRowsToDisk(rocksdb::WriteBatch* batch);
  // Push / PutRows / DeleteRows, logged when wal_ is set and `replay_lsn`
  // is 0; a replay when it is not.
  absl::Status PushImpl(absl::Span<const uint64_t> keys,
                        absl::Span<const float> grads, int64_t step,
                        uint64_t replay_lsn);
  // The optimizer pass of PushImpl over the de-duplicated batch in the
  // thread's scratch; `lsn`: the record (0: none). `step`: the push's step,
  // or 0: ResolveStep(step_arg) when the first row is updated (or at the
  // end), so a refused push leaves the table step as it was. *updated:
  // whether any row was changed.
  absl::Status ApplyPush(int64_t step, int64_t step_arg, uint64_t lsn,
                         bool replay, bool* updated);
  absl::Status PutRowsImpl(absl::Span<const uint64_t> keys,
                           const RowBatch& rows, uint64_t replay_lsn);
  // The calling thread's buffer for the payload of the log record being
  // appended (kWal): it grows to the largest record and is reused.
  static std::string& WalPayload();
  absl::StatusOr<uint64_t> DeleteRowsImpl(absl::Span<const uint64_t> keys,
                                          bool existing, uint64_t lsn,
                                          bool replay);
  // Replay: keep[i] = whether keys[i]'s row (resident, else as its tag on
  // disk says) does not include record `lsn` yet.
  absl::Status ReplayKeep(absl::Span<const uint64_t> keys, uint64_t lsn,
                          std::vector<uint8_t>* keep);
  // The table step a push uses: `step`, or the next one when 0.
  int64_t ResolveStep(int64_t step);
  // The write-ahead log tags of `keys` (ascending) on disk, 0 if none.
  absl::Status ReadTags(absl::Span<const uint64_t> keys, uint64_t* out);
  // Adds the tag of `key` = `lsn` to `batch`; returns lsn.
  void PutTag(rocksdb::WriteBatch* batch, uint64_t key, uint64_t lsn);
  // Brings keys[i] (unique) into memory, calling on_resident or on_absent
  // exactly once for each (under the key's stripe lock for on_resident).
  // occurrences[i] are sightings for admission. Every row read from disk is
  // decoded before the first on_resident call of its round.
  // `refusable`: the call has changed nothing yet, so when the budget is
  // full and the disk refuses the evictions that would make room, it fails
  // (Refused) before changing anything if it would dirty memory: always
  // for kAssign and `dirties` (a push), for kCreate only when a key has
  // no row to read. Rows read from disk are then served without being
  // cached (from scratch slots): reads keep working, within the bound.
  absl::Status Materialize(absl::Span<const uint64_t> keys,
                           absl::Span<const uint32_t> occurrences,
                           MissMode mode, ResidentFn on_resident,
                           AbsentFn on_absent, bool refusable = false,
                           bool dirties = false);
  // A write's keys de-duplicated into *dedup (reset for them), the last
  // occurrence of each winning: (*last)[u] is the position in `keys` of
  // unique key dedup->unique()[u]'s last occurrence.
  static void LastOccurrences(absl::Span<const uint64_t> keys, KeyDedup* dedup,
                              std::vector<uint32_t>* last);
  // The keys of a batch that were not resident, as Materialize takes them:
  // each key, its sightings and its index among the batch's unique keys.
  struct Misses {
    std::vector<uint64_t> keys;
    std::vector<uint32_t> occurrences;
    std::vector<uint32_t> index;
  };
  // Looks up ukeys[u] for each u (each u of *only, if given), one key at
  // a time: on_hit(u, slot) runs under the key's stripe lock if it is
  // resident, else the key is appended to *misses with occ[u] sightings (1
  // when occ is empty).
  void LookUpOrMiss(absl::Span<const uint64_t> ukeys,
                    absl::Span<const uint32_t> occ, ResidentFn on_hit,
                    Misses* misses,
                    const std::vector<uint32_t>* only = nullptr);
  // The error of a call refused for want of memory while the disk refuses
  // writes: ResourceExhausted for a full disk, Unavailable for another
  // I/O error, naming the table and the cause.
  absl::Status Refused(const absl::Status& cause) const;
  // Locked fallback of Materialize for one key. `admitted` is the
  // admission decision Materialize already made for it (1 / 0), or -1.
  absl::Status MaterializeLocked(uint64_t key, uint32_t occurrences,
                                 int8_t admitted, MissMode mode, size_t i,
                                 ResidentFn on_resident, AbsentFn on_absent);
  absl::Status DataLoss(uint64_t key, const absl::Status& cause) const;
  // Marks a resident row modified.
  void MarkDirty(Stripe& stripe, uint32_t slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // Removes a resident row. REQUIRES: index maps key->slot.
  void RemoveLocked(Stripe& stripe, uint64_t key, uint32_t slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // Drops from the stripe's dirty list the slots that are no longer its
  // dirty rows, and duplicates.
  void CompactDirtyList(Stripe& stripe, uint32_t stripe_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);

  const TableSpec spec_;
  const int state_size_;
  const size_t row_floats_;
  const size_t max_batch_keys_;
  rocksdb::ColumnFamilyHandle* const cf_;
  DiskTier* const disk_;
  BudgetArbiter* const budget_;
  MemoryTier mem_;
  AdmissionCounter admission_;
  std::atomic<int64_t> step_;
  std::atomic<uint64_t> rows_;
  // False only from MarkDiskEmpty() until the first row written to disk
  // (WriteRowsToDisk sets it before the write, and rows leave memory only
  // after they are written, so a key that a probe finds absent while this
  // is false has no row on disk).
  std::atomic<bool> disk_may_hold_rows_{true};
  // Writers hold it shared around their RocksDB write; DropFamily
  // exclusively.
  absl::Mutex disk_write_mu_;
  bool dropped_ ABSL_GUARDED_BY(disk_write_mu_) = false;
  absl::Mutex evict_mu_;  // one evictor / flusher at a time per table
  Wal* const wal_;
  // Held from a record's Append to the end of its apply (kWal).
  absl::Mutex wal_mu_;
  bool replaying_ = false;

  // Statistics.
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> created_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> background_evictions_{0};
  std::atomic<uint64_t> dirty_writes_{0};
  std::atomic<uint64_t> write_errors_{0};        // refused eviction writes
  std::atomic<uint64_t> non_finite_updates_{0};  // updates undone
  std::atomic<uint64_t> not_admitted_{0};
};

}  // namespace psdb::internal

#endif  // PSDB_STORE_TABLE_H_
