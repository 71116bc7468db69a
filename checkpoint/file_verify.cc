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

struct SstReader {
  std::unique_ptr<rocksdb::Env> env;
  rocksdb::Options options;
  std::unique_ptr<rocksdb::SstFileReader> reader;
};

absl::StatusOr<SstReader> OpenSst(
    const std::shared_ptr<rocksdb::FileSystem>& fs, const std::string& path) {
  SstReader r;
  r.env = internal::EnvOver(fs);
  if (r.env != nullptr) r.options.env = r.env.get();
  r.reader = std::make_unique<rocksdb::SstFileReader>(r.options);
  rocksdb::Status s = r.reader->Open(path);
  if (!s.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, ": cannot open: ", s.ToString()));
  }
  return r;
}

// Adds what the SST's table properties say to `facts`. DataLoss if its
// column family is not the one the manifest lists.
absl::Status AddProperties(const std::string& path,
                           const rocksdb::TableProperties& props,
                           FileFacts* facts) {
  if (!facts->column_family.empty() &&
      facts->column_family != props.column_family_name) {
    return absl::DataLossError(absl::StrCat(
        path, ": rows of column family '", props.column_family_name,
        "', the manifest says '", facts->column_family, "'"));
  }
  facts->column_family = props.column_family_name;
  facts->deletions = props.num_deletions + props.num_range_deletions;
  return absl::OkStatus();
}

// Reads every row of the new SST file `path` and checks it (see the
// header); its facts into *facts, its rows into report->rows when asked.
// `tables` maps the manifest's table names to their shapes.
absl::Status VerifySst(
    const std::shared_ptr<rocksdb::FileSystem>& fs, const std::string& path,
    const FileId& id, const FileVerifyOptions& options, int shard_id,
    const absl::flat_hash_map<std::string, TableShape>& tables,
    FileFacts* facts, FileVerifyReport* report) {
  auto fail = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": ", what));
  };
  PSDB_ASSIGN_OR_RETURN(SstReader sst, OpenSst(fs, path));
  rocksdb::Status s = sst.reader->VerifyChecksum();
  if (!s.ok()) {
    return fail(absl::StrCat("checksum verification failed: ", s.ToString()));
  }
  PSDB_RETURN_IF_ERROR(
      AddProperties(path, *sst.reader->GetTableProperties(), facts));
  const std::string& family = facts->column_family;
  if (family == rocksdb::kDefaultColumnFamilyName) return absl::OkStatus();
  auto table = tables.find(family);
  if (table == tables.end()) {
    return fail(absl::StrCat("rows of table '", family,
                             "', which the manifest does not list"));
  }
  const TableShape shape = table->second;
  FileRows* kept = nullptr;
  if (options.keep_rows && report->rows_complete) {
    kept = report->rows.emplace_back(std::make_shared<FileRows>()).get();
    kept->id = id;
    kept->table = family;
    kept->rows.dim = shape.dim;
    kept->rows.state_size = shape.state_size;
  }
  const uint64_t row_bytes =
      sizeof(uint64_t) + sizeof(RowHeader) +
      sizeof(float) * static_cast<uint64_t>(shape.dim + shape.state_size);
  std::vector<float> values(shape.dim);
  std::vector<float> state(shape.state_size);
  RowHeader header;
  rocksdb::ReadOptions read;
  read.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(sst.reader->NewIterator(read));
  uint64_t rows = 0;
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
    if (options.ring != nullptr && options.ring->Owner(key) != shard_id) {
      return fail(absl::StrCat(where, ": in shard ", shard_id,
                               " but the ring places it on shard ",
                               options.ring->Owner(key)));
    }
    ++rows;
    if (kept != nullptr) {
      if (report->row_bytes + row_bytes > options.max_row_bytes) {
        // Too many to keep: the caller verifies whole instead.
        report->rows_complete = false;
        report->rows.clear();
        report->rows.shrink_to_fit();
        report->row_bytes = 0;
        kept = nullptr;
        continue;
      }
      report->row_bytes += row_bytes;
      kept->keys.push_back(key);
      kept->rows.values.insert(kept->rows.values.end(), values.begin(),
                               values.end());
      kept->rows.state.insert(kept->rows.state.end(), state.begin(),
                              state.end());
      kept->rows.headers.push_back(header);
    }
  }
  if (!it->status().ok()) {
    return fail(absl::StrCat("read error after ", rows,
                             " rows: ", it->status().ToString()));
  }
  report->rows_verified += rows;
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

