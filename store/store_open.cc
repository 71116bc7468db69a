// Store::Impl's open paths (store/store_impl.h): a store directory, a
// restore into it, a checkpoint shard read-only, a full disk's read-only
// fallback and its way back to writable.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "store/memory_budget.h"
#include "store/shard_files.h"
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
using internal::kMetaVersion;

int64_t ParseI64(const absl::StatusOr<std::string>& v) {
  int64_t x = 0;
  if (v.ok()) (void)absl::SimpleAtoi(*v, &x);
  return x;
}

// The store format version recorded in `disk` (0: none), or why the store
// cannot be opened by this build.
absl::StatusOr<uint32_t> StoredFormatVersion(internal::DiskTier* disk,
                                             absl::string_view path) {
  absl::StatusOr<std::string> version = disk->GetMeta(kMetaVersion);
  if (absl::IsNotFound(version.status())) return 0;
  if (!version.ok()) return version.status();
  uint32_t v = 0;
  if (!absl::SimpleAtoi(*version, &v)) {
    return absl::DataLossError(absl::StrCat(
        "store ", path, ": unreadable format version \"", *version, "\""));
  }
  if (v > kStoreFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store ", path, " has format version ", v,
        ", newer than this build supports (", kStoreFormatVersion, ")"));
  }
  return v;
}

uint64_t CountRows(internal::DiskTier* disk, rocksdb::ColumnFamilyHandle* cf) {
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(disk->db()->NewIterator(ro, cf));
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  return n;
}

}  // namespace

absl::Status Store::Impl::Open() {
  if (path_.empty()) {
    return absl::InvalidArgumentError("store path is empty");
  }
  if (options_.index_stripes < 1 || options_.index_stripes > (1 << 16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "index_stripes must be 1..65536, got ", options_.index_stripes));
  }
  if (options_.max_batch_keys == 0) {
    return absl::InvalidArgumentError("max_batch_keys must be > 0");
  }
  PSDB_RETURN_IF_ERROR(internal::ValidateMemoryBudget(options_));
  bool created = false;
  if (!io_->Exists(path_)) {
    if (!options_.create_if_missing) {
      return absl::NotFoundError(
          absl::StrCat("store directory ", path_, " does not exist"));
    }
    if (absl::Status s = io_->CreateDirs(path_); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("cannot create ", path_, ": ", s.message()));
    }
    created = true;
  } else if (!io_->IsDirectory(path_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store path ", path_, " is not a directory"));
  }
  // A restore that died before its rename left this; nothing uses it.
  if (absl::Status s = io_->DeleteRecursively(RestoreTmpPath(path_)); !s.ok()) {
    return absl::InternalError(absl::StrCat(
        "cannot remove ", RestoreTmpPath(path_), ": ", s.message()));
  }
  const std::string db_path = DbPath(path_);
  const bool had_db = io_->Exists(db_path + "/CURRENT");
  if (options_.disk_reserve_bytes > 0) {
    absl::MutexLock l(&reserve_mu_);
    reserve_ = std::make_unique<internal::DiskReserve>(
        fs_, path_, options_.disk_reserve_bytes);
    // A new store on a disk that cannot hold the reserve asked for fails
    // at once. An existing one opens without it if it must (below).
    if (!had_db) PSDB_RETURN_IF_ERROR(reserve_->Write());
  }
  if (had_db || options_.restore_from.empty()) {
    absl::Status s = OpenDb(std::nullopt, /*fresh=*/!had_db);
    if (s.ok()) {
      RestoreReserve(/*force=*/true);  // if missing, and the disk has room
      return s;
    }
    if (!had_db || !absl::IsResourceExhausted(s)) return s;
    // The disk refused a write the open needs (RocksDB writes a new
    // MANIFEST at every open). The ballast's room is for such a write:
    // give it back and open again. Stats() shows the reserve missing
    // until RestoreReserve writes it again.
    bool released = false;
    {
      absl::MutexLock l(&reserve_mu_);
      if (reserve_ != nullptr && reserve_->held()) {
        released = reserve_->Release().ok();
        // Not written back at once: the room is this open's.
        last_reserve_try_ = absl::Now();
      }
    }
    if (released) {
      DropFailedOpen();
      s = OpenDb(std::nullopt, /*fresh=*/false);
      if (s.ok() || !absl::IsResourceExhausted(s)) return s;
    }
    // Still refused: serve the rows read-only rather than not at all.
    DropFailedOpen();
    return OpenReadOnlyOnFullDisk(s);
  }
  // A restore: on failure, leave <path> as it was before the attempt.
  const bool db_existed = io_->Exists(db_path);  // without CURRENT
  absl::StatusOr<v1::Manifest> m = RestoreInto(db_path);
  absl::Status s = m.ok() ? OpenDb(*std::move(m), /*fresh=*/true) : m.status();
  if (s.ok()) return s;
  {
    absl::MutexLock l(&tables_mu_);
    tables_.clear();  // column-family handles before the DB
  }
  disk_.reset();
  if (restore_placed_) {
    (void)io_->DeleteRecursively(db_path);
    if (db_existed) (void)io_->CreateDir(db_path);  // was empty
    (void)io_->SyncDir(path_);
  }
  if (created) {  // only if empty
    absl::StatusOr<std::vector<std::string>> left = io_->ListChildren(path_);
    if (left.ok() && left->empty()) (void)io_->DeleteRecursively(path_);
  }
  return s;
}

