// ParameterClient: the one interface trainers, the worker cache and the tools
// talk to. LocalClient (psdb/local_client.h) serves it from an in-process
// Store; RemoteClient (rpc/) from ps-server processes over gRPC. Semantics
// (DESIGN.md, "Operations") are the same for every implementation:
//
//  - Pull: get-or-create. out[i*dim ..) receives keys[i]'s row; duplicate keys
//    are answered per position. With PullOptions::serving no row is created:
//    missing keys get the table's MissingRowValue.
//  - Push: grads[i*dim ..) is keys[i]'s gradient; duplicates are summed and
//    the optimizer runs once per unique key.
//  - PullRows / PutRows: whole rows with optimizer state and header; PutRows
//    assigns (no optimizer), creating rows as needed.
//  - Every call validates everything first; a bad request returns a Status
//    naming what was wrong and changes nothing.
//  - Versions: a serving replica (ps-server --serve_from) holds its last
//    few checkpoints, each a version (docs/serving.md). PullConsistent
//    reads several tables over every shard involved at one version and
//    says which; PullOptions::version reads a named one. Training servers
//    and embedded stores have no versions: their reads return an empty
//    ReadVersion, and naming a version is FailedPrecondition.
//
// Thread-safety: implementations are thread-safe; any number of threads may
// call any method at once.
#ifndef PSDB_PARAMETER_CLIENT_H_
#define PSDB_PARAMETER_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "psdb/row.h"
#include "psdb/table_spec.h"

namespace psdb {

struct PullOptions {
  // Read-only pull for inference: never creates rows, never counts sightings.
  // Default: false
  bool serving = false;
  // Serving replicas: the checkpoint id of the version to read (e.g. a
  // ReadVersion::checkpoint_id returned before); a shard that no longer
  // holds it answers NotFound naming it and the versions it holds. Empty:
  // each shard's newest (shards may then answer different versions while
  // replicas swap; PullConsistent reads one version and names it).
  // Default: "" (the newest)
  std::string version;
};

// The version rows were read from: a checkpoint a serving replica holds.
// Versions order by seq. Empty checkpoint_id: the rows came from a
// training server or an embedded store, which have no versions.
struct ReadVersion {
  std::string checkpoint_id;  // e.g. "ckpt-000000001200-000003"
  int64_t step = 0;           // the checkpoint's training step
  uint64_t seq = 0;           // its sequence number under the root
};

// One table's part of a PullConsistent: out[i*dim ..) receives keys[i]'s
// row, as Pull. The spans must stay valid for the call.
struct TableRead {
  std::string table;
  absl::Span<const uint64_t> keys;
  absl::Span<float> out;  // REQUIRES: keys.size() * the table's dim floats
};

struct ConsistentReadOptions {
  // As PullOptions::serving, for every read. Default: false
  bool serving = false;
  // Read this version (a checkpoint id) on every shard, as
  // PullOptions::version; NotFound when a shard does not hold it. Empty:
  // the newest version every shard involved holds (see PullConsistent).
  // Default: ""
  std::string version;
};

struct PushOptions {
  // The trainer's global step for this push (>= 1), used by Adam's bias
  // correction and TTL. 0 = the table's current step + 1. Default: 0
  int64_t step = 0;
  // Worker that sent the push (for synchronous aggregation). Default: 0
  int32_t worker_id = 0;
};

struct CheckpointOptions {
  // Checkpoints to keep under the root directory, newest first; older ones
  // are deleted after the new manifest is in place. 0 = keep all. Default: 3
  int keep_last = 3;
};

struct CheckpointInfo {
  // Directory of the checkpoint just written (contains MANIFEST.json).
  std::string path;
  int64_t step = 0;
  // Rows written to RocksDB by this checkpoint (dirty rows only).
  uint64_t rows_flushed = 0;
  // Rows dropped by TTL during this checkpoint.
  uint64_t rows_expired = 0;
  absl::Duration duration;
};

struct TableStats {
  std::string name;
  uint64_t memory_rows = 0;   // rows resident in the memory tier
  uint64_t memory_bytes = 0;  // bytes those rows use in the arena
  uint64_t disk_rows = 0;     // RocksDB's estimate of rows on disk
  uint64_t disk_bytes = 0;    // RocksDB's live SST size of the table
  uint64_t hits = 0;          // lookups served by the memory tier
  uint64_t misses = 0;        // lookups that went to RocksDB
  uint64_t created = 0;       // rows created by initialization
  uint64_t evictions = 0;     // rows evicted from memory
  // Of those, rows evicted by the background evictor (ahead of need).
  uint64_t background_evictions = 0;
  uint64_t dirty_writes = 0;  // evicted dirty rows written to RocksDB
  // Eviction writes the disk refused (no headroom, ENOSPC, EIO): their
  // dirty rows stayed in memory.
  uint64_t disk_write_errors = 0;
  // Row updates undone because they would have made the row's value or
  // optimizer state non-finite (table_spec.h, NonFinitePolicy).
  uint64_t non_finite_updates = 0;
  uint64_t not_admitted = 0;  // sightings of keys below the admission threshold
  int64_t step = 0;           // the table's current step
  // RocksDB wants to compact the table's column family.
  bool disk_compaction_pending = false;
};

struct StoreStats {
  std::vector<TableStats> tables;
  // StoreOptions::memory_budget_bytes, and what of it is in use now: the
  // memory tier's rows plus RocksDB's block cache (blocks and memtables).
  uint64_t memory_budget_bytes = 0;
  uint64_t memory_used_bytes = 0;
  // Bytes of the rows' share that they give up because RocksDB pins more
  // than its own (index and filter blocks of a table far larger than the
  // budget, memtables' charges; docs/operations/memory.md).
  uint64_t memory_yielded_bytes = 0;
  // RocksDB compactions running now (all tables).
  uint64_t disk_running_compactions = 0;
  // StoreOptions::disk_reserve_bytes (0: no reserve), and how much of it
  // the ballast holds now: less while it is missing, after a close or a
  // restart on a full disk gave its room back, until the disk has room for
  // it again (psdb/store.h, "Disk full and I/O errors").
  uint64_t disk_reserve_bytes = 0;
  uint64_t disk_reserve_held_bytes = 0;
  uint64_t checkpoints = 0;
  absl::Duration last_checkpoint_duration;
  absl::Duration total_checkpoint_duration;
};

// The stats of several stores as one (a cluster's servers, a replica's
// shards): per table (by name, ordered by name) counters and sizes summed,
// the step the maximum, compaction pending if any is; budgets, use, disk
// reserves and running compactions summed; checkpoint count and durations
// the maximum.
StoreStats MergeStoreStats(absl::Span<const StoreStats> parts);

class ParameterClient {
 public:
  virtual ~ParameterClient() = default;

