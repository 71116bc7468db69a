// The one conversion from the scheduler's wire map (psdb.v1.ClusterMap in
// rpc/wire/psdb.proto: every node of both roles, ranks, states, readiness)
// to the ClusterMap that clients route with and servers check ownership
// with (shard/cluster_map.h).
//
// Thread-safety: pure function.
#ifndef PSDB_RPC_WIRE_CLUSTER_MAP_PROTO_H_
#define PSDB_RPC_WIRE_CLUSTER_MAP_PROTO_H_

#include "absl/status/statusor.h"
#include "rpc/wire/psdb.pb.h"
#include "shard/cluster_map.h"

namespace psdb::rpc {

// The servers of a ready map: id = rank, its address and node id, weight 1,
// kAlive, kDead (a dead server keeps its keys) or kJoining (not on the
// ring), the map's epoch, default
// ring options. FailedPrecondition if the map is not ready; InvalidArgument
// if it holds an invalid server entry.
absl::StatusOr<ClusterMap> ClusterMapFromProto(const v1::ClusterMap& map);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_CLUSTER_MAP_PROTO_H_
