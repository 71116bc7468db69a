// Store checkpoints and restore (see store.h for the layout and guarantees).
//
// Crash safety, stage by stage (a SIGKILL at any point):
//  1. leftover incomplete checkpoint directories are removed;
//  2. <root>/<id>/ is created and <root> fsynced (no manifest: does not
//     exist for readers);
//  3. dirty rows are flushed, TTL applied, memtables flushed and
//     rocksdb::Checkpoint hard-links the SSTs into <id>/shard-<n>/;
//  4. MANIFEST.json is written to a temp file, fsynced and renamed into
//     place, then the directory is fsynced: only now does <id> exist;
//  5. old checkpoints beyond keep_last are deleted, each by first unlinking
//     its MANIFEST.json (so a half-deleted directory is "incomplete", never
//     a broken "complete" one), then removing the rest.
// The live database is never modified by checkpointing except by ordinary
// row writes, so it opens cleanly after a kill at any stage.
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "store/restore_check.h"
#include "store/shard_files.h"
#include "store/store_impl.h"
#include "store/store_testing.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace psdb {
namespace internal {
namespace {
std::atomic<CheckpointHook> g_checkpoint_hook{nullptr};
}  // namespace

void SetCheckpointHookForTesting(CheckpointHook hook) {
  g_checkpoint_hook.store(hook);
}
void RunCheckpointHook(const char* stage) {
  CheckpointHook h = g_checkpoint_hook.load(std::memory_order_relaxed);
  if (h != nullptr) h(stage);
}
}  // namespace internal

namespace {

using internal::RunCheckpointHook;
using internal::Table;

// Removes a checkpoint directory so that no reader ever sees it half
// deleted with its manifest still present.
absl::Status RemoveCheckpointDir(const FileIo& io, const std::string& dir) {
  PSDB_RETURN_IF_ERROR(
      io.DeleteFile(absl::StrCat(dir, "/", kManifestFileName)));
  return io.DeleteRecursively(dir);
}

// Hard-links SST files (immutable in RocksDB) and copies everything else
// from `src` into the new directory `dst`.
absl::Status LinkOrCopyDir(const FileIo& io, const std::string& src,
                           const std::string& dst) {
  PSDB_RETURN_IF_ERROR(io.CreateDirs(dst));
  PSDB_ASSIGN_OR_RETURN(std::vector<std::string> names, io.ListChildren(src));
  for (const std::string& name : names) {
    const std::string from = absl::StrCat(src, "/", name);
    if (io.IsDirectory(from)) continue;
    const std::string to = absl::StrCat(dst, "/", name);
    if (absl::EndsWith(name, ".sst")) {
      PSDB_RETURN_IF_ERROR(io.LinkOrCopyFile(from, to));
    } else {
      PSDB_RETURN_IF_ERROR(io.CopyFile(from, to));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Manifest> Store::Impl::RestoreInto(
    const std::string& db_path) {
  PSDB_ASSIGN_OR_RETURN(std::string dir,
                        ResolveCheckpointDir(options_.restore_from, *io_));
  PSDB_ASSIGN_OR_RETURN(v1::Manifest m, ReadManifest(dir, *io_));
  int shard_index = -1;
  for (int i = 0; i < m.shards_size(); ++i) {
    if (m.shards(i).shard_id() == options_.shard_id) shard_index = i;
  }
  if (shard_index < 0 && m.shards_size() == 1) shard_index = 0;
  if (shard_index < 0) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", dir, " has no shard for shard id ",
                     options_.shard_id, " (", m.shards_size(), " shards)"));
  }
  const v1::ShardManifest& shard = m.shards(shard_index);
  const std::string shard_rel =
      shard.dir().empty() ? ShardDirName(shard.shard_id()) : shard.dir();
  const std::string src = absl::StrCat(dir, "/", shard_rel);
  if (!io_->Exists(src + "/CURRENT")) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", dir, " has no RocksDB shard ", shard_rel,
                     " for shard id ", options_.shard_id));
  }
  // Build and check into a temp directory, then rename: a crash or a
  // refused checkpoint leaves no <path>/db (Open removes a leftover temp).
  const std::string tmp = RestoreTmpPath(path_);
  PSDB_RETURN_IF_ERROR(io_->DeleteRecursively(tmp));
  std::vector<uint64_t> shard_rows;
  absl::Status s = LinkOrCopyDir(*io_, src, tmp);
  if (s.ok()) {
    s = internal::CheckRestoredShard(tmp, m, shard_index, dir, options_,
                                     &shard_rows);
    if (!s.ok()) s = Annotate(s, "restore refused");
  }
  if (s.ok()) {
    s = io_->Rename(tmp, db_path);
    restore_placed_ = s.ok();
  }
  if (!s.ok()) {
    (void)io_->DeleteRecursively(tmp);
    return s;
  }
  PSDB_RETURN_IF_ERROR(io_->SyncDir(path_));
  // This shard's verified counts: the store's rows, and what its own
  // checkpoints will record (a cluster manifest's rows() is all shards').
  for (int t = 0; t < m.tables_size(); ++t) {
    m.mutable_tables(t)->set_rows(shard_rows[t]);
  }
  return m;
}

