// RequestChecks: what a ps-server request must satisfy before the store
// sees it (server.h, "Validation"), apart from what the store checks
// itself: the cluster epoch it was routed with, its table name, its key
// count against the batch limit, the ownership of its keys, and a
// checkpoint root that stays inside its directory. A request that fails a
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

 private:
  // FAILED_PRECONDITION "<why>; server <shard id> has server epoch
  // <epoch>": a request routed with a stale map (the client refreshes its
  // map and sends it again; rpc/wire/psdb.proto).
  absl::Status WrongEpoch(absl::string_view why, uint64_t epoch) const;

  const int shard_id_;
  const size_t max_batch_keys_;
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
