// ShardWriter: writes one shard of a checkpoint (a RocksDB database in the
// store's own format: one column family per table with the DiskTier's
// options, rows as store/row_codec.h encodes them, the store's metadata in
// the default column family) from rows that already exist elsewhere, without
// a Store: what `ps-dump reshard` (checkpoint/reshard.h) builds each
// destination shard with. A Store restored from the shard (or ps-dump, or a
// serving replica) cannot tell it from one a Store's checkpoint wrote.
//
// Rows are buffered in a rocksdb::WriteBatch of at most batch_rows rows,
// written without the WAL (as the store writes rows), and the memtables are
// flushed to SST files by Finish; memory is one batch plus RocksDB's write
// buffers, whatever the number of rows.
//
// Thread-safety: not thread-safe; one writer per shard directory.
// Nothing is durable until Finish returns OK; on error the caller removes
// the directory.
#ifndef PSDB_STORE_SHARD_WRITER_H_
#define PSDB_STORE_SHARD_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "psdb/table_spec.h"

namespace rocksdb {
class FileSystem;
}  // namespace rocksdb

namespace psdb {

namespace internal {
class DiskTier;
}  // namespace internal

struct ShardWriterOptions {
  // Rows buffered before one write to RocksDB. REQUIRES: >= 1.
  // Default: 65536
  size_t batch_rows = 65536;
  // The file system the database is written through. Default: nullptr, the
  // local file system
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

class ShardWriter {
 public:
  // Creates the database at `dir` (which must not exist) with a column
  // family for each of `tables` (index i below is tables[i]).
  // AlreadyExists if `dir` exists; InvalidArgument on batch_rows == 0 or a
  // table named twice.
  static absl::StatusOr<std::unique_ptr<ShardWriter>> Create(
      absl::string_view dir, absl::Span<const TableSpec> tables,
      const ShardWriterOptions& options = {});
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Adds one row of table `table`: its 8-byte key and its encoded value,
  // stored as given (store/row_codec.h; the caller has decoded or verified
  // them). REQUIRES: table < number of tables; each key once per table.
  absl::Status Add(size_t table, absl::string_view key,
                   absl::string_view value);

  // Writes what is buffered, the metadata (format version, each table's
  // spec, steps[i] and its row count, a clean close) and flushes every
  // memtable; the database is then closed. REQUIRES: steps.size() equals the
  // number of tables; called once.
  absl::Status Finish(absl::Span<const int64_t> steps);

  // Rows added to table `table` so far.
  uint64_t rows(size_t table) const { return rows_[table]; }

 private:
  struct Batch;
  ShardWriter() = default;
  absl::Status WriteBatch();

  ShardWriterOptions options_;
  std::vector<TableSpec> specs_;
  std::vector<uint64_t> rows_;
  std::unique_ptr<internal::DiskTier> disk_;
  std::unique_ptr<Batch> batch_;
  bool finished_ = false;
};

}  // namespace psdb

#endif  // PSDB_STORE_SHARD_WRITER_H_