void Store::Impl::DropFailedOpen() {
  {
    absl::MutexLock l(&tables_mu_);
    tables_.clear();  // column-family handles before the DB
  }
  wal_.reset();
  wal_records_ = 0;
  disk_.reset();
}

void Store::Impl::RestoreReserve(bool force) {
  if (read_only() || !opened_) return;
  absl::MutexLock l(&reserve_mu_);
  if (reserve_ == nullptr || reserve_->held() ||
      closing_.load(std::memory_order_acquire)) {
    return;
  }
  const absl::Time now = absl::Now();
  if (!force &&
      now - last_reserve_try_ < options_.disk_reserve_retry_interval) {
    return;
  }
  last_reserve_try_ = now;
  // The headroom rule's room stays free after the ballast (RoomFor: the
  // memtables and the memory tier's rows, what a close must write).
  const uint64_t rows =
      ShutdownRowBytes(used().load(std::memory_order_relaxed));
  if (!disk_->RoomFor(reserve_->bytes(), rows).ok()) {
    return;
  }
  // On a file system that cannot say how much is free, the write itself
  // tells (its partial file is removed).
  (void)reserve_->Write();
}

absl::StatusOr<std::vector<std::shared_ptr<Table>>> Store::Impl::TablesFromMeta(
    absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*>& by_name,
    const v1::Manifest* restored, bool create_missing) {
  absl::StatusOr<std::string> clean_meta = disk_->GetMeta(kMetaClean);
  const bool clean = !clean_meta.ok() || *clean_meta == "1";
  absl::flat_hash_map<std::string, const v1::TableManifest*> manifest_tables;
  if (restored != nullptr) {
    for (const v1::TableManifest& t : restored->tables()) {
      manifest_tables[t.spec().name()] = &t;
    }
  }
  std::vector<std::shared_ptr<Table>> opened;
  for (const auto& [key, json] : disk_->ScanMeta(kMetaTable)) {
    absl::StatusOr<TableSpec> spec = TableSpecFromJson(json);
    if (!spec.ok()) {
      return absl::DataLossError(absl::StrCat(
          "store ", path_, ": spec of ", key, ": ", spec.status().message()));
    }
    const std::string& name = spec->name;
    rocksdb::ColumnFamilyHandle* cf = nullptr;
    auto it = by_name.find(name);
    if (it != by_name.end()) {
      cf = it->second;
      by_name.erase(it);  // owned by the table now
    } else if (!create_missing) {
      return absl::FailedPreconditionError(
          absl::StrCat("table ", name, " needs its column family created"));
    } else {
      PSDB_ASSIGN_OR_RETURN(cf, disk_->CreateCf(name));
    }
    int64_t step = ParseI64(disk_->GetMeta(absl::StrCat(kMetaStep, name)));
    uint64_t rows = static_cast<uint64_t>(
        ParseI64(disk_->GetMeta(absl::StrCat(kMetaRows, name))));
    if (auto mt = manifest_tables.find(name); mt != manifest_tables.end()) {
      step = std::max(step, mt->second->step());
      rows = mt->second->rows();
    } else if (!clean) {
      rows = CountRows(disk_.get(), cf);
    }
    opened.push_back(std::make_shared<Table>(std::move(*spec), cf, disk_.get(),
                                             this, options_, step, rows,
                                             wal_.get(), wal_lsn_slots()));
  }
  return opened;
}

