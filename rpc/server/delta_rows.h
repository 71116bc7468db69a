// DeltaRows: the rows a serving snapshot holds beyond its base store, so
// that taking up a checkpoint costs the files it adds, not the table
// (rpc/server/checkpoint_follower.h).
//
// A replica opens one checkpoint as its base (a read-only Store over its
// RocksDB files). A later checkpoint that only adds SST files to the base's
// (training flushed the rows it changed, and no compaction rewrote a file
// the base has) is served as the base plus the rows of the added files:
// their rows were read anyway to verify them. The files are laid over each
// other in the order of their entries' sequence numbers, so a key takes
// the value of the newest file that holds it, and a key no added file holds
// takes the base's.
//
// Files' rows are shared (std::shared_ptr) between the snapshots that hold
// them: a row unchanged between two checkpoints is held once.
//
// Thread-safety: immutable once built; any thread may read it.
#ifndef PSDB_RPC_SERVER_DELTA_ROWS_H_
#define PSDB_RPC_SERVER_DELTA_ROWS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "checkpoint/file_verify.h"

namespace psdb::rpc {

class DeltaRows {
 public:
  // Where a key's newest row is: files()[file].rows, row `row`.
  struct Ref {
    uint32_t file = 0;
    uint32_t row = 0;
  };

  // The rows of `files`, oldest first (a later file's row of a key wins).
  explicit DeltaRows(std::vector<std::shared_ptr<const ckpt::FileRows>> files);

  const std::vector<std::shared_ptr<const ckpt::FileRows>>& files() const {
    return files_;
  }
  // The file holding the newest row of `key` in `table` (its index there
  // into *row, when row is not null); nullptr if no file holds it.
  const ckpt::FileRows* Find(absl::string_view table, uint64_t key,
                             size_t* row) const;
  // Whether any file holds rows of `table`.
  bool HasTable(absl::string_view table) const {
    return index_.contains(table);
  }
  // Distinct keys over every table, and the bytes held (rows and index).
  uint64_t rows() const { return rows_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<std::shared_ptr<const ckpt::FileRows>> files_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<uint64_t, Ref>> index_;
  uint64_t rows_ = 0;
  uint64_t bytes_ = 0;
};

// The bytes one file's rows take in memory.
uint64_t FileRowsBytes(const ckpt::FileRows& file);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_DELTA_ROWS_H_
