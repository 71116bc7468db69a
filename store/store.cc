#include "psdb/store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/file_io_rocksdb.h"
#include "store/memory_budget.h"
#include "store/store_impl.h"
#include "store/store_meta.h"
#include "util/status_macros.h"

namespace psdb {
namespace {

using internal::Table;

using internal::kMetaClean;
using internal::kMetaRows;
using internal::kMetaStep;
using internal::kMetaTable;

// Flush attempts of a Close before it gives up (see Impl::Close).
constexpr int kCloseFlushAttempts = 4;
// How long a close waits for running compactions before each retry.
constexpr absl::Duration kCloseCompactionWait = absl::Minutes(2);

// Rows the background evictor evicts per Table::Evict call: large enough
// to amortize a WriteBatch, small enough that a request-path eviction
// waiting on the same table is not held up long.
constexpr size_t kEvictorChunkRows = 1024;

// The table of `all` holding the most memory; `start` unless one holds more.
Table* MostResident(const std::vector<std::shared_ptr<Table>>& all,
                    Table* start) {
  Table* best = start;
  for (const auto& t : all) {
    if (best == nullptr || t->resident_bytes() > best->resident_bytes()) {
      best = t.get();
    }
  }
  return best;
}

uint64_t EvictorReserve(const StoreOptions& options) {
  if (!options.background_eviction) return 0;
  return std::min<uint64_t>(internal::SplitMemoryBudget(options).row_bytes / 64,
                            256ull << 20);
}

}  // namespace

Store::Impl::Impl(const StoreOptions& options, std::string path)
    : internal::BudgetArbiter(internal::SplitMemoryBudget(options).row_bytes,
                              EvictorReserve(options)),
      options_(options),
      path_(std::move(path)),
      fs_(internal::FileSystemOr(options.file_system)),
      io_(internal::FileIoOver(fs_)) {}

Store::Impl::~Impl() { (void)Close(); }

absl::Status Store::Impl::Close() {
  absl::MutexLock cl(&close_mu_);
  if (closed_.has_value()) return *closed_;
  closing_.store(true, std::memory_order_release);
  StopDeleter();  // before the flush: the rows it deletes are not kept
  StopEvictor();
  absl::Status status;
  if (opened_ && !read_only()) {
    // Close = Flush: dirty rows, memtables, steps and row counts reach
    // files. The headroom rule (disk_tier.h) keeps room for that but not
    // for a compaction's output, which takes space until the compaction
    // ends: so no compaction starts from here on, and a failed flush is
    // tried again a few times, each after the running compactions ended (a
    // compaction that ran out of space frees its output when it fails).
    // Flush resumes RocksDB after a background error.
    disk_->StopCompactions();
    for (int attempt = 0; attempt < kCloseFlushAttempts; ++attempt) {
      if (attempt > 0) {
        disk_->AwaitCompactions(kCloseCompactionWait);
        absl::SleepFor(absl::Milliseconds(100) * attempt);
      }
      status = FlushAll();
      // The clean mark is a metadata write and flush like the others: it
      // is retried with them.
      if (status.ok()) status = PersistMeta(/*clean=*/true);
      if (status.ok()) break;
      // The ballast's space is for exactly this flush.
      absl::MutexLock rl(&reserve_mu_);
      if (reserve_ != nullptr && reserve_->held()) (void)reserve_->Release();
    }
    if (!status.ok()) {
      uint64_t dirty = 0;
      for (const auto& t : Snapshot()) dirty += t->DirtyRows();
      status = absl::Status(
          status.code(),
          absl::StrCat(
              "close of store ", path_, " could not flush: ", dirty,
              " dirty rows of the memory tier and ", disk_->MemtableBytes(),
              " bytes of RocksDB memtables are not in files and are lost; "
              "the data directory opens as after a crash, with the last "
              "checkpoint's rows and those flushed since (",
              status.message(), ")"));
    }
  }
  {
    absl::MutexLock l(&tables_mu_);
    tables_.clear();  // destroys column-family handles before the DB
    ro_generation_.reset();
  }
  wal_.reset();
  disk_.reset();
  closed_ = status;
  return status;
}

void Store::Impl::WakeEvictor() {
  absl::MutexLock l(&evictor_mu_);
  evictor_wake_ = true;
}

void Store::Impl::StopEvictor() {
  {
    absl::MutexLock l(&evictor_mu_);
    evictor_stop_ = true;
  }
  evictor_stopping_.store(true, std::memory_order_relaxed);
  if (evictor_.joinable()) evictor_.join();
}

void Store::Impl::YieldToRocksdb() {
  // disk_ changes once, under tables_mu_ (MaybeBecomeWritable).
  absl::ReaderMutexLock l(&tables_mu_);
  set_yielded(disk_->PinnedOverCapacity());
}

void Store::Impl::EvictorLoop() {
  while (true) {
    {
      absl::MutexLock l(&evictor_mu_);
      evictor_mu_.Await(absl::Condition(this, &Impl::EvictorShouldRun));
      if (evictor_stop_) return;
      evictor_wake_ = false;
    }
    ClearWake();  // inserts from now on may wake us for another round
    YieldToRocksdb();
    const uint64_t target = budget() - std::min(budget(), 2 * reserve());
    while (!evictor_stopping_.load(std::memory_order_relaxed)) {
      const uint64_t used_now = used().load(std::memory_order_relaxed);
      if (used_now <= target) break;
      const std::vector<std::shared_ptr<Table>> all = Snapshot();
      Table* const victim = MostResident(all, nullptr);
      if (victim == nullptr || victim->resident_rows() == 0) break;
      const size_t rows = std::min<uint64_t>(
          kEvictorChunkRows, (used_now - target + victim->slot_bytes() - 1) /
                                 victim->slot_bytes());
      absl::Status write_error;
      const size_t freed =
          victim->Evict(rows, /*background=*/true, &write_error);
      // An error (the disk refuses) leaves the dirty rows resident and
      // dirty: the next round tries again, requests that need room are
      // refused meanwhile (MakeRoom), and Flush or Close reports it.
      if (!write_error.ok() || freed == 0) break;
    }
    RestoreReserve(/*force=*/false);
  }
}

std::vector<std::shared_ptr<Table>> Store::Impl::Snapshot() const {
  absl::ReaderMutexLock l(&tables_mu_);
  std::vector<std::shared_ptr<Table>> out;
  out.reserve(tables_.size());
  for (const auto& [n, t] : tables_) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  return out;
}

absl::Status Store::Impl::PersistMeta(bool clean) {
  std::vector<std::pair<std::string, std::string>> kvs;
  for (const auto& t : Snapshot()) {
    kvs.emplace_back(absl::StrCat(kMetaStep, t->name()),
                     absl::StrCat(t->step()));
    kvs.emplace_back(absl::StrCat(kMetaRows, t->name()),
                     absl::StrCat(t->rows()));
  }
  if (wal_ != nullptr) {
    kvs.emplace_back(std::string(internal::kMetaWalNextLsn),
                     absl::StrCat(wal_->next_lsn()));
  }
  kvs.emplace_back(std::string(kMetaClean), clean ? "1" : "0");
  return disk_->PutMetaBatch(kvs);
}

absl::Status Store::Impl::CreateTable(const TableSpec& spec) {
  PSDB_RETURN_IF_ERROR(ValidateTableSpec(spec));
  MaybeBecomeWritable();
  absl::MutexLock l(&tables_mu_);
  auto it = tables_.find(spec.name);
  // Creating a table that exists with the same spec writes nothing, so a
  // read-only store allows it too (a model opening its tables idempotently
  // on a checkpoint, as ps-train's best-checkpoint evaluation does).
  if (it != tables_.end() && it->second->spec() == spec) {
    return absl::OkStatus();
  }
  PSDB_RETURN_IF_ERROR(CheckWritable("CreateTable"));
  if (it != tables_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "table ", spec.name, " exists with a different spec: have ",
        TableSpecToJson(it->second->spec()), ", asked for ",
        TableSpecToJson(spec)));
  }
  // Logged first: replay skips the records of an older table of this name.
  if (wal_ != nullptr) {
    PSDB_RETURN_IF_ERROR(wal_->WaitWritten(
        wal_->Append(internal::WalRecordType::kCreateTable, spec.name)));
  }
  // Column family first, then the spec (synced): a crash in between leaves
  // an orphan column family, which Open drops.
  PSDB_ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * cf,
                        disk_->CreateCf(spec.name));
  absl::Status s = disk_->PutMetaBatch(
      {{absl::StrCat(kMetaTable, spec.name), TableSpecToJson(spec)},
       {absl::StrCat(kMetaStep, spec.name), "0"},
       {absl::StrCat(kMetaRows, spec.name), "0"}});
  if (!s.ok()) {
    (void)disk_->DropCf(cf);
    disk_->DestroyCf(cf);
    return s;
  }
  auto table = std::make_shared<Table>(spec, cf, disk_.get(), this, options_, 0,
                                       0, wal_.get(), wal_lsn_slots());
  table->MarkDiskEmpty();  // the column family was just created
  tables_[spec.name] = std::move(table);
  return absl::OkStatus();
}

