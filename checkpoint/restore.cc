#include "checkpoint/restore.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/verify.h"
#include "manifest/manifest.h"
#include "psdb/checkpoint_reader.h"
#include "psdb/store.h"
#include "store/file_io_rocksdb.h"
#include "store/shard_writer.h"
#include "util/status_macros.h"

namespace psdb::ckpt {
namespace {

// Vnode count of server `id` on `ring`, or 0 when it is not on it.
uint32_t Vnodes(const Ring& ring, ServerId id) {
  const std::optional<size_t> i = ring.IndexOf(id);
  if (!i.has_value()) return 0;
  return Ring::VnodeCount(ring.options(), ring.members()[*i].weight);
}

absl::StatusOr<RingRestoreResult> WriteDb(const RingRestoreOptions& options,
                                          const std::string& tmp) {
  PSDB_ASSIGN_OR_RETURN(
      v1::Manifest manifest,
      ReadManifest(options.checkpoint_dir,
                   *internal::FileIoOver(options.file_system)));
  const std::string where =
      absl::StrCat(options.checkpoint_dir, "/", kManifestFileName);
  std::vector<int> ids;
  if (manifest.ring().server_ids_size() > 0) {
    PSDB_ASSIGN_OR_RETURN(Ring source,
                          RingFromManifest(manifest.ring(), where));
    for (ServerId id : SourceShardsFor(source, options.ring, options.server)) {
      ids.push_back(id);
    }
  } else {
    for (const v1::ShardManifest& s : manifest.shards()) {
      ids.push_back(s.shard_id());
    }
    std::sort(ids.begin(), ids.end());
  }
  absl::StatusOr<std::unique_ptr<CheckpointReader>> opened =
      CheckpointReader::OpenShards(options.checkpoint_dir, ids,
                                   options.file_system);
  if (!opened.ok()) return Annotate(opened.status(), "restore refused");
  const std::unique_ptr<CheckpointReader> reader = *std::move(opened);
  // "checkpoint <dir> shard <id>": what a refusal names.
  const auto shard_name = [&](size_t shard) {
    return absl::StrCat("checkpoint ", options.checkpoint_dir, " shard ",
                        reader->shards()[shard].shard_id);
  };
  for (size_t s = 0; s < reader->shards().size(); ++s) {
    PSDB_RETURN_IF_ERROR(
        Annotate(CheckShardTables(manifest, reader->shards()[s].column_families,
                                  shard_name(s)),
                 "restore refused"));
  }

  std::vector<TableSpec> specs;
  std::vector<int64_t> steps;
  for (const TableInfo& t : reader->tables()) {
    specs.push_back(t.spec);
    steps.push_back(t.step);
  }
  ShardWriterOptions writer_options;
  writer_options.batch_rows = options.batch_rows;
  writer_options.file_system = options.file_system;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ShardWriter> writer,
                        ShardWriter::Create(tmp, specs, writer_options));

  RingRestoreResult result;
  result.source_shards = ids;
  const size_t num_shards = reader->shards().size();
  DecodedRow row;
  for (size_t t = 0; t < reader->tables().size(); ++t) {
    const TableInfo& table = reader->tables()[t];
    std::vector<uint64_t> read(num_shards, 0);
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<TableCursor> cursor,
                          TableCursor::Open(*reader, table));
    for (; cursor->Valid(); cursor->Next()) {
      const size_t shard = cursor->shard();
      PSDB_RETURN_IF_ERROR(
          reader->Decode(shard, table, cursor->key(), cursor->value(), &row));
      ++read[shard];
      if (options.ring.Owner(row.key) != options.server) continue;
      PSDB_RETURN_IF_ERROR(writer->Add(t, cursor->key(), cursor->value()));
    }
    PSDB_RETURN_IF_ERROR(cursor->status());
    for (size_t s = 0; s < num_shards; ++s) {
      if (read[s] != table.shard_rows[s]) {
        return absl::DataLossError(absl::StrCat(
            "restore refused: ", shard_name(s), " table '", table.spec.name,
            "': the manifest says ", table.shard_rows[s],
            " rows, the files hold ", read[s]));
      }
    }
    manifest.mutable_tables(static_cast<int>(t))->set_rows(writer->rows(t));
    result.rows += writer->rows(t);
  }
  PSDB_RETURN_IF_ERROR(writer->Finish(steps));
  result.manifest = std::move(manifest);
  return result;
}

}  // namespace