FileFacts ListedFacts(const v1::ShardFile& listed) {
  FileFacts facts;
  facts.name = listed.name();
  facts.sst = absl::EndsWith(listed.name(), ".sst");
  facts.column_family = listed.column_family();
  if (listed.has_smallest_seqno() && listed.has_largest_seqno()) {
    facts.seqnos = SeqnoRange{listed.smallest_seqno(), listed.largest_seqno()};
  }
  return facts;
}

absl::StatusOr<FileFacts> ReadFileFacts(
    const std::shared_ptr<rocksdb::FileSystem>& fs, const std::string& path,
    const v1::ShardFile& listed) {
  FileFacts facts = ListedFacts(listed);
  PSDB_ASSIGN_OR_RETURN(SstReader sst, OpenSst(fs, path));
  PSDB_RETURN_IF_ERROR(
      AddProperties(path, *sst.reader->GetTableProperties(), &facts));
  return facts;
}

absl::Status VerifiedFiles::AddShard(
    const std::shared_ptr<rocksdb::FileSystem>& fs, const v1::Manifest& m,
    int shard_index, const std::string& dir, absl::flat_hash_set<FileId>* ids) {
  const v1::ShardManifest& shard = m.shards(shard_index);
  const std::string path = ShardPath(dir, shard);
  for (const v1::ShardFile& f : shard.files()) {
    const std::string file = absl::StrCat(path, "/", f.name());
    PSDB_ASSIGN_OR_RETURN(FileId id, IdentifyFile(file, f));
    FileFacts facts = ListedFacts(f);
    if (facts.sst && facts.column_family.empty()) {
      // Listed before manifests said: its table properties do.
      PSDB_ASSIGN_OR_RETURN(facts, ReadFileFacts(fs, file, f));
    }
    ids->insert(id);
    Insert(std::move(id), std::move(facts));
  }
  return absl::OkStatus();
}

void VerifiedFiles::RetainOnly(const absl::flat_hash_set<FileId>& keep) {
  absl::erase_if(
      files_, [&](const auto& entry) { return !keep.contains(entry.first); });
}

absl::Status VerifyShardFiles(const std::shared_ptr<rocksdb::FileSystem>& fs,
                              const v1::Manifest& m, int shard_index,
                              const std::string& dir,
                              const FileVerifyOptions& options,
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
    if (!id.ok()) {
      return absl::DataLossError(
          absl::StrCat(where, ": ", id.status().message()));
    }
    ids[f.name()] = *std::move(id);
  }
  PSDB_RETURN_IF_ERROR(
      CheckShardFiles(*fs, m.format_version(), shard, path, where,
                      [&](const v1::ShardFile& f, const std::string&) {
                        return verified->Contains(ids[f.name()]) ||
                               options.skip.contains(f.name());
                      }));
  for (const v1::ShardFile& f : shard.files()) {
    const FileId& id = ids[f.name()];
    report->ids.insert(id);
    if (verified->Contains(id)) {
      ++report->files_reused;
      continue;
    }
    if (options.skip.contains(f.name())) {
      ++report->files_skipped;
      continue;
    }
    FileFacts facts = ListedFacts(f);
    if (facts.sst) {
      PSDB_RETURN_IF_ERROR(VerifySst(fs, absl::StrCat(path, "/", f.name()), id,
                                     options, shard.shard_id(), tables, &facts,
                                     report));
    }
    ++report->files_verified;
    report->bytes_verified += f.size();
    verified->Insert(id, std::move(facts));
  }
  return absl::OkStatus();
}

}  // namespace psdb::ckpt
