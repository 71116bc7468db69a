#include "store/disk_tier.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rocksdb/cache.h"
#include "rocksdb/env.h"
#include "rocksdb/file_checksum.h"
#include "rocksdb/file_system.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/listener.h"
#include "rocksdb/metadata.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_buffer_manager.h"
#include "store/file_io_rocksdb.h"
#include "store/memory_budget.h"
#include "store/shard_files.h"
#include "util/status_macros.h"

namespace psdb::internal {

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view context) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat(context, ": ", s.ToString());
  if (s.IsIOError() && (absl::StrContains(s.ToString(), "lock") ||
                        absl::StrContains(s.ToString(), "LOCK"))) {
    return absl::FailedPreconditionError(
        absl::StrCat(msg, " (is another process using the store?)"));
  }
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(msg);
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  return absl::InternalError(msg);
}

namespace {

class DiscardLogger final : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

// RocksDB's info LOG, appended through the store's file system, that
// survives a full disk: a line that cannot be written is dropped. RocksDB's
// own file logger (7.8) asserts on the next line after a failed append in
// builds with assertions (Debian's librocksdb), killing the process exactly
// when the disk fills. No rotation: it logs warnings and errors only.
class DiskFullSafeLogger final : public rocksdb::Logger {
 public:
  DiskFullSafeLogger(std::unique_ptr<rocksdb::FSWritableFile> file,
                     rocksdb::InfoLogLevel level)
      : rocksdb::Logger(level), file_(std::move(file)) {}
  ~DiskFullSafeLogger() override {
    if (file_ != nullptr) (void)file_->Close(rocksdb::IOOptions(), nullptr);
  }
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    const absl::Time now = absl::Now();
    const std::string stamp =
        absl::FormatTime("%Y/%m/%d-%H:%M:%E6S ", now, absl::LocalTimeZone());
    const size_t head = std::min(stamp.size(), sizeof(line) - 2);
    std::memcpy(line, stamp.data(), head);
    va_list copy;
    va_copy(copy, ap);
    const int n =
        std::vsnprintf(line + head, sizeof(line) - head - 1, format, copy);
    va_end(copy);
    if (n < 0) return;
    size_t len = std::min(head + static_cast<size_t>(n), sizeof(line) - 2);
    if (len == 0 || line[len - 1] != '\n') line[len++] = '\n';
    absl::MutexLock l(&mu_);
    // Errors are dropped: a full disk must not stop the store.
    (void)file_->Append(rocksdb::Slice(line, len), rocksdb::IOOptions(),
                        nullptr);
  }

 private:
  absl::Mutex mu_;
  const std::unique_ptr<rocksdb::FSWritableFile> file_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> NewDiscardLogger() {
  return std::make_shared<DiscardLogger>();
}

// How long AwaitFlushed waits without any flush progress.
constexpr absl::Duration kFlushStall = absl::Seconds(30);
// How long after a compaction ended RocksDB may still hold its output
// (AwaitCompactions): its one-second sleep after a failure, and the purge.
constexpr absl::Duration kFailedCompactionPurge = absl::Milliseconds(1500);

// What AwaitFlushed waits on: a count of flush completions and background
// errors, and the last background error.
struct DiskTier::FlushEvents {
  absl::Mutex mu;
  uint64_t count ABSL_GUARDED_BY(mu) = 0;
  rocksdb::Status last_error ABSL_GUARDED_BY(mu);
  // Compactions begun, and ended (done or failed): AwaitCompactions waits
  // until every one begun has ended. RocksDB notifies the end of exactly
  // the compactions whose beginning it notified; a compaction it cancels
  // before it begins (no room: StopCompactions) is neither, though
  // rocksdb.num-running-compactions counts it through the second RocksDB
  // sleeps before trying it again.
  uint64_t compactions_begun ABSL_GUARDED_BY(mu) = 0;
  uint64_t compactions ABSL_GUARDED_BY(mu) = 0;