absl::Status Store::Impl::OpenDb(std::optional<v1::Manifest> restored,
                                 bool fresh) {
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> cfs;
  PSDB_ASSIGN_OR_RETURN(
      disk_, internal::DiskTier::Open(DbPath(path_), options_, &cfs));
  PSDB_ASSIGN_OR_RETURN(
      std::vector<std::shared_ptr<Table>> opened,
      TablesOfDb(cfs, restored.has_value() ? &*restored : nullptr, fresh));
  {
    absl::MutexLock l(&tables_mu_);
    for (auto& t : opened) tables_[t->name()] = std::move(t);
  }
  // "Not closed cleanly" from the first row write on; a store that only
  // reads writes nothing, so it opens on a full disk.
  PSDB_RETURN_IF_ERROR(disk_->PutMetaBeforeRowWrites(kMetaClean, "0"));
  if (restored.has_value()) PSDB_RETURN_IF_ERROR(PersistMeta(false));
  PSDB_RETURN_IF_ERROR(ReplayWal());
  opened_ = true;
  if (reserve() > 0) evictor_ = std::thread([this] { EvictorLoop(); });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::shared_ptr<Table>>> Store::Impl::TablesOfDb(
    const std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>>&
        cfs,
    const v1::Manifest* restored, bool fresh) {
  // Orphan handles are destroyed on every path out of here.
  absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  for (auto& [n, h] : cfs) by_name[n] = h;
  auto cleanup = [&]() {
    for (auto& [n, h] : by_name) {
      if (h != nullptr) disk_->DestroyCf(h);
    }
    by_name.clear();
  };

  // A store that keeps a log records the format that may hold kPushSums
  // records before the log is opened (store_impl.h).
  const uint32_t want_version = options_.durability == Durability::kWal
                                    ? kStoreFormatVersion
                                    : kStoreFormatVersionWithoutLog;
  absl::StatusOr<uint32_t> version = StoredFormatVersion(disk_.get(), path_);
  if (!version.ok()) {
    cleanup();
    return version.status();
  }
  if (*version < want_version) {
    if (absl::Status s =
            disk_->PutMeta(kMetaVersion, absl::StrCat(want_version));
        !s.ok()) {
      cleanup();
      return s;
    }
  }
  if (absl::Status s = PrepareWal(fresh); !s.ok()) {
    cleanup();
    return s;
  }

  absl::StatusOr<std::vector<std::shared_ptr<Table>>> opened =
      TablesFromMeta(by_name, restored, /*create_missing=*/true);
  if (!opened.ok()) {
    cleanup();
    return opened.status();
  }
  // Column families without a spec were left by a crash inside CreateTable.
  for (auto& [n, h] : by_name) {
    (void)disk_->DropCf(h);
  }
  cleanup();
  return opened;
}

absl::Status Store::Impl::OpenCheckpointShard(int shard_id,
                                              ShardFileCheck check) {
  PSDB_RETURN_IF_ERROR(internal::ValidateMemoryBudget(options_));
  PSDB_ASSIGN_OR_RETURN(v1::Manifest manifest, ReadManifest(path_, *io_));
  int shard_index = -1;
  for (int i = 0; i < manifest.shards_size(); ++i) {
    if (manifest.shards(i).shard_id() == shard_id) shard_index = i;
  }
  if (shard_index < 0) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", path_, " has no shard ", shard_id, " (",
                     manifest.shards_size(), " shards)"));
  }
  const v1::ShardManifest& shard = manifest.shards(shard_index);
  const std::string rel =
      shard.dir().empty() ? ShardDirName(shard_id) : shard.dir();
  const std::string db_path =
      absl::StartsWith(rel, "/") ? rel : absl::StrCat(path_, "/", rel);
  read_only_ = true;
  if (check == ShardFileCheck::kSizesAndChecksums) {
    PSDB_RETURN_IF_ERROR(CheckShardFiles(
        *fs_, manifest.format_version(), shard, db_path,
        absl::StrCat("checkpoint ", path_, " shard ", shard_id)));
  }
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> cfs;
  PSDB_ASSIGN_OR_RETURN(disk_, internal::DiskTier::Open(db_path, options_, &cfs,
                                                        /*read_only=*/true));
  absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  for (auto& [n, h] : cfs) by_name[n] = h;
  std::vector<std::shared_ptr<Table>> opened;
  absl::Status status;
  for (const v1::TableManifest& t : manifest.tables()) {
    absl::StatusOr<TableSpec> spec = TableSpecFromProto(t.spec());
    auto it = by_name.find(t.spec().name());
    if (!spec.ok()) {
      status =
          Annotate(spec.status(), absl::StrCat(path_, "/", kManifestFileName));
      break;
    }
    if (it == by_name.end()) {
      status = absl::DataLossError(absl::StrCat(
          db_path, ": table '", t.spec().name(), "' has no column family"));
      break;
    }
    const uint64_t rows = shard_index < t.shard_rows_size()
                              ? t.shard_rows(shard_index)
                              : t.rows();
    opened.push_back(std::make_shared<Table>(std::move(*spec), it->second,
                                             disk_.get(), this, options_,
                                             t.step(), rows));
    by_name.erase(it);  // owned by the table now
  }
  for (auto& [n, h] : by_name) disk_->DestroyCf(h);
  if (!status.ok()) {
    opened.clear();
    return status;
  }
  {
    absl::MutexLock l(&tables_mu_);
    for (auto& t : opened) tables_[t->name()] = std::move(t);
  }
  opened_ = true;
  if (reserve() > 0) evictor_ = std::thread([this] { EvictorLoop(); });
  return absl::OkStatus();
}

