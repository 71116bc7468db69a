#include "store/disk_tier.h"

#include <cstdarg>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rocksdb/cache.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_buffer_manager.h"
#include "store/file_io_rocksdb.h"
#include "store/memory_budget.h"

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

}  // namespace

std::shared_ptr<rocksdb::Logger> NewDiscardLogger() {
  return std::make_shared<DiscardLogger>();
}

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(
    const std::string& db_path, const StoreOptions& options,
    std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>>* cfs,
    bool read_only) {
  std::unique_ptr<DiskTier> t(new DiskTier());
  t->path_ = db_path;
  t->row_write_.disableWAL = options.durability != Durability::kWal;
  t->meta_write_.sync = true;

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
  // manager flushes the largest once all of them together fill it.
  t->cf_options_.write_buffer_size = split.memtable_bytes;
  // Evictions overwrite rows spread over the whole key range, so every
  // L0 -> L1 compaction rewrites all of L1: merging twice as many L0 files
  // into an L1 of up to 1 GiB at a time halves that rewriting (about 10%
  // fewer CPU seconds per tiered pull in ps-bench store at 4M rows).
  t->cf_options_.level0_file_num_compaction_trigger = 8;
  t->cf_options_.max_bytes_for_level_base = 1ull << 30;
  // Most miss lookups are not in the memtable: a whole-key bloom filter
  // there saves the skip-list search (the largest cost of a miss otherwise).
  t->cf_options_.memtable_prefix_bloom_size_ratio = 0.1;
  t->cf_options_.memtable_whole_key_filtering = true;

  rocksdb::DBOptions db_options;
  t->env_ = EnvOver(options.file_system);
  if (t->env_ != nullptr) db_options.env = t->env_.get();
  const std::shared_ptr<const FileIo> io = FileIoOver(options.file_system);
  db_options.write_buffer_manager = t->write_buffer_manager_;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  // Off by default: mapped SST pages count in RSS, outside the memory
  // budget (StoreOptions::rocksdb_mmap_reads).
  db_options.allow_mmap_reads = options.rocksdb_mmap_reads;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.keep_log_file_num = 2;
  // The WAL only carries metadata; keep it from pinning old memtables.
  // With Durability::kWal it carries evicted rows too: let it hold about
  // two memtables' worth before it forces flushes.
  db_options.max_total_wal_size =
      options.durability == Durability::kWal ? 128 << 20 : 8 << 20;

  if (read_only) {
    db_options.create_if_missing = false;
    db_options.create_missing_column_families = false;
    db_options.info_log = NewDiscardLogger();
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
  return FromRocks(db_->Write(row_write_, batch), "write rows");
}

absl::Status DiskTier::PutMeta(absl::string_view key, absl::string_view value) {
  return FromRocks(
      db_->Put(meta_write_, default_cf_, rocksdb::Slice(key.data(), key.size()),
               rocksdb::Slice(value.data(), value.size())),
      absl::StrCat("write metadata ", key));
}

absl::Status DiskTier::PutMetaBatch(
    const std::vector<std::pair<std::string, std::string>>& kvs) {
  rocksdb::WriteBatch batch;
  for (const auto& [k, v] : kvs) batch.Put(default_cf_, k, v);
  return FromRocks(db_->Write(meta_write_, &batch), "write metadata");
}

absl::Status DiskTier::DeleteMeta(absl::string_view key) {
  return FromRocks(db_->Delete(meta_write_, default_cf_,
                               rocksdb::Slice(key.data(), key.size())),
                   absl::StrCat("delete metadata ", key));
}

absl::Status DiskTier::DeleteMetaPrefix(absl::string_view prefix) {
  std::string end(prefix);
  // The smallest key above every key with the prefix.
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (end.empty()) return absl::InvalidArgumentError("empty metadata prefix");
  end.back() = static_cast<char>(end.back() + 1);
  return FromRocks(
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
  rocksdb::FlushOptions fo;
  fo.wait = true;
  cfs.push_back(default_cf_);
  return FromRocks(db_->Flush(fo, cfs), "flush memtables");
}

absl::Status DiskTier::CreateCheckpoint(const std::string& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  if (!s.ok()) return FromRocks(s, "create checkpoint object");
  std::unique_ptr<rocksdb::Checkpoint> ckpt(raw);
  return FromRocks(ckpt->CreateCheckpoint(dir, /*log_size_for_flush=*/0),
                   absl::StrCat("rocksdb checkpoint into ", dir));
}

uint64_t DiskTier::CacheUsage() const { return cache_->GetUsage(); }

uint64_t DiskTier::IntProperty(rocksdb::ColumnFamilyHandle* cf,
                               const std::string& property) {
  uint64_t v = 0;
  if (!db_->GetIntProperty(cf != nullptr ? cf : default_cf_, property, &v)) {
    return 0;
  }
  return v;
}

}  // namespace psdb::internal
