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
// What each file is (FileFacts: its column family and the sequence numbers
// of its entries, which the manifest lists from manifests of this version
// on, and, once read, its deletions) is kept with its id, and the rows of
// new SST files can be kept too (FileRows): what a replica needs to lay a
// checkpoint's new files over the ones it serves. A caller may also skip
// files (FileVerifyOptions::skip): they are only checked by size against
// the manifest, not read, and not recorded as verified (a replica skips
// files it will not read rows from).
//
// Thread-safety: VerifiedFiles is thread-compatible; VerifyShardFiles
// reads files only.
#ifndef PSDB_CHECKPOINT_FILE_VERIFY_H_
#define PSDB_CHECKPOINT_FILE_VERIFY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "manifest/manifest.pb.h"
#include "psdb/row.h"
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

// The smallest and largest sequence number of an SST's entries.
struct SeqnoRange {
  uint64_t min = 0;
  uint64_t max = 0;
};

// What a file of a shard is.
struct FileFacts {
  std::string name;           // as the manifest lists it
  bool sst = false;           // an SST file (the rest: RocksDB's own files)
  std::string column_family;  // an SST's column family (a table's name,
                              // or "default": the store's metadata); ""
                              // when not known
  // From the manifest; nullopt when it does not list them.
  std::optional<SeqnoRange> seqnos;
  // An SST's point and range deletions (its table properties); nullopt
  // until the file is read.
  std::optional<uint64_t> deletions;
};

// What the manifest says of a file.
FileFacts ListedFacts(const v1::ShardFile& listed);

// The facts of the SST file at `path`, which the manifest lists as
// `listed`, with what its table properties add (its column family when the
// manifest does not say, its deletions), read through `fs`. DataLoss
// naming the file if it cannot be opened, or its column family is not the
// one the manifest lists.
absl::StatusOr<FileFacts> ReadFileFacts(
    const std::shared_ptr<rocksdb::FileSystem>& fs, const std::string& path,
    const v1::ShardFile& listed);

class VerifiedFiles {
 public:
  // Null if the file is not known.
  const FileFacts* Find(const FileId& id) const {
    auto it = files_.find(id);
    return it == files_.end() ? nullptr : &it->second;
  }
  bool Contains(const FileId& id) const { return files_.contains(id); }
  void Insert(FileId id, FileFacts facts) {
    files_.insert_or_assign(std::move(id), std::move(facts));
  }
  // Records every file shard `shard_index` of the checkpoint at `dir`
  // (manifest `m`) lists, after the caller verified them all (reading the
  // SSTs' table properties through `fs`); adds their ids to `ids` too.
  absl::Status AddShard(const std::shared_ptr<rocksdb::FileSystem>& fs,
                        const v1::Manifest& m, int shard_index,
                        const std::string& dir,
                        absl::flat_hash_set<FileId>* ids);
  // Forgets every file not in `keep` (the files still served), so the set
  // stays the size of what is served.
  void RetainOnly(const absl::flat_hash_set<FileId>& keep);
  size_t size() const { return files_.size(); }

 private:
  absl::flat_hash_map<FileId, FileFacts> files_;
};

// The rows of one new SST file of a table, as verified.
struct FileRows {
  FileId id;
  std::string table;
  std::vector<uint64_t> keys;
  RowBatch rows;  // row i is keys[i]'s
};

struct FileVerifyReport {
  uint64_t files_verified = 0;      // read and checked
  uint64_t bytes_verified = 0;      // their listed sizes
  uint64_t files_reused = 0;        // known from `verified`, not read
  uint64_t files_skipped = 0;       // options.skip: not read, not verified
  uint64_t rows_verified = 0;       // rows of new SST files decoded and checked
  absl::flat_hash_set<FileId> ids;  // every file of the shard(s)
  // The rows of the new SST files of tables, when asked for and while they
  // fit in max_row_bytes; rows_complete says whether all of them did.
  // (shared: a replica's delta holds them as they are).
  std::vector<std::shared_ptr<FileRows>> rows;
  uint64_t row_bytes = 0;
  bool rows_complete = true;
};

// Verifies shard `shard_index` of the checkpoint at `dir` (manifest `m`,
// format 2 or newer) as above, reading through `fs`, only the files
// `verified` does not hold; adds those that pass to it and the counts to
// `report`. With keep_rows, the rows of new table SSTs go to report->rows
// until they pass max_row_bytes (then rows_complete is false and the rest
// are only checked). DataLoss naming the file, table and key for what
// fails; FailedPrecondition if the manifest lists no files (format 1:
// verify the whole checkpoint instead).
struct FileVerifyOptions {
  const Ring* ring = nullptr;  // check ownership when set
  bool keep_rows = false;
  uint64_t max_row_bytes = 0;
  // Files (by name) checked by size only. Default: none
  absl::flat_hash_set<std::string> skip;
};
absl::Status VerifyShardFiles(const std::shared_ptr<rocksdb::FileSystem>& fs,
                              const v1::Manifest& m, int shard_index,
                              const std::string& dir,
                              const FileVerifyOptions& options,
                              VerifiedFiles* verified,
                              FileVerifyReport* report);

}  // namespace psdb::ckpt

#endif  // PSDB_CHECKPOINT_FILE_VERIFY_H_