absl::Status Store::Impl::OpenReadOnlyOnFullDisk(const absl::Status& cause) {
  auto refuse = [&](absl::string_view why) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "store ", path_, " cannot open: the disk refuses writes (",
        cause.message(), ") and ", why,
        "; every acknowledged update is still in its files and log: free "
        "space and open it again"));
  };
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> cfs;
  absl::StatusOr<std::unique_ptr<internal::DiskTier>> disk =
      internal::DiskTier::Open(DbPath(path_), options_, &cfs,
                               /*read_only=*/true);
  if (!disk.ok()) {
    return refuse(
        absl::StrCat("a read-only open failed too: ", disk.status().message()));
  }
  disk_ = *std::move(disk);
  absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  for (auto& [n, h] : cfs) by_name[n] = h;
  auto fail = [&](absl::Status s) {
    for (auto& [n, h] : by_name) disk_->DestroyCf(h);
    disk_.reset();
    return s;
  };
  if (absl::StatusOr<uint32_t> v = StoredFormatVersion(disk_.get(), path_);
      !v.ok()) {
    return fail(v.status());
  }
  absl::StatusOr<uint64_t> to_replay = WalRecordsToReplay();
  if (!to_replay.ok()) return fail(to_replay.status());
  if (*to_replay > 0) {
    return fail(refuse(absl::StrCat("its write-ahead log has ", *to_replay,
                                    " records to replay")));
  }
  absl::StatusOr<std::vector<std::shared_ptr<Table>>> opened =
      TablesFromMeta(by_name, /*restored=*/nullptr, /*create_missing=*/false);
  if (absl::IsFailedPrecondition(opened.status())) {
    return fail(refuse(opened.status().message()));
  }
  if (!opened.ok()) return fail(opened.status());
  for (auto& [n, h] : by_name) disk_->DestroyCf(h);
  {
    // Calls get aliases that keep the whole generation alive
    // (MaybeBecomeWritable).
    absl::MutexLock l(&tables_mu_);
    ro_generation_ = std::make_shared<ReadOnlyGeneration>();
    for (auto& t : *opened) {
      tables_[t->name()] = std::shared_ptr<Table>(ro_generation_, t.get());
      ro_generation_->tables.push_back(std::move(t));
    }
  }
  read_only_ = true;
  full_disk_ = std::string(cause.message());
  opened_ = true;
  if (reserve() > 0) evictor_ = std::thread([this] { EvictorLoop(); });
  return absl::OkStatus();
}

