#include <memory>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "manifest/manifest.h"
#include "optim/optimizer.h"
#include "psdb/checkpoint_reader.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/metadata.h"
#include "rocksdb/options.h"
#include "store/disk_tier.h"
#include "store/file_io_rocksdb.h"
#include "store/row_codec.h"
#include "store/shard_files.h"
#include "util/status_macros.h"

namespace psdb::ckpt {

struct CheckpointReader::OpenShard {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // owned; closed in dtor
  ~OpenShard() {
    if (db == nullptr) return;
    for (auto* h : handles)
      db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
};

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    absl::string_view path, std::shared_ptr<rocksdb::FileSystem> file_system) {
  return OpenImpl(path, nullptr, std::move(file_system));
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::OpenShards(
    absl::string_view path, absl::Span<const int> shard_ids,
    std::shared_ptr<rocksdb::FileSystem> file_system) {
  return OpenImpl(path, &shard_ids, std::move(file_system));
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::OpenImpl(
    absl::string_view path, const absl::Span<const int>* only,
    std::shared_ptr<rocksdb::FileSystem> file_system) {
  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  const std::shared_ptr<const FileIo> io = internal::FileIoOver(file_system);
  r->env_ = internal::EnvOver(file_system);
  PSDB_ASSIGN_OR_RETURN(r->dir_, ResolveCheckpointDir(path, *io));
  PSDB_ASSIGN_OR_RETURN(v1::Manifest manifest, ReadManifest(r->dir_, *io));
  r->manifest_ = std::make_unique<v1::Manifest>(std::move(manifest));
  const std::string manifest_file =
      absl::StrCat(r->dir_, "/", kManifestFileName);

  const int num_shards = r->manifest_->shards_size();
  for (const v1::TableManifest& t : r->manifest_->tables()) {
    TableInfo info;
    absl::StatusOr<TableSpec> spec = TableSpecFromProto(t.spec());
    if (!spec.ok()) {
      return Annotate(spec.status(), absl::StrCat(manifest_file, ": table '",
                                                  t.spec().name(), "'"));
    }
    info.spec = *std::move(spec);
    info.state_size = optim::StateSize(info.spec.optimizer, info.spec.dim);
    info.step = t.step();
    info.rows = t.rows();
    info.shard_rows.assign(t.shard_rows().begin(), t.shard_rows().end());
    if (static_cast<int>(info.shard_rows.size()) != num_shards) {
      return absl::DataLossError(
          absl::StrCat(manifest_file, ": table '", info.spec.name, "' has ",
                       info.shard_rows.size(), " shard row counts for ",
                       num_shards, " shards"));
    }
    r->tables_.push_back(std::move(info));
  }

  // Manifest indices of the shards opened.
  std::vector<int> keep;
  for (int i = 0; i < num_shards; ++i) {
    if (only == nullptr ||
        absl::c_linear_search(*only, r->manifest_->shards(i).shard_id())) {
      keep.push_back(i);
    }
  }
  if (only != nullptr) {
    for (int id : *only) {
      bool found = false;
      for (int i : keep) found |= r->manifest_->shards(i).shard_id() == id;
      if (!found) {
        return absl::NotFoundError(
            absl::StrCat(manifest_file, ": no shard ", id));
      }
    }
    for (TableInfo& t : r->tables_) {
      std::vector<uint64_t> rows;
      for (int i : keep) rows.push_back(t.shard_rows[i]);
      t.shard_rows = std::move(rows);
    }
  }
  for (int i : keep) {
    const v1::ShardManifest& s = r->manifest_->shards(i);
    ShardInfo shard;
    shard.shard_id = s.shard_id();
    shard.server = s.server();
    const std::string rel =
        s.dir().empty() ? ShardDirName(s.shard_id()) : s.dir();
    shard.path =
        absl::StartsWith(rel, "/") ? rel : absl::StrCat(r->dir_, "/", rel);

    // Before RocksDB parses any byte of them (store/shard_files.h).
    PSDB_RETURN_IF_ERROR(CheckShardFiles(
        *internal::FileSystemOr(file_system), r->manifest_->format_version(), s,
        shard.path,
        absl::StrCat("checkpoint ", r->dir_, " shard ", shard.shard_id)));
    rocksdb::DBOptions db_options;
    db_options.info_log = internal::NewDiscardLogger();  // writes nothing
    if (r->env_ != nullptr) db_options.env = r->env_.get();
    rocksdb::Status st = rocksdb::DB::ListColumnFamilies(
        db_options, shard.path, &shard.column_families);
    if (!st.ok()) {
      return absl::DataLossError(absl::StrCat("cannot list column families of ",
                                              shard.path, ": ", st.ToString()));
    }
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : shard.column_families) {
      descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
    }
    auto open = std::make_unique<OpenShard>();
    rocksdb::DB* db = nullptr;
    st = rocksdb::DB::OpenForReadOnly(db_options, shard.path, descriptors,
                                      &open->handles, &db);
    if (!st.ok()) {
      return absl::DataLossError(
          absl::StrCat("cannot open ", shard.path, ": ", st.ToString()));
    }
    open->db.reset(db);
    r->open_.push_back(std::move(open));
    r->shards_.push_back(std::move(shard));
  }
  return r;
}

CheckpointReader::CheckpointReader() = default;
CheckpointReader::~CheckpointReader() = default;

int64_t CheckpointReader::step() const { return manifest_->step(); }

absl::StatusOr<const TableInfo*> CheckpointReader::FindTable(
    absl::string_view name) const {
  std::vector<std::string> names;
  for (const TableInfo& t : tables_) {
    if (t.spec.name == name) return &t;
    names.push_back(t.spec.name);
  }
  return absl::NotFoundError(absl::StrCat(
      "no table '", name, "' in ", dir_,
      " (tables: ", names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<rocksdb::ColumnFamilyHandle*> CheckpointReader::Family(
    size_t shard, absl::string_view table) const {
  const ShardInfo& info = shards_.at(shard);
  for (size_t i = 0; i < info.column_families.size(); ++i) {
    if (info.column_families[i] == table) return open_[shard]->handles[i];
  }
  return absl::DataLossError(
      absl::StrCat(info.path, ": table '", table, "' has no column family"));
}

absl::StatusOr<std::unique_ptr<rocksdb::Iterator>>
CheckpointReader::NewIterator(size_t shard, absl::string_view table) const {
  PSDB_ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * cf, Family(shard, table));
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;  // a dump reads each block once
  return std::unique_ptr<rocksdb::Iterator>(
      open_[shard]->db->NewIterator(ro, cf));
}

absl::Status CheckpointReader::Get(size_t shard, absl::string_view table,
                                   uint64_t key, std::string* value) const {
  PSDB_ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * cf, Family(shard, table));
  const std::string k = EncodeKey(key);
  rocksdb::Status st =
      open_[shard]->db->Get(rocksdb::ReadOptions(), cf, k, value);
  if (st.IsNotFound()) {
    return absl::NotFoundError(absl::StrCat(shards_[shard].path, ": table '",
                                            table, "' has no key ", key));
  }
  if (!st.ok()) {
    return absl::DataLossError(absl::StrCat(shards_[shard].path, ": table '",
                                            table, "' key ", key, ": ",
                                            st.ToString()));
  }
  return absl::OkStatus();
}

std::string CheckpointReader::Where(size_t shard,
                                    absl::string_view table) const {
  return absl::StrCat(shards_[shard].path, ": table '", table, "'");
}

absl::Status CheckpointReader::Decode(size_t shard, const TableInfo& table,
                                      absl::string_view key,
                                      absl::string_view value,
                                      DecodedRow* row) const {
  if (!DecodeKey(key, &row->key).ok()) {
    return absl::DataLossError(absl::StrCat(Where(shard, table.spec.name),
                                            ": key of ", key.size(),
                                            " bytes (expected 8)"));
  }
  row->values.resize(table.spec.dim);
  row->state.resize(table.state_size);
  absl::Status st =
      DecodeRow(value, table.spec.dim, table.state_size, &row->header,
                absl::MakeSpan(row->values), absl::MakeSpan(row->state));
  if (!st.ok()) {
    return Annotate(
        st, absl::StrCat(Where(shard, table.spec.name), " key ", row->key));
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::VerifyChecksums(size_t shard) const {
  rocksdb::Status st = open_[shard]->db->VerifyChecksum();
  if (!st.ok()) {
    return absl::DataLossError(
        absl::StrCat(shards_[shard].path,
                     ": checksum verification failed: ", st.ToString()));
  }
  return absl::OkStatus();
}

uint64_t CheckpointReader::SstBytes(size_t shard,
                                    absl::string_view table) const {
  absl::StatusOr<rocksdb::ColumnFamilyHandle*> cf = Family(shard, table);
  if (!cf.ok()) return 0;
  rocksdb::ColumnFamilyMetaData meta;
  open_[shard]->db->GetColumnFamilyMetaData(*cf, &meta);
  return meta.size;
}

absl::StatusOr<std::unique_ptr<TableCursor>> TableCursor::Open(
    const CheckpointReader& reader, const TableInfo& table) {
  std::vector<std::unique_ptr<rocksdb::Iterator>> its;
  for (size_t s = 0; s < reader.shards().size(); ++s) {
    PSDB_ASSIGN_OR_RETURN(auto it, reader.NewIterator(s, table.spec.name));
    it->SeekToFirst();
    its.push_back(std::move(it));
  }
  return std::unique_ptr<TableCursor>(new TableCursor(std::move(its)));
}

TableCursor::~TableCursor() = default;

TableCursor::TableCursor(std::vector<std::unique_ptr<rocksdb::Iterator>> its)
    : its_(std::move(its)) {
  PickSmallest();
}

void TableCursor::PickSmallest() {
  // Shards are few (one per server), so a linear scan beats a heap.
  current_ = -1;
  for (size_t i = 0; i < its_.size(); ++i) {
    rocksdb::Iterator* it = its_[i].get();
    if (!it->Valid()) {
      if (!it->status().ok() && status_.ok()) {
        status_ = absl::DataLossError(it->status().ToString());
      }
      continue;
    }
    if (current_ < 0 || it->key().compare(its_[current_]->key()) < 0) {
      current_ = static_cast<int>(i);
    }
  }
  if (!status_.ok()) current_ = -1;
}

void TableCursor::Next() {
  its_[current_]->Next();
  PickSmallest();
}

absl::string_view TableCursor::key() const {
  const rocksdb::Slice k = its_[current_]->key();
  return absl::string_view(k.data(), k.size());
}

absl::string_view TableCursor::value() const {
  const rocksdb::Slice v = its_[current_]->value();
  return absl::string_view(v.data(), v.size());
}

}  // namespace psdb::ckpt