std::vector<ServerId> SourceShardsFor(const Ring& source, const Ring& target,
                                      ServerId server) {
  const bool narrow = source.options() == target.options() &&
                      Vnodes(source, server) > 0 &&
                      Vnodes(source, server) == Vnodes(target, server);
  std::vector<ServerId> ids;
  for (const RingMember& m : source.members()) {  // sorted by id
    if (!narrow || m.id == server ||
        Vnodes(source, m.id) != Vnodes(target, m.id)) {
      ids.push_back(m.id);
    }
  }
  return ids;
}

absl::StatusOr<RingRestoreResult> RestoreForRing(
    const RingRestoreOptions& options) {
  if (!options.ring.IndexOf(options.server).has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore: server ", options.server,
                     " is not on the ring it is restored for"));
  }
  if (options.batch_rows < 1) {
    return absl::InvalidArgumentError("restore: batch_rows must be >= 1");
  }
  const std::shared_ptr<const FileIo> io =
      internal::FileIoOver(options.file_system);
  if (options.db_path.empty() || io->Exists(options.db_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore: database directory '", options.db_path, "' exists"));
  }
  const std::string tmp = absl::StrCat(options.db_path, ".restore-tmp");
  PSDB_RETURN_IF_ERROR(io->DeleteRecursively(tmp));
  absl::StatusOr<RingRestoreResult> result = WriteDb(options, tmp);
  if (result.ok()) {
    if (absl::Status s = io->Rename(tmp, options.db_path); !s.ok()) {
      result = absl::InternalError(
          absl::StrCat("restore: cannot rename: ", s.message()));
    }
  }
  if (!result.ok()) {
    (void)io->DeleteRecursively(tmp);
    return result;
  }
  if (absl::Status s = io->SyncDir(ParentDir(options.db_path)); !s.ok()) {
    (void)io->DeleteRecursively(options.db_path);
    return s;
  }
  return result;
}

absl::StatusOr<std::optional<RingRestoreResult>> PrepareRestoreForRing(
    absl::string_view restore_from, const Ring& ring, ServerId server,
    absl::string_view store_path,
    std::shared_ptr<rocksdb::FileSystem> file_system) {
  const std::string db_path = Store::DbPath(store_path);
  const std::shared_ptr<const FileIo> io = internal::FileIoOver(file_system);
  if (restore_from.empty() || ring.empty() ||
      io->Exists(db_path + "/CURRENT")) {
    return std::nullopt;
  }
  PSDB_ASSIGN_OR_RETURN(std::string dir,
                        ResolveCheckpointDir(restore_from, *io));
  PSDB_ASSIGN_OR_RETURN(v1::Manifest m, ReadManifest(dir, *io));
  bool same_ring = ring.num_servers() == 1;  // one shard holds every key
  if (m.ring().server_ids_size() > 0) {
    PSDB_ASSIGN_OR_RETURN(
        Ring source,
        RingFromManifest(m.ring(), absl::StrCat(dir, "/", kManifestFileName)));
    same_ring = source == ring;
  }
  if (same_ring) return std::nullopt;
  const std::string path(store_path);
  const bool created = !io->Exists(path);
  if (absl::Status s = io->CreateDirs(path); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot create ", store_path, ": ", s.message()));
  }
  // A restore that died before its rename left this; nothing uses it.
  (void)io->DeleteRecursively(Store::RestoreTmpPath(store_path));
  RingRestoreOptions options;
  options.checkpoint_dir = dir;
  options.ring = ring;
  options.server = server;
  options.db_path = db_path;
  options.file_system = std::move(file_system);
  absl::StatusOr<RingRestoreResult> result = RestoreForRing(options);
  if (!result.ok()) {
    // Leave the data directory as it was: one created here goes.
    if (created) {
      absl::StatusOr<std::vector<std::string>> left = io->ListChildren(path);
      if (left.ok() && left->empty()) (void)io->DeleteRecursively(path);
    }
    return result.status();
  }
  return *std::move(result);
}

}  // namespace psdb::ckpt