absl::Status Store::Impl::CheckWritable(absl::string_view what) const {
  if (closing_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " refused: store ", path_, " is closed"));
  }
  if (!read_only()) return absl::OkStatus();
  if (!full_disk_.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " refused: store ", path_,
        " was opened read-only because the disk refused writes (", full_disk_,
        "); reads work, and writes will once the disk takes the writes of "
        "opening it (tried at most once a second)"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(what,
                   " refused: the store is a read-only serving copy of "
                   "checkpoint ",
                   path_));
}

absl::Status Store::Impl::Writable(absl::string_view what) {
  MaybeBecomeWritable();
  return CheckWritable(what);
}

void Store::Impl::MaybeBecomeWritable() {
  if (!read_only() || full_disk_.empty()) return;  // only that read-only
  if (!reopen_mu_.TryLock()) return;               // another call tries
  BecomeWritableLocked();
  reopen_mu_.Unlock();
}

void Store::Impl::BecomeWritableLocked() {
  if (!read_only() || closing_.load(std::memory_order_acquire)) return;
  const absl::Time now = absl::Now();
  if (now - last_writable_try_ < kWritableRetryInterval) return;
  last_writable_try_ = now;
  // Cheap first: a disk that says it is full is not worth an open.
  uint64_t free_bytes = 0;
  if (fs_->GetFreeSpace(path_, rocksdb::IOOptions(), &free_bytes, nullptr)
          .ok() &&
      free_bytes < (1 << 20)) {
    return;
  }
  // Beside the read-only instance, which holds no lock and keeps its SST
  // files open.
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> cfs;
  absl::StatusOr<std::unique_ptr<internal::DiskTier>> disk =
      internal::DiskTier::Open(DbPath(path_), options_, &cfs);
  if (!disk.ok()) return;  // still refused
  absl::MutexLock l(&tables_mu_);
  std::unique_ptr<internal::DiskTier> read_only_disk = std::move(disk_);
  disk_ = *std::move(disk);
  absl::StatusOr<std::vector<std::shared_ptr<Table>>> opened =
      TablesOfDb(cfs, /*restored=*/nullptr, /*fresh=*/false);
  absl::Status status = opened.status();
  // The read-only open found no records to replay; replay is for an open.
  if (status.ok() && wal_records_ > 0) status = absl::UnknownError("replay");
  if (status.ok()) status = disk_->PutMetaBeforeRowWrites(kMetaClean, "0");
  if (!status.ok()) {
    if (opened.ok()) opened->clear();  // handles before their database
    wal_.reset();
    wal_records_ = 0;
    disk_ = std::move(read_only_disk);
    return;
  }
  tables_.clear();
  for (auto& t : *opened) tables_[t->name()] = std::move(t);
  // The read-only generation lives on with the calls in flight on it.
  ro_generation_->disk = std::move(read_only_disk);
  ro_generation_.reset();
  read_only_.store(false, std::memory_order_release);
}

}  // namespace psdb