  // The background error that stopped writes (a generic I/O error if the
  // listener has not seen one).
  rocksdb::Status Error() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return last_error.ok() ? rocksdb::Status::IOError("background error")
                           : last_error;
  }
};

DiskTier::DiskTier() : flush_events_(std::make_shared<FlushEvents>()) {}

namespace {

// Whether `s`, reported for `reason`, is an I/O error writing new files that
// RocksDB recovers from by writing them again (DB::Resume): a flush's SST
// or a MANIFEST update, not the corruption of a file already written.
bool IsRecoverableWriteError(rocksdb::BackgroundErrorReason reason,
                             const rocksdb::Status& s) {
  using Reason = rocksdb::BackgroundErrorReason;
  if (!s.IsIOError() ||
      s.severity() != rocksdb::Status::Severity::kFatalError) {
    return false;
  }
  switch (reason) {
    case Reason::kFlush:
    case Reason::kFlushNoWAL:
    case Reason::kManifestWrite:
    case Reason::kManifestWriteNoWAL:
    case Reason::kCompaction:
      return true;
    default:
      return false;
  }
}

}  // namespace

// Notes background errors and flush completions, and turns RocksDB's
// automatic recovery off (see the header: the DiskTier resumes itself).
class DiskTier::ErrorListener final : public rocksdb::EventListener {
 public:
  ErrorListener(std::shared_ptr<std::atomic<bool>> bg_error,
                std::shared_ptr<FlushEvents> events)
      : bg_error_(std::move(bg_error)), events_(std::move(events)) {}
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason,
                         rocksdb::Status* status) override {
    if (status != nullptr && IsRecoverableWriteError(reason, *status)) {
      // RocksDB 7.8 (paranoid_checks) makes an I/O error of a flush or of
      // a MANIFEST write fatal, and DB::Resume() refuses a fatal error: an
      // EIO would stop writes until a reopen, which loses the WAL-less
      // memtables. Nothing was lost: a failed flush keeps its memtables, a
      // failed MANIFEST write is retried on a new MANIFEST. So it is made
      // the hard error a full disk already is, which Resume() clears.
      *status = rocksdb::Status(*status, rocksdb::Status::Severity::kHardError);
    }
    if (status != nullptr && !status->ok()) {
      bg_error_->store(true, std::memory_order_release);
      absl::MutexLock l(&events_->mu);
      events_->last_error = *status;
      ++events_->count;
    }
  }
  void OnFlushCompleted(rocksdb::DB*, const rocksdb::FlushJobInfo&) override {
    absl::MutexLock l(&events_->mu);
    ++events_->count;
  }
  void OnCompactionBegin(rocksdb::DB*,
                         const rocksdb::CompactionJobInfo&) override {
    absl::MutexLock l(&events_->mu);
    ++events_->compactions_begun;
  }
  void OnCompactionCompleted(rocksdb::DB*,
                             const rocksdb::CompactionJobInfo&) override {
    absl::MutexLock l(&events_->mu);
    ++events_->compactions;
  }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }

 private:
  const std::shared_ptr<std::atomic<bool>> bg_error_;
  const std::shared_ptr<FlushEvents> events_;
};

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(
    const std::string& db_path, const StoreOptions& options,
    std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>>* cfs,
    bool read_only) {
  std::unique_ptr<DiskTier> t(new DiskTier());
  t->path_ = db_path;
  t->row_write_.disableWAL = options.durability != Durability::kWal;
  // Metadata skips the WAL and is made durable by flushing the default
  // column family (FlushMeta): a WAL append that fails (ENOSPC) leaves
  // RocksDB 7.8's WAL writer failed for good ("Seen error"), so no memtable
  // switch, flush or Resume() succeeds again before a reopen; a failed
  // flush is a background error Resume() clears once space returns.
  t->meta_write_.disableWAL = true;

  // RocksDB's share of the memory budget (store/memory_budget.h): one cache
  // holds the data blocks and is charged with the memtables (through the
  // write buffer manager) and the index and filter blocks, so RocksDB's heap
  // follows the budget.
  const MemorySplit split = SplitMemoryBudget(options);
  t->cache_ = rocksdb::NewLRUCache(split.rocksdb_cache_bytes);
  t->write_buffer_manager_ = std::make_shared<rocksdb::WriteBufferManager>(
      split.memtable_bytes, t->cache_);

  // Rows are float32 and barely compress; bloom filters make the MultiGet of
  // never-seen keys (row creation) cheap.
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = t->cache_;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // Index and filter blocks stay in the table readers, where every miss
  // probes them without a cache lookup (inside a small cache they thrash:
  // misses re-read whole filter blocks, about 18% fewer tiered pulls per
  // CPU second in ps-bench store), and their memory is charged
  // to the cache like the memtables', so data blocks make way for them.
  // They are about 0.75% of the table's bytes (10 bloom bits per key, one
  // index entry per 4 KiB block).
  table.cache_index_and_filter_blocks = false;
  for (rocksdb::CacheEntryRole role :
       {rocksdb::CacheEntryRole::kBlockBasedTableReader,
        rocksdb::CacheEntryRole::kFilterConstruction,
        rocksdb::CacheEntryRole::kFileMetadata}) {
    table.cache_usage_options.options_overrides.insert(
        {role,
         {.charged = rocksdb::CacheEntryRoleOptions::Decision::kEnabled}});
  }
  // Every disk read is a point lookup of one ~0.5 KiB row: a small block
  // means less to read, checksum and search per miss, and more distinct
  // rows per byte of block cache.
  table.block_size = 4 * 1024;
  t->cf_options_.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  t->cf_options_.compression = rocksdb::kNoCompression;
  // One memtable may take the whole memtable share; the write buffer
  // manager flushes the largest once all of them together fill it. A
  // memtable filling while the one before it flushes (or cannot: the disk
  // refuses) passes the share: the rows give way (Store::Impl::
  // YieldToRocksdb). Halving memtables instead doubles the L0 files and,
  // with evictions spread over the whole key range, the compaction work
  // per evicted row (docs/benchmarks/memory.md).
  t->cf_options_.write_buffer_size = split.memtable_bytes;
  // Evictions overwrite rows spread over the whole key range, so every
  // L0 -> L1 compaction rewrites all of L1: merging twice as many L0 files
  // into an L1 of up to 1 GiB at a time halves that rewriting (about 10%
  // fewer CPU seconds per tiered pull in ps-bench store at 4M rows).
  t->cf_options_.level0_file_num_compaction_trigger = 8;
  t->cf_options_.max_bytes_for_level_base = 1ull << 30;
  // Most miss lookups are not in the memtable: a whole-key bloom filter
  // there saves the skip-list search (the largest cost of a miss otherwise).
  // Its size is this share of write_buffer_size, allocated and zeroed
  // whenever a memtable is made (each CreateTable, each switch): 0.02 gives
  // even the smallest rows (dim 1, ~80 bytes a memtable entry) about 13
  // bits a key, a dim-64 Adagrad row ~100; 0.1, as it was, zeroed
  // 6.4 MiB per memtable at the default budget, 0.004-0.01 CPU-s of a
  // migration's destination (docs/benchmarks/migrate.md, run 13).
  t->cf_options_.memtable_prefix_bloom_size_ratio = 0.02;
  t->cf_options_.memtable_whole_key_filtering = true;

  rocksdb::DBOptions db_options;
  t->env_ = EnvOver(options.file_system);
  if (t->env_ != nullptr) db_options.env = t->env_.get();
  t->fs_ = FileSystemOr(options.file_system).get();
  const std::shared_ptr<const FileIo> io = FileIoOver(options.file_system);
  db_options.write_buffer_manager = t->write_buffer_manager_;
  if (!read_only) {
    // RocksDB's own by default; the store's, so that StopCompactions can
    // hold compactions back.
    t->sst_files_.reset(rocksdb::NewSstFileManager(
        t->env_ != nullptr ? t->env_.get() : rocksdb::Env::Default(),
        FileSystemOr(options.file_system)));
    db_options.sst_file_manager = t->sst_files_;
    db_options.listeners.push_back(
        std::make_shared<ErrorListener>(t->bg_error_, t->flush_events_));
  }
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // Each SST file's whole-file checksum, computed as RocksDB writes it: a
  // checkpoint lists it without reading the file (store/shard_files.h).
  db_options.file_checksum_gen_factory =
      rocksdb::GetFileChecksumGenCrc32cFactory();
  db_options.max_background_jobs = 2;
  // RocksDB preallocates 4 MiB for the new MANIFEST of every writable open:
  // on a full disk that takes the room the open itself needs next (what a
  // released disk reserve gave back, store/disk_reserve.h). psdb's
  // MANIFEST grows by a few hundred bytes per flush or compaction.
  db_options.manifest_preallocation_size = 64 << 10;
  // Off by default: mapped SST pages count in RSS, outside the memory
  // budget (StoreOptions::rocksdb_mmap_reads).
  db_options.allow_mmap_reads = options.rocksdb_mmap_reads;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  // Without Durability::kWal nothing goes through RocksDB's WAL. With it,
  // the WAL carries evicted rows: let it hold about two memtables' worth
  // before it forces flushes.
  db_options.max_total_wal_size =
      options.durability == Durability::kWal ? 128 << 20 : 8 << 20;

  if (read_only) {
    db_options.create_if_missing = false;
    db_options.create_missing_column_families = false;
    db_options.info_log = NewDiscardLogger();
  } else {
    std::unique_ptr<rocksdb::FSWritableFile> log;
    (void)t->fs_->CreateDirIfMissing(db_path, rocksdb::IOOptions(), nullptr);
    if (t->fs_
            ->ReopenWritableFile(db_path + "/LOG", rocksdb::FileOptions(), &log,
                                 nullptr)
            .ok()) {
      db_options.info_log = std::make_shared<DiskFullSafeLogger>(
          std::move(log), db_options.info_log_level);
    }
  }

  std::vector<std::string> names;
  const bool has_current = io->Exists(db_path + "/CURRENT");
  if (read_only && !has_current) {
    return absl::NotFoundError(
        absl::StrCat(db_path, " holds no RocksDB database (no CURRENT file)"));
  }
  if (has_current) {
    rocksdb::Status s =
        rocksdb::DB::ListColumnFamilies(db_options, db_path, &names);
    if (!s.ok()) return FromRocks(s, absl::StrCat("list tables of ", db_path));
  }
  if (names.empty()) names.push_back(rocksdb::kDefaultColumnFamilyName);
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (const std::string& n : names) {
    // The metadata column family shares the row families' options, so its
    // memtable and blocks are charged to the same cache.
    descs.emplace_back(n, t->cf_options_);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      read_only ? rocksdb::DB::OpenForReadOnly(db_options, db_path, descs,
                                               &handles, &raw)
                : rocksdb::DB::Open(db_options, db_path, descs, &handles, &raw);
  if (!s.ok()) return FromRocks(s, absl::StrCat("open ", db_path));
  t->db_.reset(raw);
  for (size_t i = 0; i < handles.size(); ++i) {
    if (names[i] == rocksdb::kDefaultColumnFamilyName) {
      t->default_cf_ = handles[i];
    } else {
      cfs->emplace_back(names[i], handles[i]);
    }
  }
  return t;
}

DiskTier::~DiskTier() {
  if (db_ != nullptr) {
    if (default_cf_ != nullptr) db_->DestroyColumnFamilyHandle(default_cf_);
    (void)db_->Close();
  }
}

absl::StatusOr<rocksdb::ColumnFamilyHandle*> DiskTier::CreateCf(
    const std::string& name) {
  rocksdb::ColumnFamilyHandle* h = nullptr;
  rocksdb::Status s = db_->CreateColumnFamily(cf_options_, name, &h);
  if (!s.ok()) return FromRocks(s, absl::StrCat("create table ", name));
  return h;
}

absl::Status DiskTier::DropCf(rocksdb::ColumnFamilyHandle* cf) {
  return FromRocks(db_->DropColumnFamily(cf),
                   absl::StrCat("drop table ", cf->GetName()));
}

void DiskTier::DestroyCf(rocksdb::ColumnFamilyHandle* cf) {
  (void)db_->DestroyColumnFamilyHandle(cf);
}

void DiskTier::MultiGet(rocksdb::ColumnFamilyHandle* cf, size_t n,
                        const rocksdb::Slice* keys,
                        rocksdb::PinnableSlice* values,
                        rocksdb::Status* statuses) {
  db_->MultiGet(rocksdb::ReadOptions(), cf, n, keys, values, statuses,
                /*sorted_input=*/true);
}

absl::Status DiskTier::Get(rocksdb::ColumnFamilyHandle* cf,
                           const rocksdb::Slice& key, std::string* value,
                           bool* found) {
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf, key, value);
  *found = s.ok();
  if (s.IsNotFound()) return absl::OkStatus();
  return FromRocks(s, absl::StrCat("read table ", cf->GetName()));
}

