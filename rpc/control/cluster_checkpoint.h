// WriteClusterCheckpoint: one checkpoint of a whole cluster, under one
// checkpoint id, with one cluster manifest written last.
//
//   <root>/ckpt-<step>-<seq>/shard-<rank>/   each server's RocksDB checkpoint
//   <root>/ckpt-<step>-<seq>/MANIFEST.json   ring, epoch, shards (rank, dir,
//                                            server address), step, tables
//                                            with their rows per shard
//
// Every server of the map writes its shard in parallel (the Checkpoint RPC
// with shard_dir); only when all have succeeded does the caller write the
// manifest (manifest/manifest.h: atomic rename). If any shard fails, the
// checkpoint directory is removed and the error names the server: a failed
// cluster checkpoint leaves no manifest, so it does not exist for readers
// (ps-dump, restore). `root` must be one directory every server and the
// caller see (the same machine, or a shared filesystem).
//
// Call it at a step boundary (in sync training: after every worker's
// StepClock(s, 0) / Barrier for step s), so every shard holds exactly steps
// 1..s. seq is one more than the highest seq under `root`.
//
// Thread-safety: concurrent calls on the same root must be serialized by
// the caller.
#ifndef PSDB_RPC_CONTROL_CLUSTER_CHECKPOINT_H_
#define PSDB_RPC_CONTROL_CLUSTER_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/wire/tls.h"
#include "shard/cluster_map.h"

namespace psdb::rpc {

struct ClusterCheckpointInfo {
  // <root>/<id>, holding MANIFEST.json.
  std::string path;
  std::string id;
  // Largest step any shard recorded.
  int64_t step = 0;
  // Rows over all tables and shards.
  uint64_t rows = 0;
};

// Every server of `map` writes the shard of its id. FailedPrecondition if
// the map has no servers. `step` names the checkpoint (its id) and is the
// trainer's step at the boundary.
absl::StatusOr<ClusterCheckpointInfo> WriteClusterCheckpoint(
    const ClusterMap& map, absl::string_view root, int64_t step,
    const ClientTlsOptions& tls = {},
    absl::Duration timeout = absl::Minutes(10));

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_CLUSTER_CHECKPOINT_H_