absl::StatusOr<Store::ShardCheckpoint> Store::Impl::CheckpointShardLocked(
    const std::string& shard_dir) {
  ShardCheckpoint out;
  const std::optional<internal::Wal::Cut> cut = WalCut();
  std::vector<std::shared_ptr<Table>> tables = Snapshot();
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  for (const auto& t : tables) {
    PSDB_ASSIGN_OR_RETURN(uint64_t flushed, t->FlushDirty());
    out.rows_flushed += flushed;
    cfs.push_back(t->cf());
  }
  for (const auto& t : tables) {
    PSDB_ASSIGN_OR_RETURN(uint64_t expired, t->ExpireRows());
    out.rows_expired += expired;
  }
  RunCheckpointHook("rows_flushed");
  PSDB_RETURN_IF_ERROR(PersistMeta(/*clean=*/false));
  PSDB_RETURN_IF_ERROR(disk_->Flush(cfs));
  PSDB_RETURN_IF_ERROR(WalTruncate(cut));
  // What RocksDB knows of its files (checksums, column families, sequence
  // numbers), just before and just after the checkpoint takes its set of
  // files: a compaction that finishes in between (the flush above may
  // start one) removes some and adds others, and the checkpoint has one
  // of the two sets. File numbers are never reused, so the union is exact.
  absl::flat_hash_map<std::string, v1::ShardFile> live = disk_->LiveFiles();
  PSDB_RETURN_IF_ERROR(disk_->CreateCheckpoint(shard_dir));
  RunCheckpointHook("rocksdb_checkpoint_done");
  live.merge(disk_->LiveFiles());
  v1::ShardManifest listed;
  PSDB_RETURN_IF_ERROR(RecordShardFiles(*fs_, shard_dir, live, &listed));
  for (const v1::ShardFile& f : listed.files()) {
    ShardCheckpoint::File file{f.name(), f.size(), f.crc32c()};
    file.column_family = f.column_family();
    if (f.has_smallest_seqno() && f.has_largest_seqno()) {
      file.seqnos = {f.smallest_seqno(), f.largest_seqno()};
    }
    out.files.push_back(std::move(file));
  }
  for (const auto& t : tables) {
    out.tables.emplace_back(t->spec(), t->rows());
    out.step = std::max(out.step, t->step());
  }
  return out;
}

absl::StatusOr<Store::ShardCheckpoint> Store::Impl::CheckpointShard(
    absl::string_view shard_dir) {
  if (shard_dir.empty()) {
    return absl::InvalidArgumentError("checkpoint shard directory is empty");
  }
  const std::string dir(shard_dir);
  if (io_->Exists(dir)) {
    return absl::AlreadyExistsError(
        absl::StrCat("checkpoint shard directory ", dir, " already exists"));
  }
  const absl::Time start = absl::Now();
  absl::MutexLock l(&ckpt_mu_);
  PSDB_RETURN_IF_ERROR(io_->CreateDirs(ParentDir(dir)));
  PSDB_ASSIGN_OR_RETURN(ShardCheckpoint out, CheckpointShardLocked(dir));
  RecordCheckpoint(absl::Now() - start);
  return out;
}

