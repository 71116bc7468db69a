// RequestChecks: what a ps-server request must satisfy before the store
// sees it (server.h, "Validation"), apart from what the store checks
// itself: the cluster epoch it was routed with, its table name, its key
// count against the batch limit, the ownership of its keys, a push's mode
// against the server's, and a checkpoint root that stays inside its
// directory. A request that fails a
// check is answered with the returned status and changes nothing.
// Internal to psdb_server.
//
// Thread-safety: immutable after construction; its checks may run from any
// number of threads.
#ifndef PSDB_RPC_SERVER_REQUEST_CHECKS_H_
#define PSDB_RPC_SERVER_REQUEST_CHECKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/server/server.h"
#include "rpc/wire/psdb.pb.h"
#include "shard/cluster_map.h"

namespace psdb::rpc::internal {

class RequestChecks {
 public:
  // The checks of a server started with `options`; `serving`: a read-only
  // replica (PsServer::StartServing).
  RequestChecks(const ServerOptions& options, bool serving);

  // A request routed with `client_epoch` (0 = unchecked) to a server whose
  // map is `map`. A serving replica takes part in no membership change:
  // always OK there.
  absl::Status CheckEpoch(const ClusterMap& map, uint64_t client_epoch) const;

  // A keyed request: its epoch, table name, key count (RESOURCE_EXHAUSTED
  // over max_batch_keys) and every key's owner, under `map` (a server with
  // no peers owns every key) or, for a serving replica, under `snapshot`'s
  // ring (the checkpoint it serves).
  // REQUIRES: `snapshot` is set exactly when the server is serving.
  absl::Status CheckKeys(const ClusterMap& map, const ServingSnapshot* snapshot,
                         uint64_t client_epoch, absl::string_view table,
                         absl::Span<const uint64_t> keys) const;

  // A push's mode (PushRequest.mode) against the server's own
  // (options.sync): FAILED_PRECONDITION when one is sync and the other
  // async, naming both modes and the flags that change either. Checked
  // before anything else sees the push, so a refused push changes nothing
  // (not even the resharding gate's record of a sync step).
  // PUSH_MODE_UNSPECIFIED (a client from before the field) passes, as
  // does any push to a serving replica (which refuses every write).
  //
  // Why on every push rather than once at join: the server applying a push
  // is the one that must agree, whatever map the client routes with and
  // whenever that server was (re)started; clients that never join
  // (servers: URLs, Python) are covered alike; and the scheduler, which a
  // joining worker asks, does not know the servers' modes.
  absl::Status CheckPushMode(v1::PushMode mode, absl::string_view table) const;

 private:
  // FAILED_PRECONDITION "<why>; server <shard id> has server epoch
  // <epoch>": a request routed with a stale map (the client refreshes its
  // map and sends it again; rpc/wire/psdb.proto).
  absl::Status WrongEpoch(absl::string_view why, uint64_t epoch) const;

  const int shard_id_;
  const size_t max_batch_keys_;
  const bool sync_;  // a sync (BSP) server: options.sync.num_workers > 0
  const bool serving_;
};

// A server with no peers owns every key (and writes its checkpoints
// straight under the root it is given).
bool Alone(const ClusterMap& map);

// A checkpoint root or shard directory, which comes from the network: not
// empty, and no ".." component.
absl::Status ValidateRootDir(absl::string_view root);

}  // namespace psdb::rpc::internal

#endif  // PSDB_RPC_SERVER_REQUEST_CHECKS_H_
