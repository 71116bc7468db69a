// The files of a checkpoint shard's directory and their checksums, which
// the manifest lists (v1::ShardManifest.files, manifest format 2 on): the
// writers of a checkpoint record them once the directory is complete, and
// every reader checks them before RocksDB opens a file there.
//
// Why: RocksDB parses parts of an SST file (its properties block) before it
// verifies their checksums, and the Debian build keeps its assertions, so
// one wrong byte there aborts the process instead of failing the open
// (found by tests/fuzz/checkpoint_reader_fuzz.cc). A checkpoint is read
// from storage psdb does not control; the whole-file checksum makes a
// corrupt, truncated or missing file a DataLoss error naming the file.
//
// The checksum is RocksDB's standard file checksum (FileChecksumCrc32c,
// rocksdb/file_checksum.h): the store's RocksDB computes it as it writes
// each SST file (DiskTier), so a checkpoint reads only the files RocksDB
// has no checksum for (its small MANIFEST, CURRENT and OPTIONS files, and
// SST files written before that), not the table.
//
// Thread-safety: pure functions of the files; the caller keeps the
// directory from changing while they run.
#ifndef PSDB_STORE_SHARD_FILES_H_
#define PSDB_STORE_SHARD_FILES_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "manifest/manifest.pb.h"
#include "psdb/store.h"

namespace rocksdb {
class FileSystem;
}  // namespace rocksdb

namespace psdb {

// RocksDB's raw FileChecksumCrc32c value (4 bytes) as the manifest spells
// it: 8 lower-case hex digits.
std::string ShardFileChecksumHex(absl::string_view raw);

// The size and checksum of the file at `path`, read once in 1 MiB chunks.
// DataLoss naming the file if it cannot be read.
absl::StatusOr<v1::ShardFile> ReadShardFile(rocksdb::FileSystem& fs,
                                            const std::string& path);

// Every regular file directly in `dir`, sorted by name, with its size and
// checksum, into `shard->files` (replacing what was there). A file named in
// `known` with the same size takes that entry's checksum (the store's
// RocksDB knows its SST files'; a checkpoint hard-links them); every other
// file is read.
absl::Status RecordShardFiles(
    rocksdb::FileSystem& fs, const std::string& dir,
    const absl::flat_hash_map<std::string, v1::ShardFile>& known,
    v1::ShardManifest* shard);

// Appends `files` (what Store::CheckpointShard listed) to `out` (a
// manifest's ShardManifest.files, or the wire's CheckpointResponse).
void AppendShardFiles(absl::Span<const Store::ShardCheckpoint::File> files,
                      google::protobuf::RepeatedPtrField<v1::ShardFile>* out);

// Checks the shard directory `dir` against the files `shard` lists, when
// `format_version` >= kManifestShardFilesVersion (older manifests list
// none, and are read unchecked). Requires: the list is not empty, names
// are plain file names, each listed file exists with its size and
// checksum, and no file RocksDB would read as data (*.sst, *.log, *.blob,
// MANIFEST-*) is there unlisted. DataLoss "<where>: file '<name>': ..."
// otherwise. Reads every listed file once.
//
// `known`, when given, names files already checked (a serving replica's
// files shared by hard link with a checkpoint it verified before): for
// them only the size is compared, nothing is read.
absl::Status CheckShardFiles(
    rocksdb::FileSystem& fs, uint32_t format_version,
    const v1::ShardManifest& shard, const std::string& dir,
    absl::string_view where,
    absl::FunctionRef<bool(const v1::ShardFile& file, const std::string& path)>
        known = [](const v1::ShardFile&, const std::string&) { return false; });

}  // namespace psdb

#endif  // PSDB_STORE_SHARD_FILES_H_