absl::Status DiskTier::WriteRows(rocksdb::WriteBatch* batch) {
  if (meta_pending_.load(std::memory_order_acquire)) {
    absl::MutexLock l(&meta_pending_mu_);
    if (meta_pending_.load(std::memory_order_relaxed)) {
      PSDB_RETURN_IF_ERROR(
          PutMeta(meta_pending_kv_.first, meta_pending_kv_.second));
      meta_pending_.store(false, std::memory_order_release);
    }
  }
  rocksdb::Status s = db_->Write(row_write_, batch);
  // A write stopped by a background error goes through once Resume()
  // flushed the memtables (the disk has room again).
  if (!s.ok() && bg_error() && Resume(/*force=*/false).ok()) {
    s = db_->Write(row_write_, batch);
  }
  return FromWrite(s, "write rows");
}

absl::Status DiskTier::FromWrite(const rocksdb::Status& s,
                                 absl::string_view context) const {
  if (s.IsIncomplete() && bg_error()) {
    // A write that waited in a write stall bails out as Incomplete with the
    // background error's text: that error (a full disk, an EIO) is the
    // cause, and its code is what the caller maps.
    absl::MutexLock l(&flush_events_->mu);
    if (!flush_events_->last_error.ok()) {
      return FromRocks(flush_events_->last_error, context);
    }
  }
  return FromRocks(s, context);
}

