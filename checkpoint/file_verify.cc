#include "checkpoint/file_verify.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "manifest/manifest.h"
#include "optim/optimizer.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/sst_file_reader.h"
#include "rocksdb/table_properties.h"
#include "store/file_io_rocksdb.h"
#include "store/row_codec.h"
#include "store/shard_files.h"
#include "util/status_macros.h"

namespace psdb::ckpt {
namespace {

struct TableShape {
  int dim = 0;
  int state_size = 0;
};

// Reads every row of the new SST file `path` and checks it (see the
// header). `tables` maps the manifest's table names to their shapes.
absl::Status VerifySst(
    const std::shared_ptr<rocksdb::FileSystem>& fs, const std::string& path,
    const absl::flat_hash_map<std::string, TableShape>& tables,
    const Ring* ring, int shard_id, uint64_t* rows) {
  std::unique_ptr<rocksdb::Env> env = internal::EnvOver(fs);
  rocksdb::Options options;
  if (env != nullptr) options.env = env.get();
  rocksdb::SstFileReader reader(options);
  auto fail = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": ", what));
  };
  rocksdb::Status s = reader.Open(path);
  if (!s.ok()) return fail(absl::StrCat("cannot open: ", s.ToString()));
  s = reader.VerifyChecksum();
  if (!s.ok()) {
    return fail(absl::StrCat("checksum verification failed: ", s.ToString()));
  }
  const std::string& family = reader.GetTableProperties()->column_family_name;
  if (family == rocksdb::kDefaultColumnFamilyName) return absl::OkStatus();
  auto table = tables.find(family);
  if (table == tables.end()) {
    return fail(absl::StrCat("rows of table '", family,
                             "', which the manifest does not list"));
  }
  const TableShape shape = table->second;
  std::vector<float> values(shape.dim);
  std::vector<float> state(shape.state_size);
  RowHeader header;
  rocksdb::ReadOptions read;
  read.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(reader.NewIterator(read));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    const rocksdb::Slice v = it->value();
    uint64_t key = 0;
    if (!DecodeKey(absl::string_view(k.data(), k.size()), &key).ok()) {
      return fail(absl::StrCat("table '", family, "': key of ", k.size(),
                               " bytes (expected 8)"));
    }
    const std::string where = absl::StrCat("table '", family, "' key ", key);
    absl::Status st = DecodeRow(absl::string_view(v.data(), v.size()),
                                shape.dim, shape.state_size, &header,
                                absl::MakeSpan(values), absl::MakeSpan(state));
    if (!st.ok()) return fail(absl::StrCat(where, ": ", st.message()));
    if (!AllFinite(values.data(), values.size()) ||
        !AllFinite(state.data(), state.size())) {
      return fail(absl::StrCat(where, ": non-finite value or state"));
    }
    if (ring != nullptr && ring->Owner(key) != shard_id) {
      return fail(absl::StrCat(where, ": in shard ", shard_id,
                               " but the ring places it on shard ",
                               ring->Owner(key)));
    }
    ++*rows;
  }
  if (!it->status().ok()) {
    return fail(absl::StrCat("read error after ", *rows,
                             " rows: ", it->status().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FileId> IdentifyFile(const std::string& path,
                                    const v1::ShardFile& listed) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::DataLossError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  }
  FileId id;
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  id.size = listed.size();
  id.crc32c = listed.crc32c();
  return id;
}

std::string ShardPath(const std::string& dir, const v1::ShardManifest& shard) {
  const std::string rel =
      shard.dir().empty() ? ShardDirName(shard.shard_id()) : shard.dir();
  return absl::StartsWith(rel, "/") ? rel : absl::StrCat(dir, "/", rel);
}

absl::Status VerifiedFiles::AddShard(const v1::Manifest& m, int shard_index,
                                     const std::string& dir,
                                     absl::flat_hash_set<FileId>* ids) {
  const v1::ShardManifest& shard = m.shards(shard_index);
  const std::string path = ShardPath(dir, shard);
  for (const v1::ShardFile& f : shard.files()) {
    PSDB_ASSIGN_OR_RETURN(FileId id,
                          IdentifyFile(absl::StrCat(path, "/", f.name()), f));
    ids->insert(id);
    Insert(std::move(id));
  }
  return absl::OkStatus();
}

void VerifiedFiles::RetainOnly(const absl::flat_hash_set<FileId>& keep) {
  absl::erase_if(ids_, [&](const FileId& id) { return !keep.contains(id); });
}

absl::Status VerifyShardFiles(const std::shared_ptr<rocksdb::FileSystem>& fs,
                              const v1::Manifest& m, int shard_index,
                              const std::string& dir, const Ring* ring,
                              VerifiedFiles* verified,
                              FileVerifyReport* report) {
  const v1::ShardManifest& shard = m.shards(shard_index);
  const std::string where =
      absl::StrCat("checkpoint ", dir, " shard ", shard.shard_id());
  if (m.format_version() < kManifestShardFilesVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": manifest format ", m.format_version(),
                     " lists no files to verify one by one"));
  }
  absl::flat_hash_map<std::string, TableShape> tables;
  for (const v1::TableManifest& t : m.tables()) {
    PSDB_ASSIGN_OR_RETURN(TableSpec spec, TableSpecFromProto(t.spec()));
    tables[spec.name] = {spec.dim, optim::StateSize(spec.optimizer, spec.dim)};
  }
  const std::string path = ShardPath(dir, shard);
  // Identify every file first: the known ones are only stat'ed by
  // CheckShardFiles, the others read whole for their checksum.
  absl::flat_hash_map<std::string, FileId> ids;
  for (const v1::ShardFile& f : shard.files()) {
    absl::StatusOr<FileId> id =
        IdentifyFile(absl::StrCat(path, "/", f.name()), f);
    if (!id.ok())
      return absl::DataLossError(
          absl::StrCat(where, ": ", id.status().message()));
    ids[f.name()] = *std::move(id);
  }
  PSDB_RETURN_IF_ERROR(
      CheckShardFiles(*fs, m.format_version(), shard, path, where,
                      [&](const v1::ShardFile& f, const std::string&) {
                        return verified->Contains(ids[f.name()]);
                      }));
  for (const v1::ShardFile& f : shard.files()) {
    FileId& id = ids[f.name()];
    report->ids.insert(id);
    if (verified->Contains(id)) {
      ++report->files_reused;
      continue;
    }
    if (absl::EndsWith(f.name(), ".sst")) {
      PSDB_RETURN_IF_ERROR(VerifySst(fs, absl::StrCat(path, "/", f.name()),
                                     tables, ring, shard.shard_id(),
                                     &report->rows_verified));
    }
    ++report->files_verified;
    report->bytes_verified += f.size();
    verified->Insert(id);
  }
  return absl::OkStatus();
}

}  // namespace psdb::ckpt
