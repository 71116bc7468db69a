#include "rpc/control/admin_checkpoint.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "util/status_macros.h"

namespace psdb::rpc {

absl::StatusOr<ClusterCheckpointInfo> AdminCheckpoint(
    const AdminCheckpointOptions& options) {
  if (options.root.empty()) {
    return absl::InvalidArgumentError("checkpoint: --root is required");
  }
  if (options.step < 0) {
    return absl::InvalidArgumentError("checkpoint: --step must be >= 0");
  }
  const bool has_scheduler = !options.scheduler_address.empty();
  if (has_scheduler == !options.servers.empty()) {
    return absl::InvalidArgumentError(
        "checkpoint: give the scheduler (PS_SCHED_HOST/PS_SCHED_PORT or "
        "--sched_host/--sched_port) or --servers, exactly one");
  }
  ClusterMap map;
  if (has_scheduler) {
    SchedulerClientOptions so;
    so.address = options.scheduler_address;
    so.tls = options.tls;
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerClient> sched,
                          SchedulerClient::Open(so));
    PSDB_ASSIGN_OR_RETURN(v1::ClusterMap wire, sched->GetClusterMap());
    absl::StatusOr<ClusterMap> ready = ClusterMapFromProto(wire);
    if (!ready.ok()) {
      return Annotate(ready.status(),
                      absl::StrCat("checkpoint: the cluster of scheduler ",
                                   options.scheduler_address));
    }
    map = *std::move(ready);
  } else {
    PSDB_ASSIGN_OR_RETURN(
        map, ClusterMap::FromAddresses(options.servers, options.cluster_epoch));
  }
  return WriteClusterCheckpoint(map, options.root, options.step, options.tls,
                                options.timeout);
}

}  // namespace psdb::rpc