absl::Status Store::Impl::DropTable(absl::string_view name) {
  PSDB_RETURN_IF_ERROR(Writable("DropTable"));
  AwaitDeletes();
  PSDB_RETURN_IF_ERROR(ValidateTableName(name));
  std::shared_ptr<Table> t;
  {
    absl::MutexLock l(&tables_mu_);
    auto it = tables_.find(name);
    if (it == tables_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown table ", name));
    }
    PSDB_RETURN_IF_ERROR(it->second->DropFamily());
    t = std::move(it->second);
    tables_.erase(it);
    (void)disk_->DeleteMeta(absl::StrCat(kMetaTable, name));
    (void)disk_->DeleteMeta(absl::StrCat(kMetaStep, name));
    (void)disk_->DeleteMeta(absl::StrCat(kMetaRows, name));
    (void)disk_->DeleteMetaPrefix(internal::WalTagPrefix(name));
  }
  // `t` dies here or when the last in-flight call on it returns.
  return absl::OkStatus();
}

std::vector<TableSpec> Store::Impl::ListTables() const {
  std::vector<TableSpec> out;
  for (const auto& t : Snapshot()) out.push_back(t->spec());
  return out;
}

absl::StatusOr<std::shared_ptr<Table>> Store::Impl::Find(
    absl::string_view name) const {
  {
    absl::ReaderMutexLock l(&tables_mu_);
    auto it = tables_.find(name);
    if (it != tables_.end()) return it->second;
  }
  PSDB_RETURN_IF_ERROR(ValidateTableName(name));
  return absl::NotFoundError(absl::StrCat("unknown table ", name));
}

