// Verifying a checkpoint shard file by file, each file once: what a
// serving replica (rpc/server/checkpoint_follower.h) does with every
// checkpoint after the first, so that taking up a checkpoint costs the
// files it adds, not the table.
//
// Checkpoints written under one root share their unchanged SST files by
// hard link (store/store_checkpoint.cc): the same file, the same inode. An
// SST file is immutable, so one verified once need not be read again. A
// file is known by FileId: its device and inode and the size and crc32c
// the manifest lists for it. The first checkpoint a replica serves is
// verified whole (checkpoint/verify.h, which also counts every table's
// rows); VerifiedFiles::AddShard then records its files.
//
// VerifyShardFiles checks, for shard `shard_index` of a checkpoint:
//  - the shard directory against the manifest's file list (names, no data
//    file unlisted, sizes) and, for files not verified before, their whole
//    file crc32c (store/shard_files.h);
//  - each new SST file: every block checksum (rocksdb::SstFileReader), its
//    column family is one of the manifest's tables (or RocksDB's "default",
//    the store's metadata), and every row in it decodes with the table's dim
//    and state size, has finite values and state, and is owned by the
//    shard on the checkpoint's ring when `ring` is given.
// Not checked for new files alone: a table's row count, which needs every
// file of the table (the full Verify counts them).
//
// Thread-safety: VerifiedFiles is thread-compatible; VerifyShardFiles
// reads files only.
#ifndef PSDB_CHECKPOINT_FILE_VERIFY_H_
#define PSDB_CHECKPOINT_FILE_VERIFY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "manifest/manifest.pb.h"
#include "rocksdb/file_system.h"
#include "shard/ring.h"

namespace psdb::ckpt {

struct FileId {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  std::string crc32c;

  friend bool operator==(const FileId& a, const FileId& b) {
    return a.device == b.device && a.inode == b.inode && a.size == b.size &&
           a.crc32c == b.crc32c;
  }
  template <typename H>
  friend H AbslHashValue(H h, const FileId& f) {
    return H::combine(std::move(h), f.device, f.inode, f.size, f.crc32c);
  }
};

// The id of the file at `path`, which the manifest lists as `listed`
// (stat(2)). DataLoss naming the path if it cannot be stat'ed.
absl::StatusOr<FileId> IdentifyFile(const std::string& path,
                                    const v1::ShardFile& listed);

// The directory of shard `shard_index` of the checkpoint at `dir`.
std::string ShardPath(const std::string& dir, const v1::ShardManifest& shard);

class VerifiedFiles {
 public:
  bool Contains(const FileId& id) const { return ids_.contains(id); }
  void Insert(FileId id) { ids_.insert(std::move(id)); }
  // Records every file shard `shard_index` of the checkpoint at `dir`
  // (manifest `m`) lists, after the caller verified them all; adds their
  // ids to `ids` too.
  absl::Status AddShard(const v1::Manifest& m, int shard_index,
                        const std::string& dir,
                        absl::flat_hash_set<FileId>* ids);
  // Forgets every file not in `keep` (the files still served), so the set
  // stays the size of what is served.
  void RetainOnly(const absl::flat_hash_set<FileId>& keep);
  size_t size() const { return ids_.size(); }

 private:
  absl::flat_hash_set<FileId> ids_;
};

struct FileVerifyReport {
  uint64_t files_verified = 0;      // read and checked
  uint64_t bytes_verified = 0;      // their listed sizes
  uint64_t files_reused = 0;        // known from `verified`, not read
  uint64_t rows_verified = 0;       // rows of new SST files decoded and checked
  absl::flat_hash_set<FileId> ids;  // every file of the shard
};

// Verifies shard `shard_index` of the checkpoint at `dir` (manifest `m`,
// format 2 or newer) as above, reading through `fs`, only the files
// `verified` does not hold; adds those that pass to it and the counts to
// `report`. DataLoss naming the file, table and key for what fails;
// FailedPrecondition if the manifest lists no files (format 1: verify the
// whole checkpoint instead).
absl::Status VerifyShardFiles(const std::shared_ptr<rocksdb::FileSystem>& fs,
                              const v1::Manifest& m, int shard_index,
                              const std::string& dir, const Ring* ring,
                              VerifiedFiles* verified,
                              FileVerifyReport* report);

}  // namespace psdb::ckpt

#endif  // PSDB_CHECKPOINT_FILE_VERIFY_H_
