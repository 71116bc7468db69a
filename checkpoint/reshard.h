// Resharding a checkpoint offline: rewrites a checkpoint of N shards (a
// cluster checkpoint, or an embedded one of one shard) as a cluster
// checkpoint of M shards, each key on the shard that server M would own in
// a cluster of M servers. What `ps-dump reshard` runs.
//
// The new checkpoint:
//  - ring (RingManifest): M servers with ids 0..M-1 (the ranks a cluster of
//    M servers gives them), weight 1, and the source ring's vnodes per
//    server and hash seed (the defaults, RingOptions{}, when the source is
//    an embedded checkpoint without a ring). This is the ring of
//    ClusterMap::FromAddresses(M addresses) and of ps-scheduler's map for M
//    servers with default ring options, so ps-server of rank r restored with
//    --restore_from=<out> loads shard-r and owns exactly its keys. Source
//    weights are not carried over (a server's weight belongs to a server,
//    and the new servers are other ones).
//  - shards: shard_id r, dir "shard-<r>", server "" (the rows were not
//    written by a server; readers take the shard by id).
//  - tables: the source's specs and steps; rows per shard counted while
//    writing. checkpoint_id, step, cluster_epoch: the source's (it is the
//    same state, cut differently); created_unix_micros: now.
//  - rows: every row's key and encoded value bytes copied unchanged
//    (values, optimizer state and header), written by ShardWriter
//    (store/shard_writer.h) in the store's own format.
// Keys are routed with the ring RingFromManifest builds from the new
// manifest's RingManifest: the code `ps-dump verify`'s ownership check uses.
//
// Streaming: each table is read once through a TableCursor (a merge of the
// source shards in key order); memory is M write batches of at most
// batch_rows rows plus RocksDB's write buffers, not the table.
//
// Crash safety: everything is written under "<out>.reshard-tmp" (removed
// first if a previous run left it) and renamed to `out` only once every
// shard and MANIFEST.json (written last, manifest/manifest.h) are complete; on
// any error the temp directory is removed. `out` becomes the checkpoint
// directory itself (it holds MANIFEST.json).
//
// Thread-safety: one call per `out` at a time.
#ifndef PSDB_CHECKPOINT_RESHARD_H_
#define PSDB_CHECKPOINT_RESHARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "psdb/checkpoint_reader.h"

namespace psdb::ckpt {

struct ReshardOptions {
  // Shards (servers) of the new checkpoint. REQUIRES: >= 1. Default: 1
  int servers = 1;
  // The new checkpoint directory. REQUIRED; must not exist or be empty.
  // Default: ""
  std::string out;
  // Rows per RocksDB write batch of each destination shard. REQUIRES: >= 1.
  // Default: 65536
  size_t batch_rows = 65536;
  // The file system the new checkpoint is written through. Default:
  // nullptr, the local file system
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

struct ReshardResult {
  // The new checkpoint directory (= options.out).
  std::string path;
  // Rows per destination shard, over all tables, indexed by shard id.
  std::vector<uint64_t> shard_rows;
  uint64_t rows = 0;
};

// Verifies the source (ckpt::Verify) and rewrites it per the header.
// InvalidArgument on servers < 1, batch_rows < 1 or an empty out;
// AlreadyExists if `out` exists and is not an empty directory;
// FailedPrecondition naming the first verify errors if the source does not
// verify; any read or write error. Nothing is left at `out` on error.
absl::StatusOr<ReshardResult> Reshard(const CheckpointReader& source,
                                      const ReshardOptions& options);

}  // namespace psdb::ckpt

#endif  // PSDB_CHECKPOINT_RESHARD_H_
