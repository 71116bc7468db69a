// Checkpoint manifests and checkpoint directories: the files a psdb
// checkpoint consists of, shared by the store, ps-server (cluster
// checkpoints), ps-dump and tests.
//
// A checkpoint is a directory <root>/<checkpoint id>/ holding MANIFEST.json
// (psdb.v1.Manifest, protobuf's JSON mapping) and one RocksDB checkpoint per
// shard (shard-<id>/). The manifest is written last, by atomic rename: a
// directory without MANIFEST.json is an incomplete checkpoint and does not
// exist for readers.
//
// Checkpoint ids are "ckpt-<step, 12 digits>-<seq, 6 digits>", e.g.
// "ckpt-000000001200-000003". seq increases by one with every checkpoint
// written under a root (max seq of any directory there, complete or not, + 1),
// so "newest" means "highest seq", whatever the steps.
//
// The functions that touch files do so through a FileIo (util/file_io.h):
// the store passes the one over StoreOptions::file_system; the default is
// the local file system.
//
// Thread-safety: pure functions over the filesystem; concurrent writers of
// the same root must be serialized by the caller (the Store does).
#ifndef PSDB_MANIFEST_MANIFEST_H_
#define PSDB_MANIFEST_MANIFEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "manifest/manifest.pb.h"
#include "psdb/table_spec.h"
#include "util/file_io.h"

namespace psdb {

// The newest manifest format this build reads and the one it writes.
// Format 2 lists each shard's files with their checksums, which readers
// check (store/shard_files.h); format 1 manifests, written before, are read
// without that check: a restore still counts every table's rows, reading
// every data block with its RocksDB checksum verified (restore_check.h),
// so what goes unchecked is only a file that RocksDB's own MANIFEST does
// not reference.
inline constexpr uint32_t kManifestFormatVersion = 2;
// The first format whose shards list their files.
inline constexpr uint32_t kManifestShardFilesVersion = 2;
inline constexpr char kManifestFileName[] = "MANIFEST.json";

// TableSpec <-> proto. Enum fields use the stable lower-case names of
// manifest/manifest.proto ("uniform", "adagrad", "skip_row", ...).
v1::TableSpec TableSpecToProto(const TableSpec& spec);
// A field the message does not set (a string field set to "") takes the
// C++ default (psdb/table_spec.h, optim/optimizer.h): the one place where
// defaults are applied to specs that arrive as messages or JSON.
// InvalidArgument naming the field on an unknown enum name; does not check
// ranges (call ValidateTableSpec for that).
absl::StatusOr<TableSpec> TableSpecFromProto(const v1::TableSpec& proto);

// TableSpec <-> one-line JSON of v1::TableSpec (how the store persists specs).
std::string TableSpecToJson(const TableSpec& spec);
// InvalidArgument on unparsable JSON or unknown enum names.
absl::StatusOr<TableSpec> TableSpecFromJson(absl::string_view json);

// Manifest <-> JSON text (pretty-printed, field names lowerCamelCase).
std::string ManifestToJson(const v1::Manifest& manifest);
// DataLoss on unparsable JSON; FailedPrecondition if format_version is newer
// than kManifestFormatVersion. `source` (a file name) prefixes messages.
absl::StatusOr<v1::Manifest> ManifestFromJson(absl::string_view json,
                                              absl::string_view source);

// Reads <checkpoint_dir>/MANIFEST.json. NotFound if it does not exist;
// DataLoss if unreadable or unparsable; FailedPrecondition if its
// format_version is newer than this build supports. Messages name the file.
absl::StatusOr<v1::Manifest> ReadManifest(absl::string_view checkpoint_dir,
                                          const FileIo& io = LocalFileIo());

// Writes <checkpoint_dir>/MANIFEST.json atomically: writes
// MANIFEST.json.tmp, fsyncs it, renames it over MANIFEST.json, fsyncs the
// directory. A crash at any point leaves either no manifest or the complete
// one. Sets nothing in `manifest`; the caller fills format_version (0 is
// written as kManifestFormatVersion).
absl::Status WriteManifestAtomic(absl::string_view checkpoint_dir,
                                 const v1::Manifest& manifest,
                                 const FileIo& io = LocalFileIo());

// fsyncs the directory `dir`, so that a rename or unlink inside it is
// durable. Internal error naming the directory.
absl::Status SyncDir(absl::string_view dir);

// The tables a checkpoint's manifest lists against those one of its shards
// holds: `column_families` is the shard's RocksDB column family list (its
// "default" family holds the store's metadata, not a table). One message
// per table that is in one but not the other, in name order, the
// manifest's first: "table 'x' is in the manifest but not in the shard's
// files", "table 'x' is in the shard's files but not in the manifest".
// Empty when both name exactly the same tables.
std::vector<std::string> ShardTableMismatches(
    const v1::Manifest& manifest,
    const std::vector<std::string>& column_families);
// OK when ShardTableMismatches is empty; otherwise DataLoss "<where>: " and
// its first message (`where` names the checkpoint and shard).
absl::Status CheckShardTables(const v1::Manifest& manifest,
                              const std::vector<std::string>& column_families,
                              absl::string_view where);

// "ckpt-%012d-%06d" of (step, seq). REQUIRES: step >= 0.
std::string CheckpointId(int64_t step, uint64_t seq);
// Parses a checkpoint id; false if `name` is not one.
bool ParseCheckpointId(absl::string_view name, int64_t* step, uint64_t* seq);
// "shard-<id>": the directory of shard `shard_id` inside a checkpoint.
std::string ShardDirName(int shard_id);

struct CheckpointRef {
  std::string id;    // directory name, e.g. "ckpt-000000001200-000003"
  std::string path;  // <root>/<id>
  int64_t step = 0;
  uint64_t seq = 0;
};

// Complete checkpoints (those with MANIFEST.json) under `root`, newest
// (highest seq) first. A missing root yields an empty list.
absl::StatusOr<std::vector<CheckpointRef>> ListCheckpoints(
    absl::string_view root, const FileIo& io = LocalFileIo());
// Directories under `root` named like checkpoints but without MANIFEST.json
// (left by a crash mid-checkpoint), newest first.
absl::StatusOr<std::vector<CheckpointRef>> ListIncompleteCheckpoints(
    absl::string_view root, const FileIo& io = LocalFileIo());
// The newest complete checkpoint under `root`; NotFound if there is none.
absl::StatusOr<CheckpointRef> LatestCheckpoint(
    absl::string_view root, const FileIo& io = LocalFileIo());
// The seq the next checkpoint under `root` gets: 1 + the largest seq of any
// checkpoint directory there (complete or not); 1 for an empty root.
absl::StatusOr<uint64_t> NextCheckpointSeq(absl::string_view root,
                                           const FileIo& io = LocalFileIo());

// `path` itself if it contains MANIFEST.json, else the newest complete
// checkpoint under it; NotFound naming `path` otherwise.
absl::StatusOr<std::string> ResolveCheckpointDir(
    absl::string_view path, const FileIo& io = LocalFileIo());

}  // namespace psdb

#endif  // PSDB_MANIFEST_MANIFEST_H_
