// What ps-bench's serving scenarios (serve_bench.h, freshness_bench.h)
// share: the training side that writes the checkpoints replicas follow,
// and the bytes a row takes in a replica's memory tier.
//
// Thread-safety: a CheckpointWriter is used by one thread at a time.
#ifndef PSDB_TOOLS_BENCH_SERVE_CHECKPOINTS_H_
#define PSDB_TOOLS_BENCH_SERVE_CHECKPOINTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "psdb/store.h"
#include "tools/bench/server_systems.h"

namespace psdb::bench {

// The training side: an in-process Store whose checkpoints the replicas
// follow. Version 0 holds every row as InitializeRow made it (the bytes
// Redis holds); version v >= 1 applies one SGD step to the hottest
// `changed` rows (ranks 0..changed-1) at step v, so the checkpoint that
// carries it reports table step v.
class CheckpointWriter {
 public:
  static absl::StatusOr<std::unique_ptr<CheckpointWriter>> Open(
      const ServerSystemOptions& o, const std::string& store_dir,
      std::string root);

  // Writes version 0: every row, then the first checkpoint. With `settle`,
  // first waits (up to 10 min) until the store runs and owes no
  // compaction, so the checkpoint is the shape a trained table settles into.
  absl::Status WriteAll(bool settle = false);
  // Writes version `version` (>= 1): changes the ranks [0, changed) and
  // checkpoints incrementally.
  absl::Status WriteVersion(int64_t version, uint64_t changed);

 private:
  CheckpointWriter() = default;
  absl::Status Checkpoint();

  std::unique_ptr<Store> store_;
  TableSpec spec_;
  ServerSystemOptions options_;
  std::string root_;
};

// The bytes a row takes in a memory tier (store/memory_tier.cc's slot: the
// floats, 8-aligned, then RowHeader and the slot's metadata), rounded up
// to leave room for the index: what the budgets are fractions of.
uint64_t RowMemoryBytes(int dim);

}  // namespace psdb::bench

#endif  // PSDB_TOOLS_BENCH_SERVE_CHECKPOINTS_H_