void Store::Impl::RecordCheckpoint(absl::Duration d) {
  absl::MutexLock l(&stats_mu_);
  ++checkpoints_;
  last_checkpoint_ = d;
  total_checkpoint_ += d;
}

absl::StatusOr<CheckpointInfo> Store::Impl::Checkpoint(
    absl::string_view root_dir, const CheckpointOptions& options) {
  if (root_dir.empty()) {
    return absl::InvalidArgumentError("checkpoint root directory is empty");
  }
  if (options.keep_last < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_last must be >= 0, got ", options.keep_last));
  }
  const std::string root(root_dir);
  absl::MutexLock l(&ckpt_mu_);
  const absl::Time start = absl::Now();
  RunCheckpointHook("start");
  PSDB_RETURN_IF_ERROR(io_->CreateDirs(root));
  // seq first, so it stays above every directory ever created here.
  PSDB_ASSIGN_OR_RETURN(uint64_t seq, NextCheckpointSeq(root, *io_));
  PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> partial,
                        ListIncompleteCheckpoints(root, *io_));
  for (const CheckpointRef& r : partial) {
    PSDB_RETURN_IF_ERROR(RemoveCheckpointDir(*io_, r.path));
  }
  int64_t step = 0;
  for (const auto& t : Snapshot()) step = std::max(step, t->step());
  const std::string id = CheckpointId(step, seq);
  const std::string dir = absl::StrCat(root, "/", id);
  PSDB_RETURN_IF_ERROR(io_->CreateDir(dir));
  // The new directory's entry in root must be durable before the manifest
  // inside it makes it a checkpoint: otherwise a power cut after Checkpoint
  // returned could lose the whole directory (POSIX makes a new entry
  // durable only by an fsync of its parent; the crash sweep in
  // tests/store/checkpoint_crash_sweep_test.cc found this).
  PSDB_RETURN_IF_ERROR(io_->SyncDir(root));
  RunCheckpointHook("dir_created");

  const std::string shard_rel = ShardDirName(options_.shard_id);
  PSDB_ASSIGN_OR_RETURN(
      ShardCheckpoint shard,
      CheckpointShardLocked(absl::StrCat(dir, "/", shard_rel)));

  v1::Manifest m;
  m.set_format_version(kManifestFormatVersion);
  m.set_checkpoint_id(id);
  m.set_step(step);
  m.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  for (const auto& [spec, rows] : shard.tables) {
    v1::TableManifest* t = m.add_tables();
    *t->mutable_spec() = TableSpecToProto(spec);
    t->add_shard_rows(rows);
    t->set_rows(rows);
  }
  // Per-table steps (the shard result lists specs in table order).
  {
    std::vector<std::shared_ptr<Table>> tables = Snapshot();
    for (v1::TableManifest& t : *m.mutable_tables()) {
      for (const auto& tb : tables) {
        if (tb->name() == t.spec().name()) t.set_step(tb->step());
      }
    }
  }
  v1::ShardManifest* sm = m.add_shards();
  sm->set_shard_id(options_.shard_id);
  sm->set_dir(shard_rel);
  AppendShardFiles(shard.files, sm->mutable_files());
  PSDB_RETURN_IF_ERROR(WriteManifestAtomic(dir, m, *io_));
  RunCheckpointHook("manifest_written");

  if (options.keep_last > 0) {
    PSDB_ASSIGN_OR_RETURN(std::vector<CheckpointRef> all,
                          ListCheckpoints(root, *io_));
    for (size_t i = static_cast<size_t>(options.keep_last); i < all.size();
         ++i) {
      PSDB_RETURN_IF_ERROR(RemoveCheckpointDir(*io_, all[i].path));
      RunCheckpointHook("pruned_one");
    }
  }
  const absl::Duration took = absl::Now() - start;
  RecordCheckpoint(took);
  RunCheckpointHook("done");

  CheckpointInfo info;
  info.path = dir;
  info.step = step;
  info.rows_flushed = shard.rows_flushed;
  info.rows_expired = shard.rows_expired;
  info.duration = took;
  return info;
}

}  // namespace psdb