absl::Status Store::Impl::MakeRoom(Table* requester, uint64_t bytes) {
  absl::Status write_error;
  for (int round = 0; round < 8; ++round) {
    YieldToRocksdb();  // the last round's writes grew the memtables
    const uint64_t used_now = used().load(std::memory_order_relaxed);
    if (used_now + bytes <= budget()) return absl::OkStatus();
    const uint64_t deficit = used_now + bytes - budget();
    // Evict from the requester while it holds at least its fair share of the
    // budget; otherwise from the table holding the most memory.
    std::vector<std::shared_ptr<Table>> all = Snapshot();
    Table* victim = requester;
    const uint64_t fair = budget() / std::max<size_t>(1, all.size());
    if (requester->resident_bytes() < std::min(fair, deficit) ||
        requester->resident_rows() == 0) {
      victim = MostResident(all, requester);
    }
    auto evict = [&](Table* t) -> size_t {
      // Evict a little more than needed (>= 32 rows or 1/16 of the
      // deficit again) so that a stream of misses does not evict one row
      // at a time.
      const size_t rows = static_cast<size_t>(
          (deficit + deficit / 16 + t->slot_bytes() - 1) / t->slot_bytes());
      absl::Status error;
      const size_t freed = t->Evict(std::max<size_t>(rows, 32),
                                    /*background=*/false, &error);
      if (!error.ok() && write_error.ok()) write_error = std::move(error);
      return freed;
    };
    if (evict(victim) > 0) continue;
    if (victim != requester && evict(requester) > 0) continue;
    break;
  }
  YieldToRocksdb();
  if (used().load(std::memory_order_relaxed) + bytes <= budget()) {
    return absl::OkStatus();
  }
  // Short of room: refused if a write failed, else nothing was evictable
  // (rows of calls in flight): run over budget for now.
  return write_error;
}