  // OK if the table exists with an identical spec (idempotent, so every
  // worker may create the tables it uses); AlreadyExists if it exists with a
  // different spec.
  virtual absl::Status CreateTable(const TableSpec& spec) = 0;
  virtual absl::Status DropTable(absl::string_view name) = 0;
  virtual absl::StatusOr<std::vector<TableSpec>> ListTables() = 0;
  virtual absl::StatusOr<TableSpec> GetTable(absl::string_view name) = 0;

  // REQUIRES (else InvalidArgument): out.size() == keys.size() * dim.
  virtual absl::Status Pull(absl::string_view table,
                            absl::Span<const uint64_t> keys,
                            absl::Span<float> out,
                            const PullOptions& options) = 0;
  // Several tables' rows read at one version: every row of every read
  // comes from the same checkpoint, which is returned. RemoteClient sends
  // every shard involved one multi-table request (PullTables) per round;
  // when shards answer different versions it picks the newest version
  // every one of them holds and asks again only the shards that answered
  // another; it never returns a version older than one it returned before
  // (unless options.version names one), and fails with FailedPrecondition,
  // naming each shard's versions, when no version is common to the shards
  // before the call's deadline. Implementations without versions (an
  // embedded store, training servers) read each table as Pull does and
  // return an empty ReadVersion; a named version is FailedPrecondition
  // there. REQUIRES (else InvalidArgument): each out's size as Pull's.
  virtual absl::StatusOr<ReadVersion> PullConsistent(
      absl::Span<const TableRead> reads, const ConsistentReadOptions& options);

  // REQUIRES (else InvalidArgument): grads.size() == keys.size() * dim.
  virtual absl::Status Push(absl::string_view table,
                            absl::Span<const uint64_t> keys,
                            absl::Span<const float> grads,
                            const PushOptions& options) = 0;

  // Get-or-create of whole rows; *out is resized to keys.size() rows.
  virtual absl::Status PullRows(absl::string_view table,
                                absl::Span<const uint64_t> keys,
                                RowBatch* out) = 0;
  // REQUIRES (else InvalidArgument): rows.size() == keys.size(), rows.dim and
  // rows.state_size match the table, values finite. Duplicate keys: the last
  // one wins.
  virtual absl::Status PutRows(absl::string_view table,
                               absl::Span<const uint64_t> keys,
                               const RowBatch& rows) = 0;

  // Writes a checkpoint under `root_dir` (on the machine holding the data).
  virtual absl::StatusOr<CheckpointInfo> Checkpoint(
      absl::string_view root_dir, const CheckpointOptions& options) = 0;

  virtual absl::StatusOr<StoreStats> Stats() = 0;
};

}  // namespace psdb

#endif  // PSDB_PARAMETER_CLIENT_H_
