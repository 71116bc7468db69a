#include "tools/bench/serve_checkpoints.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "optim/optimizer.h"
#include "psdb/row.h"
#include "tools/bench/zipf.h"
#include "util/status_macros.h"

namespace psdb::bench {

absl::StatusOr<std::unique_ptr<CheckpointWriter>> CheckpointWriter::Open(
    const ServerSystemOptions& o, const std::string& store_dir,
    std::string root) {
  auto w = std::unique_ptr<CheckpointWriter>(new CheckpointWriter());
  StoreOptions options;
  // Rows stream through to RocksDB; the writer need not hold them.
  options.memory_budget_bytes = 256ull << 20;
  PSDB_ASSIGN_OR_RETURN(w->store_, Store::Open(options, store_dir));
  w->spec_ = BenchTableSpec(o);
  w->options_ = o;
  w->root_ = std::move(root);
  PSDB_RETURN_IF_ERROR(w->store_->CreateTable(w->spec_));
  return w;
}

absl::Status CheckpointWriter::WriteAll(bool settle) {
  constexpr uint64_t kChunk = 65536;
  RowBatch rows;
  std::vector<uint64_t> keys;
  for (uint64_t begin = 0; begin < options_.rows; begin += kChunk) {
    const uint64_t n = std::min(kChunk, options_.rows - begin);
    rows.Resize(spec_.dim, optim::StateSize(spec_.optimizer, spec_.dim), n);
    keys.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      keys[i] = ScrambleKey(begin + i, options_.seed);
      InitializeRow(
          spec_, keys[i],
          absl::MakeSpan(rows.values).subspan(i * spec_.dim, spec_.dim));
    }
    PSDB_RETURN_IF_ERROR(store_->PutRows(spec_.name, keys, rows));
  }
  if (settle) {
    PSDB_RETURN_IF_ERROR(store_->Flush());
    const absl::Time deadline = absl::Now() + absl::Minutes(10);
    for (;;) {
      const StoreStats stats = store_->Stats();
      bool busy = stats.disk_running_compactions > 0;
      for (const TableStats& t : stats.tables) {
        busy = busy || t.disk_compaction_pending;
      }
      if (!busy) break;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            "the store's compactions did not finish in 10 min");
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  return Checkpoint();
}

absl::Status CheckpointWriter::WriteVersion(int64_t version, uint64_t changed) {
  changed = std::clamp<uint64_t>(changed, 1, options_.rows);
  constexpr uint64_t kChunk = 65536;
  std::vector<uint64_t> keys;
  const std::vector<float> grads(kChunk * spec_.dim, 0.01f);
  for (uint64_t begin = 0; begin < changed; begin += kChunk) {
    const uint64_t n = std::min(kChunk, changed - begin);
    keys.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      keys[i] = ScrambleKey(begin + i, options_.seed);
    }
    PSDB_RETURN_IF_ERROR(store_->Push(
        spec_.name, keys, absl::MakeConstSpan(grads).first(n * spec_.dim),
        {.step = version}));
  }
  return Checkpoint();
}

absl::Status CheckpointWriter::Checkpoint() {
  // Keep every checkpoint: a replica may still be reading an old one.
  return store_->Checkpoint(root_, {.keep_last = 0}).status();
}

uint64_t RowMemoryBytes(int dim) {
  return ((uint64_t{4} * dim + 7) & ~uint64_t{7}) + 64;
}

}  // namespace psdb::bench