void Store::Impl::DeleteLater(std::shared_ptr<internal::Table> table,
                              std::vector<uint64_t> keys) {
  if (keys.empty()) return;
  absl::MutexLock l(&deletes_mu_);
  delete_jobs_.push_back({std::move(table), std::move(keys)});
  deletes_pending_.fetch_add(1, std::memory_order_acq_rel);
  if (!deleter_.joinable()) deleter_ = std::thread([this] { DeleterLoop(); });
}

void Store::Impl::AwaitDeletes() const {
  if (deletes_pending_.load(std::memory_order_acquire) == 0) return;
  absl::MutexLock l(&deletes_mu_);
  deletes_mu_.Await(absl::Condition(
      +[](const std::atomic<size_t>* n) {
        return n->load(std::memory_order_acquire) == 0;
      },
      &deletes_pending_));
}

absl::Status Store::Impl::WaitForDeletes() {
  AwaitDeletes();
  absl::MutexLock l(&deletes_mu_);
  absl::Status error = std::move(delete_error_);
  delete_error_ = absl::OkStatus();
  return error;
}

void Store::Impl::DeleterLoop() {
  while (true) {
    DeleteJob* job;
    {
      absl::MutexLock l(&deletes_mu_);
      deletes_mu_.Await(absl::Condition(this, &Impl::DeleterShouldRun));
      if (delete_jobs_.empty()) return;  // stopping, nothing left
      job = &delete_jobs_.front();       // stays put: only this thread pops
    }
    std::vector<uint64_t>& keys = job->keys;
    std::sort(keys.begin(), keys.end());  // a key listed twice goes once
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    absl::Status status;
    const size_t chunk = std::max<size_t>(1, options_.max_batch_keys);
    for (size_t begin = 0; begin < job->keys.size() && status.ok();
         begin += chunk) {
      status = job->table
                   ->DeleteRows(
                       absl::MakeConstSpan(job->keys).subspan(
                           begin, std::min(chunk, job->keys.size() - begin)),
                       /*existing=*/true)
                   .status();
    }
    absl::MutexLock l(&deletes_mu_);
    if (!status.ok() && delete_error_.ok()) {
      delete_error_ = Annotate(
          status, absl::StrCat("background delete of ", job->keys.size(),
                               " rows of table ", job->table->name()));
    }
    delete_jobs_.pop_front();
    deletes_pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void Store::Impl::StopDeleter() {
  std::thread deleter;
  {
    absl::MutexLock l(&deletes_mu_);
    deleter_stop_ = true;
    deleter.swap(deleter_);
  }
  if (deleter.joinable()) deleter.join();
}

StoreStats Store::Impl::Stats() const {
  AwaitDeletes();
  StoreStats s;
  for (const auto& t : Snapshot()) s.tables.push_back(t->Stats());
  // The whole budget, and what of it rows and RocksDB's cache (blocks and
  // memtables) use now (store/memory_budget.h).
  s.memory_budget_bytes = options_.memory_budget_bytes;
  s.memory_used_bytes =
      const_cast<Impl*>(this)->used().load(std::memory_order_relaxed);
  if (!closing_.load(std::memory_order_acquire)) {
    // disk_ changes once, under tables_mu_ (MaybeBecomeWritable).
    absl::ReaderMutexLock l(&tables_mu_);
    s.memory_used_bytes += disk_->CacheUsage();
    s.memory_yielded_bytes = yielded();
    s.disk_running_compactions =
        disk_->IntProperty(nullptr, "rocksdb.num-running-compactions");
  }
  {
    absl::MutexLock l(&reserve_mu_);
    if (reserve_ != nullptr) {
      s.disk_reserve_bytes = reserve_->bytes();
      s.disk_reserve_held_bytes = reserve_->held() ? reserve_->bytes() : 0;
    }
  }
  absl::MutexLock l(&stats_mu_);
  s.checkpoints = checkpoints_;
  s.last_checkpoint_duration = last_checkpoint_;
  s.total_checkpoint_duration = total_checkpoint_;
  return s;
}

absl::Status Store::Impl::Flush() {
  PSDB_RETURN_IF_ERROR(Writable("Flush"));
  PSDB_RETURN_IF_ERROR(FlushAll());
  RestoreReserve(/*force=*/false);
  return absl::OkStatus();
}

absl::Status Store::Impl::FlushAll() {
  AwaitDeletes();
  const std::optional<internal::Wal::Cut> cut = WalCut();
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  for (const auto& t : Snapshot()) {
    PSDB_RETURN_IF_ERROR(t->FlushDirty().status());
    cfs.push_back(t->cf());
  }
  PSDB_RETURN_IF_ERROR(PersistMeta(/*clean=*/false));
  PSDB_RETURN_IF_ERROR(disk_->Flush(cfs));
  return WalTruncate(cut);
}

// ---------------------------------------------------------------------------
// Store

absl::StatusOr<Durability> ParseDurability(absl::string_view name) {
  if (name == "checkpoint") return Durability::kCheckpoint;
  if (name == "wal") return Durability::kWal;
  return absl::InvalidArgumentError(
      absl::StrCat("durability \"", name, "\": expected checkpoint or wal"));
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

std::string Store::DbPath(absl::string_view path) {
  return absl::StrCat(path, "/db");
}

std::string Store::RestoreTmpPath(absl::string_view path) {
  return absl::StrCat(DbPath(path), ".restore-tmp");
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options,
                                                   absl::string_view path) {
  auto impl = std::make_unique<Impl>(options, std::string(path));
  PSDB_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Store>> Store::OpenCheckpoint(
    const StoreOptions& options, absl::string_view checkpoint_dir, int shard_id,
    ShardFileCheck check) {
  auto impl = std::make_unique<Impl>(options, std::string(checkpoint_dir));
  PSDB_RETURN_IF_ERROR(impl->OpenCheckpointShard(shard_id, check));
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::Status Store::CreateTable(const TableSpec& spec) {
  return impl_->CreateTable(spec);
}
absl::Status Store::DropTable(absl::string_view name) {
  return impl_->DropTable(name);
}
std::vector<TableSpec> Store::ListTables() const { return impl_->ListTables(); }
absl::StatusOr<TableSpec> Store::GetTable(absl::string_view name) const {
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(name));
  return t->spec();
}

absl::Status Store::Pull(absl::string_view table,
                         absl::Span<const uint64_t> keys, absl::Span<float> out,
                         const PullOptions& options) {
  // Read before Find: a table found while the store was read-only may be
  // of its read-only generation (Impl::MaybeBecomeWritable).
  const bool read_only = impl_->read_only();
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  if (read_only && !options.serving) {
    PullOptions serving = options;
    serving.serving = true;
    return t->Pull(keys, out, serving);
  }
  return t->Pull(keys, out, options);
}

absl::Status Store::Push(absl::string_view table,
                         absl::Span<const uint64_t> keys,
                         absl::Span<const float> grads,
                         const PushOptions& options) {
  PSDB_RETURN_IF_ERROR(impl_->Writable("Push"));
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->Push(keys, grads, options);
}

absl::Status Store::PullRows(absl::string_view table,
                             absl::Span<const uint64_t> keys, RowBatch* out) {
  const bool read_only = impl_->read_only();  // before Find: see Pull
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->PullRows(keys, out, /*serving=*/read_only);
}

absl::Status Store::PutRows(absl::string_view table,
                            absl::Span<const uint64_t> keys,
                            const RowBatch& rows) {
  PSDB_RETURN_IF_ERROR(impl_->Writable("PutRows"));
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->PutRows(keys, rows);
}

absl::Status Store::ReadRows(absl::string_view table,
                             absl::Span<const uint64_t> keys, RowBatch* out,
                             std::vector<uint8_t>* present) {
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->PullRows(keys, out, /*serving=*/true, present);
}

absl::Status Store::ScanKeys(
    absl::string_view table, size_t batch,
    absl::FunctionRef<absl::Status(absl::Span<const uint64_t>)> fn) {
  impl_->AwaitDeletes();
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->ScanKeys(batch, fn);
}

absl::StatusOr<uint64_t> Store::DeleteRows(absl::string_view table,
                                           absl::Span<const uint64_t> keys,
                                           bool existing) {
  PSDB_RETURN_IF_ERROR(impl_->Writable("DeleteRows"));
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->DeleteRows(keys, existing);
}

absl::Status Store::ReadEncodedRows(absl::string_view table,
                                    absl::Span<const uint64_t> keys,
                                    std::vector<uint64_t>* found,
                                    std::string* out) {
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->ReadEncodedRows(keys, found, out);
}

absl::Status Store::IngestRows(absl::string_view table,
                               absl::Span<const uint64_t> keys,
                               absl::string_view rows) {
  PSDB_RETURN_IF_ERROR(impl_->Writable("IngestRows"));
  impl_->AwaitDeletes();
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->IngestRows(keys, rows);
}

void Store::DeleteRowsLater(absl::string_view table,
                            std::vector<uint64_t> keys) {
  if (impl_->read_only()) return;  // nothing to delete; before Find: Pull
  absl::StatusOr<std::shared_ptr<Table>> t = impl_->Find(table);
  if (!t.ok()) return;
  impl_->DeleteLater(*std::move(t), std::move(keys));
}

absl::Status Store::WaitForDeletes() { return impl_->WaitForDeletes(); }

absl::StatusOr<CheckpointInfo> Store::Checkpoint(
    absl::string_view root_dir, const CheckpointOptions& options) {
  PSDB_RETURN_IF_ERROR(impl_->Writable("Checkpoint"));
  impl_->AwaitDeletes();
  absl::StatusOr<CheckpointInfo> info = impl_->Checkpoint(root_dir, options);
  if (info.ok()) impl_->RestoreReserve(/*force=*/false);
  return info;
}

absl::StatusOr<Store::ShardCheckpoint> Store::CheckpointShard(
    absl::string_view shard_dir) {
  PSDB_RETURN_IF_ERROR(impl_->Writable("Checkpoint"));
  impl_->AwaitDeletes();
  absl::StatusOr<ShardCheckpoint> shard = impl_->CheckpointShard(shard_dir);
  if (shard.ok()) impl_->RestoreReserve(/*force=*/false);
  return shard;
}

StoreStats Store::Stats() const { return impl_->Stats(); }

bool Store::read_only() const { return impl_->read_only(); }

absl::StatusOr<std::vector<uint64_t>> Store::ResidentKeys(
    absl::string_view table, size_t max) const {
  impl_->AwaitDeletes();
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, impl_->Find(table));
  return t->ResidentKeys(max);
}

absl::Status Store::Flush() { return impl_->Flush(); }

absl::Status Store::Close() { return impl_->Close(); }

}  // namespace psdb
