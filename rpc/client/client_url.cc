#include "psdb/client_url.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "psdb/local_client.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/node_config.h"
#include "shard/cluster_map.h"
#include "util/status_macros.h"

namespace psdb::rpc {

absl::StatusOr<std::unique_ptr<ParameterClient>> OpenParameterClient(
    absl::string_view url, const RemoteOptions& remote,
    const StoreOptions& local) {
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "local:")) {
    if (rest.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("URL '", url, "' names no directory"));
    }
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<LocalClient> client,
                          LocalClient::Open(rest, local));
    return std::unique_ptr<ParameterClient>(std::move(client));
  }
  if (absl::ConsumePrefix(&rest, "servers:")) {
    RemoteClientOptions options{remote};
    PSDB_ASSIGN_OR_RETURN(options.cluster, ClusterMap::FromServerList(rest));
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<RemoteClient> client,
                          RemoteClient::Open(options));
    return std::unique_ptr<ParameterClient>(std::move(client));
  }
  if (absl::ConsumePrefix(&rest, "scheduler:")) {
    if (rest.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("URL '", url, "' names no scheduler host:port"));
    }
    // Every scheduler of a list must be host:port (the one parser).
    if (absl::Status list = ParseServerList(rest).status(); !list.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("URL '", url, "': ", list.message()));
    }
    // A process started as a worker (PS_ROLE=worker) joins the cluster as
    // PS_NODE_ID; any other process only reads the map.
    const absl::StatusOr<NodeConfig> config =
        ResolveNodeConfig(ReadPsEnvironment(), {}, std::nullopt);
    if (config.ok() && config->role == NodeRoleKind::kWorker) {
      ClusterWorkerOptions options;
      options.scheduler = std::string(rest);
      options.node_id = config->node_id;
      options.server_num = config->server_num;
      options.worker_num = config->worker_num;
      // Pushes as the caller configured them; no step clock is used here.
      options.sync = remote.push_to_every_server;
      options.remote = remote;
      PSDB_ASSIGN_OR_RETURN(std::unique_ptr<ClusterWorker> worker,
                            ClusterWorker::Join(options));
      return std::unique_ptr<ParameterClient>(worker->ReleaseClient());
    }
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<RemoteClient> client,
                          OpenSchedulerRemoteClient(rest, remote));
    return std::unique_ptr<ParameterClient>(std::move(client));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "URL '", url,
      "': expected local:DIR, servers:host:port[|host:port],... or "
      "scheduler:host:port[,host:port]"));
}

}  // namespace psdb::rpc
