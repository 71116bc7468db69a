#include "checkpoint/reshard.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/verify.h"
#include "manifest/manifest.h"
#include "store/file_io_rocksdb.h"
#include "store/row_codec.h"
#include "store/shard_files.h"
#include "store/shard_writer.h"
#include "util/status_macros.h"

namespace psdb::ckpt {
namespace {

bool IsEmptyDir(const FileIo& io, const std::string& path) {
  if (!io.IsDirectory(path)) return false;
  absl::StatusOr<std::vector<std::string>> children = io.ListChildren(path);
  return children.ok() && children->empty();
}

// The ring of `servers` servers with ids 0..servers-1 (see the header).
v1::RingManifest NewRing(const v1::Manifest& source, int servers) {
  v1::RingManifest ring;
  const RingOptions defaults;
  const bool has_ring = source.ring().server_ids_size() > 0;
  ring.set_vnodes_per_server(has_ring ? source.ring().vnodes_per_server()
                                      : defaults.vnodes_per_server);
  ring.set_hash_seed(has_ring ? source.ring().hash_seed() : defaults.hash_seed);
  for (int r = 0; r < servers; ++r) {
    ring.add_server_ids(r);
    ring.add_weights(1.0f);
  }
  return ring;
}

absl::StatusOr<ReshardResult> WriteShards(const CheckpointReader& source,
                                          const ReshardOptions& options,
                                          const std::string& tmp) {
  const int m = options.servers;
  v1::Manifest manifest;
  manifest.set_format_version(kManifestFormatVersion);
  manifest.set_checkpoint_id(source.manifest().checkpoint_id());
  manifest.set_step(source.manifest().step());
  manifest.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  manifest.set_cluster_epoch(source.manifest().cluster_epoch());
  *manifest.mutable_ring() = NewRing(source.manifest(), m);
  PSDB_ASSIGN_OR_RETURN(
      Ring ring, RingFromManifest(manifest.ring(),
                                  absl::StrCat(options.out, "/MANIFEST.json")));

  std::vector<TableSpec> specs;
  std::vector<int64_t> steps;
  for (const TableInfo& t : source.tables()) {
    specs.push_back(t.spec);
    steps.push_back(t.step);
  }
  ShardWriterOptions writer_options;
  writer_options.batch_rows = options.batch_rows;
  writer_options.file_system = options.file_system;
  std::vector<std::unique_ptr<ShardWriter>> writers;
  for (int r = 0; r < m; ++r) {
    // Ring index r is server id r: members() is sorted by id.
    v1::ShardManifest* shard = manifest.add_shards();
    shard->set_shard_id(r);
    shard->set_dir(ShardDirName(r));
    PSDB_ASSIGN_OR_RETURN(
        std::unique_ptr<ShardWriter> w,
        ShardWriter::Create(absl::StrCat(tmp, "/", shard->dir()), specs,
                            writer_options));
    writers.push_back(std::move(w));
  }

  ReshardResult result;
  result.path = options.out;
  result.shard_rows.assign(m, 0);
  for (size_t t = 0; t < source.tables().size(); ++t) {
    const TableInfo& table = source.tables()[t];
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<TableCursor> cursor,
                          TableCursor::Open(source, table));
    for (; cursor->Valid(); cursor->Next()) {
      uint64_t key = 0;
      PSDB_RETURN_IF_ERROR(DecodeKey(cursor->key(), &key));
      const uint32_t r = ring.OwnerIndex(key);
      PSDB_RETURN_IF_ERROR(writers[r]->Add(t, cursor->key(), cursor->value()));
    }
    PSDB_RETURN_IF_ERROR(cursor->status());
    v1::TableManifest* tm = manifest.add_tables();
    *tm->mutable_spec() = TableSpecToProto(table.spec);
    tm->set_step(table.step);
    uint64_t rows = 0;
    for (int r = 0; r < m; ++r) {
      tm->add_shard_rows(writers[r]->rows(t));
      rows += writers[r]->rows(t);
      result.shard_rows[r] += writers[r]->rows(t);
    }
    tm->set_rows(rows);
    result.rows += rows;
    if (rows != table.rows) {
      return absl::DataLossError(
          absl::StrCat(source.dir(), ": table '", table.spec.name, "' read ",
                       rows, " rows, the manifest says ", table.rows));
    }
  }
  for (auto& w : writers) PSDB_RETURN_IF_ERROR(w->Finish(steps));
  writers.clear();
  const std::shared_ptr<rocksdb::FileSystem> fs =
      internal::FileSystemOr(options.file_system);
  for (v1::ShardManifest& shard : *manifest.mutable_shards()) {
    PSDB_RETURN_IF_ERROR(
        RecordShardFiles(*fs, absl::StrCat(tmp, "/", shard.dir()), {}, &shard));
  }
  PSDB_RETURN_IF_ERROR(WriteManifestAtomic(
      tmp, manifest, *internal::FileIoOver(options.file_system)));
  return result;
}

}  // namespace

absl::StatusOr<ReshardResult> Reshard(const CheckpointReader& source,
                                      const ReshardOptions& options) {
  if (options.servers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reshard: --servers must be >= 1, got ", options.servers));
  }
  if (options.batch_rows < 1) {
    return absl::InvalidArgumentError("reshard: batch_rows must be >= 1");
  }
  if (options.out.empty()) {
    return absl::InvalidArgumentError("reshard: no output directory given");
  }
  const std::shared_ptr<const FileIo> io =
      internal::FileIoOver(options.file_system);
  if (io->Exists(options.out) && !IsEmptyDir(*io, options.out)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "reshard: ", options.out, " exists and is not an empty directory"));
  }

  PSDB_ASSIGN_OR_RETURN(VerifyReport report, Verify(source));
  if (!report.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "reshard: source ", source.dir(), " does not verify (",
        report.error_count, " errors): ", absl::StrJoin(report.errors, "; ")));
  }

  const std::string tmp = absl::StrCat(options.out, ".reshard-tmp");
  absl::Status s = io->DeleteRecursively(tmp);
  if (s.ok()) s = io->CreateDirs(tmp);
  if (!s.ok()) {
    return absl::InternalError(
        absl::StrCat("reshard: cannot create ", tmp, ": ", s.message()));
  }
  absl::StatusOr<ReshardResult> result = WriteShards(source, options, tmp);
  if (result.ok()) {
    // An empty directory (checked above), or nothing.
    s = io->DeleteRecursively(options.out);
    if (s.ok()) s = io->Rename(tmp, options.out);
    if (s.ok()) s = io->SyncDir(ParentDir(options.out));
    if (!s.ok()) {
      result = absl::InternalError(
          absl::StrCat("reshard: cannot rename: ", s.message()));
    }
  }
  if (!result.ok()) (void)io->DeleteRecursively(tmp);
  return result;
}

}  // namespace psdb::ckpt
