// ServingSnapshot: one checkpoint as a serving replica's requests see it
// (rpc/server/checkpoint_follower.h makes them): the shard(s) served, each
// a base store plus the rows of the files added since (delta_rows.h).
//
// Thread-safety: immutable once the follower hands it out, but for the
// stores' own thread-safe state; any thread may read it.
#ifndef PSDB_RPC_SERVER_SERVING_SNAPSHOT_H_
#define PSDB_RPC_SERVER_SERVING_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "checkpoint/file_verify.h"
#include "psdb/store.h"
#include "rpc/server/delta_rows.h"
#include "shard/ring.h"

namespace psdb::rpc {

// One opened checkpoint, as requests see it: the shard(s) a replica serves.
// Immutable but for the stores' own (thread-safe) state.
struct ServingSnapshot {
  std::string checkpoint_id;  // e.g. "ckpt-000000001200-000003"
  std::string dir;            // <root>/<checkpoint_id>
  uint64_t seq = 0;
  int64_t step = 0;    // the manifest's step
  absl::Time created;  // the manifest's creation time
  // The shards served, ascending (one, or every shard of the checkpoint),
  // and for each, index for index: its base store (Store::OpenCheckpoint of
  // this or an earlier checkpoint, shared by the snapshots laid over it)
  // and the rows of the files added since (null: none).
  std::vector<int> shard_ids;
  std::vector<std::shared_ptr<Store>> stores;
  std::vector<std::shared_ptr<const DeltaRows>> deltas;
  // The ring the checkpoint was written under when it has several shards
  // (a cluster checkpoint): keys are routed to the shard it names.
  std::optional<Ring> ring;

  // Whether this snapshot holds the shard `ring` places `key` on.
  bool Holds(uint64_t key) const;
  // Serving reads (psdb/store.h) over the held shards, each key answered
  // by its shard: the newest added file holding it, else the base store.
  // REQUIRES: Holds(key) for every key.
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out) const;
  absl::Status PullRows(absl::string_view table,
                        absl::Span<const uint64_t> keys, RowBatch* out) const;
  // Specs are the same in every shard.
  absl::StatusOr<TableSpec> GetTable(absl::string_view table) const {
    return stores.front()->GetTable(table);
  }
  std::vector<TableSpec> ListTables() const {
    return stores.front()->ListTables();
  }
  // Every held shard's stats merged (MergeStoreStats), with this
  // checkpoint's table steps and the added rows counted as memory.
  StoreStats Stats() const;

  // What the follower lays the next checkpoint over, per shard
  // (checkpoint_follower.h).
  struct Base {
    std::string checkpoint_id;  // the checkpoint the store was opened on
    // This checkpoint's table SST files of the shard, every one accounted
    // for: in the base store, read into the delta, or holding only rows
    // those hold (a compaction's output).
    absl::flat_hash_set<ckpt::FileId> files;
    // The largest sequence number of the rows the store and the delta hold
    // (nullopt: a file's sequence numbers are not listed).
    std::optional<uint64_t> seen_max;
  };
  std::vector<Base> bases;  // index for index with stores
  // The manifest's table specs and ring, serialized: a checkpoint is laid
  // over a base only when both are unchanged.
  std::string specs_key;
  std::string ring_key;
  // The manifest's table steps (the base store's may be older).
  absl::flat_hash_map<std::string, int64_t> table_steps;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_SERVING_SNAPSHOT_H_