absl::Status DiskTier::Resume(bool force) {
  if (!bg_error()) return absl::OkStatus();
  absl::MutexLock l(&resume_mu_);
  if (!bg_error()) return absl::OkStatus();  // another thread resumed
  const absl::Time now = absl::Now();
  if (!force && now - last_resume_ < kResumeInterval) {
    // The error that stopped writes, so a full disk answers as a full disk
    // (ResourceExhausted) between resume attempts too.
    absl::MutexLock el(&flush_events_->mu);
    return FromRocks(flush_events_->Error(),
                     "RocksDB stopped writes after a background error (next "
                     "resume attempt pending)");
  }
  last_resume_ = now;
  // RocksDB 7.8's Resume() flushes the memtables and can wait forever for
  // a flush that fails again (seen with a file system that refuses every
  // write: DBImpl::WaitForFlushMemTables never returned). So it is called
  // only once the file system takes a small synced write again.
  PSDB_RETURN_IF_ERROR(ProbeWritable());
  // Cleared first: an error during the attempt sets it again.
  bg_error_->store(false, std::memory_order_release);
  const rocksdb::Status s = db_->Resume();
  if (!s.ok()) bg_error_->store(true, std::memory_order_release);
  return FromRocks(s, "resume writes after a disk error");
}

absl::Status DiskTier::ProbeWritable() {
  const std::string probe = path_ + "/RESUME_PROBE";
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s =
      fs_->NewWritableFile(probe, rocksdb::FileOptions(), &file, nullptr);
  if (s.ok())
    s = file->Append(rocksdb::Slice("probe\n"), rocksdb::IOOptions(), nullptr);
  if (s.ok()) s = file->Sync(rocksdb::IOOptions(), nullptr);
  if (file != nullptr) {
    const rocksdb::IOStatus c = file->Close(rocksdb::IOOptions(), nullptr);
    if (s.ok()) s = c;
  }
  (void)fs_->DeleteFile(probe, rocksdb::IOOptions(), nullptr);
  return FromRocks(s,
                   "resume writes after a disk error: the disk still "
                   "refuses writes");
}

