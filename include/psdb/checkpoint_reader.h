// CheckpointReader: read-only access to a psdb checkpoint (manifest/manifest.h
// describes the layout): its manifest, its tables' specs and one RocksDB per
// shard opened with rocksdb::DB::OpenForReadOnly and every column family
// rocksdb::DB::ListColumnFamilies reports. Nothing in the checkpoint is
// modified (RocksDB's info log goes nowhere). Used by ps-dump, by serving
// replicas (to verify a checkpoint before they serve it,
// checkpoint/verify.h) and by tests that inspect checkpoints.
//
// TableCursor walks one table's rows across all shards in key order (a
// k-way merge of the shards' iterators; keys are big-endian, so bytewise
// order is numeric order).
//
// Thread-safety: a CheckpointReader may be read from several threads (RocksDB
// read-only DBs are thread-safe); a TableCursor is used by one thread.
#ifndef PSDB_CHECKPOINT_READER_H_
#define PSDB_CHECKPOINT_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/row.h"
#include "psdb/table_spec.h"

// RocksDB and the manifest's protobuf appear only by name: a caller that
// uses NewIterator or manifest() includes their headers ("rocksdb/db.h";
// manifest/manifest.pb.h, inside psdb's tree).
namespace rocksdb {
class ColumnFamilyHandle;
class Env;
class FileSystem;
class Iterator;
}  // namespace rocksdb

namespace psdb::v1 {
class Manifest;
}  // namespace psdb::v1

namespace psdb::ckpt {

// A table as the manifest describes it.
struct TableInfo {
  TableSpec spec;
  int state_size = 0;  // optim::StateSize(spec.optimizer, spec.dim)
  int64_t step = 0;
  uint64_t rows = 0;                 // manifest total
  std::vector<uint64_t> shard_rows;  // manifest, indexed like shards()
};

// One decoded row of a checkpoint.
struct DecodedRow {
  uint64_t key = 0;
  RowHeader header;
  std::vector<float> values;  // dim
  std::vector<float> state;   // state_size
};

struct ShardInfo {
  int shard_id = 0;
  std::string path;    // absolute-or-as-given path of the RocksDB checkpoint
  std::string server;  // empty in embedded mode
  std::vector<std::string> column_families;
};

class CheckpointReader {
 public:
  // `path` is a checkpoint directory (containing MANIFEST.json) or a root
  // whose newest complete checkpoint is used. NotFound if there is none;
  // DataLoss/FailedPrecondition from the manifest; an error naming the shard
  // directory if a shard's RocksDB cannot be opened. Every file is read
  // through `file_system` (nullptr: the local file system).
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(
      absl::string_view path,
      std::shared_ptr<rocksdb::FileSystem> file_system = nullptr);
  // The same, opening only the shards whose shard_id is in `shard_ids`:
  // shards() lists only those (in manifest order) and each table's
  // shard_rows is indexed like it; the other shards' files are never
  // touched. What a restore onto a different ring reads
  // (checkpoint/restore.h). NotFound if an id is not in the manifest.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenShards(
      absl::string_view path, absl::Span<const int> shard_ids,
      std::shared_ptr<rocksdb::FileSystem> file_system = nullptr);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  // The resolved checkpoint directory.
  const std::string& dir() const { return dir_; }
  const v1::Manifest& manifest() const { return *manifest_; }
  // The manifest's step (the training step the checkpoint was taken at).
  int64_t step() const;
  const std::vector<TableInfo>& tables() const { return tables_; }
  const std::vector<ShardInfo>& shards() const { return shards_; }

  // NotFound naming the table and listing the ones that exist.
  absl::StatusOr<const TableInfo*> FindTable(absl::string_view name) const;

  // An iterator over table `table`'s column family in shard `shard` (index
  // into shards()), positioned nowhere (call Seek*). DataLoss naming the
  // shard directory if the column family is missing.
  absl::StatusOr<std::unique_ptr<rocksdb::Iterator>> NewIterator(
      size_t shard, absl::string_view table) const;
  // Point lookup; NotFound if the key is not in that shard.
  absl::Status Get(size_t shard, absl::string_view table, uint64_t key,
                   std::string* value) const;
  // Decodes one stored (key, value) of `table` in shard `shard` into `row`
  // (store/row_codec.h). DataLoss naming Where(shard, table) and the key.
  absl::Status Decode(size_t shard, const TableInfo& table,
                      absl::string_view key, absl::string_view value,
                      DecodedRow* row) const;
  // "<shard dir>: table '<table>'", for error messages.
  std::string Where(size_t shard, absl::string_view table) const;

  // RocksDB's check of every block checksum of every SST file of shard
  // `shard` (rocksdb::DB::VerifyChecksum): catches a flipped byte anywhere
  // in the files, also in blocks a row scan never reads. DataLoss naming
  // the shard directory.
  absl::Status VerifyChecksums(size_t shard) const;

  // Live SST bytes of the table's column family in shard `shard` (0 if the
  // column family is missing).
  uint64_t SstBytes(size_t shard, absl::string_view table) const;

 private:
  struct OpenShard;
  CheckpointReader();
  // only == nullptr: every shard.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenImpl(
      absl::string_view path, const absl::Span<const int>* only,
      std::shared_ptr<rocksdb::FileSystem> file_system);
  absl::StatusOr<rocksdb::ColumnFamilyHandle*> Family(
      size_t shard, absl::string_view table) const;

  std::string dir_;
  std::unique_ptr<v1::Manifest> manifest_;
  std::vector<TableInfo> tables_;
  std::vector<ShardInfo> shards_;
  // Over the file system passed to Open; outlives the shards' DBs.
  std::unique_ptr<rocksdb::Env> env_;
  std::vector<std::unique_ptr<OpenShard>> open_;
};

// Key-ordered rows of one table over all shards. A key present in several
// shards (which a valid checkpoint never has) comes out once per shard,
// lowest shard index first.
class TableCursor {
 public:
  // Positions the cursor on the table's smallest key.
  static absl::StatusOr<std::unique_ptr<TableCursor>> Open(
      const CheckpointReader& reader, const TableInfo& table);
  ~TableCursor();
  TableCursor(const TableCursor&) = delete;
  TableCursor& operator=(const TableCursor&) = delete;

  bool Valid() const { return current_ >= 0; }
  void Next();
  // REQUIRES: Valid().
  absl::string_view key() const;
  absl::string_view value() const;
  size_t shard() const { return static_cast<size_t>(current_); }
  // Non-OK if an underlying iterator failed (checked when Valid() is false).
  absl::Status status() const { return status_; }

 private:
  explicit TableCursor(std::vector<std::unique_ptr<rocksdb::Iterator>> its);
  void PickSmallest();

  std::vector<std::unique_ptr<rocksdb::Iterator>> its_;
  int current_ = -1;
  absl::Status status_;
};

}  // namespace psdb::ckpt

#endif  // PSDB_CHECKPOINT_READER_H_
