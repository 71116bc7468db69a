// AdminCheckpoint: the logic of `ps-server checkpoint`, the operator's way to
// take a cluster checkpoint (issue 4) without a worker. It finds the cluster
// (the scheduler's map, or a static server list) and calls
// WriteClusterCheckpoint (rpc/control/cluster_checkpoint.h): every server
// writes its shard of every table under one checkpoint id, the cluster manifest
// is written last, and a failure of any shard leaves no manifest (the error
// names the server).
//
//   AdminCheckpointOptions o;
//   o.scheduler_address = "10.0.0.9:7100";   // or o.servers = {...}
//   o.root = "/shared/ckpt";
//   PSDB_ASSIGN_OR_RETURN(ClusterCheckpointInfo info, AdminCheckpoint(o));
//
// Take it at a step boundary (no pushes in flight), e.g. between training
// runs or while workers wait at a barrier.
//
// Thread-safety: concurrent calls on the same root must be serialized by
// the caller (as WriteClusterCheckpoint).
#ifndef PSDB_RPC_CONTROL_ADMIN_CHECKPOINT_H_
#define PSDB_RPC_CONTROL_ADMIN_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/control/cluster_checkpoint.h"
#include "rpc/wire/tls.h"

namespace psdb::rpc {

struct AdminCheckpointOptions {
  // "host:port" of ps-scheduler; its map names the servers. Exactly one of
  // scheduler_address and servers must be given.
  std::string scheduler_address;
  // A static cluster's servers in rank order (ps-server --servers).
  std::vector<std::string> servers;
  // The static cluster's epoch (ps-server --cluster_epoch). Default: 1
  uint64_t cluster_epoch = 1;
  // Directory every server and this process see. REQUIRED.
  std::string root;
  // The trainer's step at the boundary; names the checkpoint id. Default: 0
  int64_t step = 0;
  // For the scheduler and the servers.
  ClientTlsOptions tls;
  // How long one shard may take. Default: 10 min
  absl::Duration timeout = absl::Minutes(10);
};

// InvalidArgument on contradictory or missing options; FailedPrecondition
// if the scheduler's cluster is not ready; otherwise as
// WriteClusterCheckpoint.
absl::StatusOr<ClusterCheckpointInfo> AdminCheckpoint(
    const AdminCheckpointOptions& options);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_ADMIN_CHECKPOINT_H_