absl::Status DiskTier::RoomFor(uint64_t write_bytes, uint64_t keep_bytes) {
  uint64_t free_bytes = 0;
  const rocksdb::IOStatus s =
      fs_->GetFreeSpace(path_, rocksdb::IOOptions(), &free_bytes, nullptr);
  if (!s.ok()) return absl::OkStatus();  // unknown: RocksDB's errors tell
  const uint64_t memtables = MemtableBytes();
  // Margin: a row costs a little more in a memtable or SST than in the
  // memory tier (key, sequence number, index and filter entries), and
  // RocksDB appends to its MANIFEST and LOG files.
  const uint64_t need = memtables + write_bytes + keep_bytes + keep_bytes / 8 +
                        write_bytes / 8 + (1 << 20);
  if (free_bytes >= need) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the disk of ", path_, " has ", free_bytes, " bytes free, less than the ",
      need, " needed to write ", write_bytes, " bytes and still hold ",
      memtables, " bytes of memtables and ", keep_bytes,
      " bytes of the memory tier's rows at shutdown"));
}

uint64_t DiskTier::MemtableBytes() {
  uint64_t v = 0;
  if (!db_->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &v)) {
    return 0;
  }
  return v;
}

absl::Status DiskTier::PutMeta(absl::string_view key, absl::string_view value) {
  (void)Resume(/*force=*/true);  // a pending background error fails writes
  PSDB_RETURN_IF_ERROR(FromWrite(
      db_->Put(meta_write_, default_cf_, rocksdb::Slice(key.data(), key.size()),
               rocksdb::Slice(value.data(), value.size())),
      absl::StrCat("write metadata ", key)));
  return FlushMeta();
}

