#include "store/shard_writer.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "rocksdb/write_batch.h"
#include "store/disk_tier.h"
#include "store/file_io_rocksdb.h"
#include "store/store_impl.h"
#include "store/store_meta.h"
#include "util/status_macros.h"

namespace psdb {

struct ShardWriter::Batch {
  rocksdb::WriteBatch batch;
  size_t rows = 0;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;  // indexed like specs_
};

absl::StatusOr<std::unique_ptr<ShardWriter>> ShardWriter::Create(
    absl::string_view dir, absl::Span<const TableSpec> tables,
    const ShardWriterOptions& options) {
  if (options.batch_rows == 0) {
    return absl::InvalidArgumentError("shard writer: batch_rows must be >= 1");
  }
  std::set<std::string> names;
  for (const TableSpec& spec : tables) {
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard writer: table '", spec.name, "' named twice"));
    }
  }
  const std::string path(dir);
  if (internal::FileIoOver(options.file_system)->Exists(path)) {
    return absl::AlreadyExistsError(
        absl::StrCat("shard writer: ", path, " already exists"));
  }
  std::unique_ptr<ShardWriter> w(new ShardWriter());
  w->options_ = options;
  w->specs_.assign(tables.begin(), tables.end());
  w->rows_.assign(tables.size(), 0);
  w->batch_ = std::make_unique<Batch>();
  // The DiskTier the store itself opens: the same column family options.
  std::vector<std::pair<std::string, rocksdb::ColumnFamilyHandle*>> cfs;
  StoreOptions store_options;
  store_options.file_system = options.file_system;
  PSDB_ASSIGN_OR_RETURN(w->disk_,
                        internal::DiskTier::Open(path, store_options, &cfs));
  for (auto& [name, handle] : cfs) w->disk_->DestroyCf(handle);
  for (const TableSpec& spec : w->specs_) {
    absl::StatusOr<rocksdb::ColumnFamilyHandle*> cf =
        w->disk_->CreateCf(spec.name);
    if (!cf.ok()) return cf.status();  // the destructor frees the others
    w->batch_->cfs.push_back(*cf);
  }
  return w;
}

ShardWriter::~ShardWriter() {
  if (disk_ != nullptr && batch_ != nullptr) {
    for (rocksdb::ColumnFamilyHandle* cf : batch_->cfs) disk_->DestroyCf(cf);
  }
}

absl::Status ShardWriter::Add(size_t table, absl::string_view key,
                              absl::string_view value) {
  rocksdb::Status s = batch_->batch.Put(
      batch_->cfs[table], rocksdb::Slice(key.data(), key.size()),
      rocksdb::Slice(value.data(), value.size()));
  if (!s.ok()) {
    return internal::FromRocks(s, absl::StrCat("shard writer ", disk_->path()));
  }
  ++rows_[table];
  if (++batch_->rows >= options_.batch_rows) return WriteBatch();
  return absl::OkStatus();
}

absl::Status ShardWriter::WriteBatch() {
  if (batch_->rows == 0) return absl::OkStatus();
  PSDB_RETURN_IF_ERROR(disk_->WriteRows(&batch_->batch));
  batch_->batch.Clear();
  batch_->rows = 0;
  return absl::OkStatus();
}

absl::Status ShardWriter::Finish(absl::Span<const int64_t> steps) {
  if (finished_ || steps.size() != specs_.size()) {
    return absl::FailedPreconditionError(
        "shard writer: Finish needs one step per table, once");
  }
  finished_ = true;
  PSDB_RETURN_IF_ERROR(WriteBatch());
  // What Store::Impl::PersistMeta and CreateTable write (store_impl.h).
  std::vector<std::pair<std::string, std::string>> kvs;
  kvs.emplace_back(std::string(internal::kMetaVersion),
                   absl::StrCat(kStoreFormatVersionWithoutLog));
  for (size_t i = 0; i < specs_.size(); ++i) {
    const std::string& name = specs_[i].name;
    kvs.emplace_back(absl::StrCat(internal::kMetaTable, name),
                     TableSpecToJson(specs_[i]));
    kvs.emplace_back(absl::StrCat(internal::kMetaStep, name),
                     absl::StrCat(steps[i]));
    kvs.emplace_back(absl::StrCat(internal::kMetaRows, name),
                     absl::StrCat(rows_[i]));
  }
  // The row counts above are exact: a store opening the shard need not
  // recount.
  kvs.emplace_back(std::string(internal::kMetaClean), "1");
  PSDB_RETURN_IF_ERROR(disk_->PutMetaBatch(kvs));
  PSDB_RETURN_IF_ERROR(disk_->Flush(batch_->cfs));
  for (rocksdb::ColumnFamilyHandle* cf : batch_->cfs) disk_->DestroyCf(cf);
  batch_->cfs.clear();
  disk_.reset();
  return absl::OkStatus();
}

}  // namespace psdb
