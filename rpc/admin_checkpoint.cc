#include "rpc/admin_checkpoint.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rpc/scheduler_client.h"
#include "util/status_macros.h"

namespace psdb::rpc {

v1::ClusterMap StaticClusterMap(const std::vector<std::string>& servers,
                                uint64_t epoch) {
  v1::ClusterMap map;
  map.set_epoch(epoch);
  map.set_ready(true);
  map.set_server_num(static_cast<int32_t>(servers.size()));
  for (size_t r = 0; r < servers.size(); ++r) {
    v1::NodeEntry* entry = map.add_servers();
    entry->set_role(v1::NODE_ROLE_SERVER);
    entry->set_rank(static_cast<int32_t>(r));
    entry->set_address(servers[r]);
  }
  return map;
}

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
  v1::ClusterMap map;
  if (has_scheduler) {
    SchedulerClientOptions so;
    so.address = options.scheduler_address;
    so.tls = options.tls;
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerClient> sched,
                          SchedulerClient::Open(so));
    PSDB_ASSIGN_OR_RETURN(map, sched->GetClusterMap());
    if (!map.ready()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint: the cluster of scheduler ", options.scheduler_address,
          " is not ready (", map.servers_size(), " of ", map.server_num(),
          " servers registered)"));
    }
  } else {
    map = StaticClusterMap(options.servers, options.cluster_epoch);
  }
  return WriteClusterCheckpoint(map, options.root, options.step, options.tls,
                                options.timeout);
}

}  // namespace psdb::rpc