absl::Status DiskTier::PutMetaBeforeRowWrites(absl::string_view key,
                                              absl::string_view value) {
  absl::StatusOr<std::string> stored = GetMeta(key);
  if (stored.ok() && *stored == value) return absl::OkStatus();
  if (!stored.ok() && !absl::IsNotFound(stored.status())) {
    return stored.status();
  }
  absl::MutexLock l(&meta_pending_mu_);
  meta_pending_kv_ = {std::string(key), std::string(value)};
  meta_pending_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status DiskTier::PutMetaBatch(
    const std::vector<std::pair<std::string, std::string>>& kvs) {
  rocksdb::WriteBatch batch;
  for (const auto& [k, v] : kvs) batch.Put(default_cf_, k, v);
  (void)Resume(/*force=*/true);
  PSDB_RETURN_IF_ERROR(
      FromWrite(db_->Write(meta_write_, &batch), "write metadata"));
  return FlushMeta();
}

absl::Status DiskTier::DeleteMeta(absl::string_view key) {
  (void)Resume(/*force=*/true);
  PSDB_RETURN_IF_ERROR(
      FromWrite(db_->Delete(meta_write_, default_cf_,
                            rocksdb::Slice(key.data(), key.size())),
                absl::StrCat("delete metadata ", key)));
  return FlushMeta();
}

absl::Status DiskTier::FlushMeta() {
  (void)Resume(/*force=*/true);
  rocksdb::FlushOptions fo;
  fo.wait = true;
  fo.allow_write_stall = true;
  PSDB_RETURN_IF_ERROR(
      FromRocks(db_->Flush(fo, default_cf_), "flush metadata"));
  return AwaitFlushed({default_cf_});
}

void DiskTier::StopCompactions() {
  if (sst_files_ == nullptr) return;  // read-only
  // Without SetOptions(disable_auto_compactions), which appends to the
  // MANIFEST: when that append fails, RocksDB 7.8 leaves file deletions
  // enabled and its next DB::Resume() aborts the process on an assertion
  // (ResumeImpl, file_deletion_disabled; store_fault_test's
  // CloseWhileTheFaultClears). The file manager's check before each
  // compaction then finds no room for any (RocksDB cancels it as too large
  // and tries later), while a flush is refused only once the files reach
  // the allowed space, which this limit never lets them.
  sst_files_->SetMaxAllowedSpaceUsage(uint64_t{1} << 61);
  sst_files_->SetCompactionBufferSize(uint64_t{1} << 62);
}

void DiskTier::AwaitCompactions(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  {
    absl::MutexLock l(&flush_events_->mu);
    const auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_events_->mu) {
      return flush_events_->compactions >= flush_events_->compactions_begun;
    };
    flush_events_->mu.AwaitWithDeadline(absl::Condition(&ended), deadline);
  }
  // RocksDB deletes a failed compaction's output only after it slept a
  // second (DBImpl::BackgroundCallCompaction), and counts the compaction
  // as running until then: wait for that too, but no longer than the
  // sleep and the deletion take, since a compaction it keeps cancelling for
  // want of room keeps the count above zero.
  const absl::Time purged_by =
      std::min(deadline, absl::Now() + kFailedCompactionPurge);
  while (IntProperty(nullptr, "rocksdb.num-running-compactions") > 0 &&
         absl::Now() < purged_by) {
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status DiskTier::AwaitFlushed(
    const std::vector<rocksdb::ColumnFamilyHandle*>& cfs) {
  // Progress: a flush completed or errored (the listener's count), or fewer
  // immutable memtables are left. None for kFlushStall fails the wait
  // rather than hanging a close forever.
  absl::Time progress_at = absl::Now();
  uint64_t last_seen = 0;
  uint64_t last_pending = ~uint64_t{0};
  while (true) {
    uint64_t seen;
    {
      absl::MutexLock l(&flush_events_->mu);
      seen = flush_events_->count;
    }
    uint64_t pending = 0;
    for (rocksdb::ColumnFamilyHandle* cf : cfs) {
      pending += IntProperty(cf, "rocksdb.num-immutable-mem-table");
    }
    if (pending == 0) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (seen != last_seen || pending < last_pending) progress_at = now;
    last_seen = seen;
    last_pending = pending;
    if (now - progress_at > kFlushStall) {
      // Seen as a background error, so the next Flush() calls Resume():
      // RocksDB 7.8 can leave its background work stopped after a resume
      // (the header comment) and then never runs the flush.
      bg_error_->store(true, std::memory_order_release);
      return absl::UnavailableError(absl::StrCat(
          "flush memtables: ", pending,
          " memtables not flushed and no "
          "progress for ",
          absl::FormatDuration(kFlushStall), " (RocksDB reported no error)"));
    }
    absl::MutexLock l(&flush_events_->mu);
    if (bg_error()) {
      return FromRocks(flush_events_->Error(), "flush memtables");
    }
    // Woken by the listener; the timeout only bounds a missed wake-up.
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_events_->mu) {
      return flush_events_->count != seen;
    };
    flush_events_->mu.AwaitWithTimeout(absl::Condition(&changed),
                                       absl::Milliseconds(10));
  }
}

absl::Status DiskTier::DeleteMetaPrefix(absl::string_view prefix) {
  std::string end(prefix);
  // The smallest key above every key with the prefix.
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (end.empty()) return absl::InvalidArgumentError("empty metadata prefix");
  end.back() = static_cast<char>(end.back() + 1);
  return FromWrite(
      db_->DeleteRange(meta_write_, default_cf_,
                       rocksdb::Slice(prefix.data(), prefix.size()), end),
      absl::StrCat("delete metadata ", prefix, "*"));
}

absl::StatusOr<std::string> DiskTier::GetMeta(absl::string_view key) {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), default_cf_,
                               rocksdb::Slice(key.data(), key.size()), &v);
  if (!s.ok()) return FromRocks(s, absl::StrCat("read metadata ", key));
  return v;
}

