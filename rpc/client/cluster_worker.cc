#include "rpc/client/cluster_worker.h"

#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/cluster_checkpoint.h"
#include "rpc/control/node_config.h"
#include "rpc/wire/cluster_map_proto.h"
#include "rpc/wire/tls.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

// A scheduler client with the client's TLS and call deadline: a map refresh
// (on FAILED_PRECONDITION) takes at most one call_timeout, as other calls.
absl::StatusOr<std::shared_ptr<SchedulerClient>> OpenScheduler(
    absl::string_view address, const RemoteOptions& base) {
  if (address.empty()) {
    return absl::InvalidArgumentError(
        "no scheduler host:port (or h1:p1,h2:p2) given");
  }
  SchedulerClientOptions options;
  options.address = std::string(address);
  options.tls = base.tls;
  options.call_timeout = base.call_timeout;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerClient> sched,
                        SchedulerClient::Open(options));
  return std::shared_ptr<SchedulerClient>(std::move(sched));
}

// The client both ways of joining hand out: routed by `sched`'s map, which
// it refetches on FAILED_PRECONDITION; it owns a reference to `sched`.
absl::StatusOr<std::unique_ptr<RemoteClient>> OpenMapClient(
    std::shared_ptr<SchedulerClient> sched, const RemoteOptions& remote,
    absl::Duration wait_ready) {
  RemoteClientOptions options{remote};
  const absl::Time deadline = absl::Now() + wait_ready;
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap wire, sched->GetClusterMap(wait_ready));
  PSDB_ASSIGN_OR_RETURN(options.cluster, ClusterMapFromProto(wire));
  // The map is ready once every server has registered; a server starts
  // serving just after. Wait (within wait_ready) until each one accepts a
  // connection, so the first call does not race its startup.
  for (const ServerInfo& server : options.cluster.servers()) {
    grpc::ChannelArguments args;
    // Retry a server that is not listening yet within 100 ms (gRPC's
    // initial backoff is 1 s: that second was most of a cluster's
    // formation, docs/benchmarks/control.md).
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(options.tls, server.address, args));
    if (!channel->WaitForConnected(absl::ToChronoTime(deadline))) {
      return absl::UnavailableError(
          absl::StrCat("server ", server.address,
                       " of the scheduler's map accepts no connection after ",
                       absl::FormatDuration(wait_ready)));
    }
  }
  // A refresh takes the watched map when it is newer than the one this
  // client last took, and fetches otherwise (the watch may lag, or be
  // down while its stream reopens).
  sched->StartMapWatch();
  auto taken = std::make_shared<std::atomic<uint64_t>>(wire.version());
  options.map_source = [sched, taken]() -> absl::StatusOr<ClusterMap> {
    std::optional<v1::ClusterMap> watched = sched->latest_map();
    if (watched.has_value() && watched->ready() &&
        watched->version() > taken->load()) {
      taken->store(watched->version());
      return ClusterMapFromProto(*watched);
    }
    PSDB_ASSIGN_OR_RETURN(v1::ClusterMap m, sched->GetClusterMap());
    taken->store(m.version());
    return ClusterMapFromProto(m);
  };
  return RemoteClient::Open(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterWorker>> ClusterWorker::Join(
    const ClusterWorkerOptions& options) {
  PSDB_RETURN_IF_ERROR(ValidateNodeId(options.node_id));
  std::unique_ptr<ClusterWorker> w(new ClusterWorker());
  w->options_ = options;
  PSDB_ASSIGN_OR_RETURN(w->sched_,
                        OpenScheduler(options.scheduler, options.remote));
  v1::RegisterRequest req;
  req.set_node_id(options.node_id);
  req.set_role(v1::NODE_ROLE_WORKER);
  if (options.server_num.has_value()) req.set_server_num(*options.server_num);
  if (options.worker_num.has_value()) req.set_worker_num(*options.worker_num);
  PSDB_ASSIGN_OR_RETURN(v1::RegisterResponse reg,
                        w->sched_->Register(req, options.wait_ready));
  w->rank_ = reg.rank();
  w->sched_->StartHeartbeats();
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap map,
                        w->sched_->GetClusterMap(options.wait_ready));
  w->world_ = map.worker_num();
  if (w->world_ < 1 || w->rank_ < 0 || w->rank_ >= w->world_) {
    return absl::FailedPreconditionError(absl::StrCat("worker rank ", w->rank_,
                                                      " outside the cluster's ",
                                                      w->world_, " workers"));
  }
  RemoteOptions remote = options.remote;
  remote.push_to_every_server = options.sync;
  remote.worker_id = w->rank_;
  PSDB_ASSIGN_OR_RETURN(w->client_,
                        OpenMapClient(w->sched_, remote, options.wait_ready));
  return w;
}

// The scheduler client stops beating when its last owner (this worker or
// the client it handed out) goes.
ClusterWorker::~ClusterWorker() = default;

absl::Status ClusterWorker::AfterStep(int64_t step) {
  int staleness = options_.sync ? 0 : options_.staleness;
  if (staleness < 0) return absl::OkStatus();
  return sched_->StepClock(step, staleness, options_.step_timeout).status();
}

absl::StatusOr<std::string> ClusterWorker::Checkpoint(absl::string_view root,
                                                      int64_t step) {
  // Every rank's pushes and cache write-backs are in before rank 0 asks
  // the servers for their shards.
  PSDB_RETURN_IF_ERROR(sched_->Barrier(absl::StrCat("checkpoint-", step),
                                       options_.step_timeout));
  if (rank_ != 0) return std::string();
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap wire, sched_->GetClusterMap());
  PSDB_ASSIGN_OR_RETURN(ClusterMap map, ClusterMapFromProto(wire));
  PSDB_ASSIGN_OR_RETURN(
      ClusterCheckpointInfo info,
      WriteClusterCheckpoint(map, root, step, options_.remote.tls));
  return info.path;
}

absl::StatusOr<std::unique_ptr<RemoteClient>> OpenSchedulerRemoteClient(
    absl::string_view scheduler_address, const RemoteOptions& base,
    absl::Duration wait_ready) {
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<SchedulerClient> sched,
                        OpenScheduler(scheduler_address, base));
  return OpenMapClient(std::move(sched), base, wait_ready);
}

}  // namespace psdb::rpc