std::vector<std::pair<std::string, std::string>> DiskTier::ScanMeta(
    absl::string_view prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), default_cf_));
  for (it->Seek(rocksdb::Slice(prefix.data(), prefix.size())); it->Valid();
       it->Next()) {
    if (!it->key().starts_with(rocksdb::Slice(prefix.data(), prefix.size()))) {
      break;
    }
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  return out;
}

absl::Status DiskTier::Flush(std::vector<rocksdb::ColumnFamilyHandle*> cfs) {
  // A pending background error fails every flush until it is cleared.
  (void)Resume(/*force=*/true);
  rocksdb::FlushOptions fo;
  fo.wait = true;
  // Without it RocksDB first waits until the flush would not stall writes,
  // which with L0 past level0_slowdown_writes_trigger needs a compaction,
  // and a close starts none (StopCompactions): the close hung. The flush is
  // what frees memory; writes that then stall wait for compactions, as
  // they would anyway.
  fo.allow_write_stall = true;
  cfs.push_back(default_cf_);
  PSDB_RETURN_IF_ERROR(FromRocks(db_->Flush(fo, cfs), "flush memtables"));
  return AwaitFlushed(cfs);
}

absl::Status DiskTier::CreateCheckpoint(const std::string& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  if (!s.ok()) return FromRocks(s, "create checkpoint object");
  std::unique_ptr<rocksdb::Checkpoint> ckpt(raw);
  return FromRocks(ckpt->CreateCheckpoint(dir, /*log_size_for_flush=*/0),
                   absl::StrCat("rocksdb checkpoint into ", dir));
}

absl::flat_hash_map<std::string, v1::ShardFile> DiskTier::LiveFiles() const {
  std::vector<rocksdb::LiveFileMetaData> files;
  db_->GetLiveFilesMetaData(&files);
  absl::flat_hash_map<std::string, v1::ShardFile> out;
  for (const rocksdb::LiveFileMetaData& f : files) {
    if (f.file_checksum_func_name != rocksdb::kStandardDbFileChecksumFuncName ||
        f.file_checksum.empty()) {
      continue;  // written before the store computed them
    }
    const std::string& path = f.relative_filename;
    const std::string name = path.substr(path.find_last_of('/') + 1);
    v1::ShardFile& file = out[name];
    file.set_size(f.size);
    file.set_crc32c(ShardFileChecksumHex(f.file_checksum));
    file.set_column_family(f.column_family_name);
    file.set_smallest_seqno(f.smallest_seqno);
    file.set_largest_seqno(f.largest_seqno);
  }
  return out;
}

uint64_t DiskTier::CacheUsage() const { return cache_->GetUsage(); }

uint64_t DiskTier::PinnedOverCapacity() const {
  const uint64_t pinned = cache_->GetPinnedUsage();
  const uint64_t capacity = cache_->GetCapacity();
  return pinned > capacity ? pinned - capacity : 0;
}

uint64_t DiskTier::IntProperty(rocksdb::ColumnFamilyHandle* cf,
                               const std::string& property) {
  uint64_t v = 0;
  if (!db_->GetIntProperty(cf != nullptr ? cf : default_cf_, property, &v)) {
    return 0;
  }
  return v;
}

}  // namespace psdb::internal
