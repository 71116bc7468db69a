// Joining a psdb cluster through ps-scheduler, from the client side.
//
// ClusterWorker is the one way a worker joins: it registers with the
// scheduler as a worker (its node id, and PS_SERVER_NUM / PS_WORKER_NUM when
// given, which the scheduler checks), beats, waits for the cluster map, and
// gives the trainer:
//  - its rank and world (the workers of the map) for data sharding,
//  - a ParameterClient routed by the map whose pushes carry this worker's
//    rank as worker_id (RemoteOptions::worker_id); in sync mode every
//    push goes to every server (RemoteOptions::push_to_every_server)
//    so ps-servers started with --sync_mode=sync aggregate each
//    (table, step) over all workers,
//  - AfterStep: StepClock(step, 0) in sync mode (BSP: a pull of step s+1
//    sees all of step s), StepClock(step, staleness) in async mode when
//    staleness >= 0 (SSP), nothing otherwise,
//  - Checkpoint: every rank meets at a barrier (after its pushes and cache
//    flush), then rank 0 writes one cluster checkpoint
//    (rpc/control/cluster_checkpoint.h) under the checkpoint directory;
//    other ranks return "". Requires the checkpoint directory to be one
//    directory the servers and rank 0 see (one machine or a shared
//    filesystem).
// One SchedulerClient serves all of it: registration, heartbeats, the map
// watch the client refreshes from (a refresh takes the watched map when it
// is newer than the client's, else fetches one), barriers and the step
// clock. The scheduler may be a list of schedulers sharing etcd
// ("h1:p1,h2:p2"): each call fails over to the next on UNAVAILABLE
// (rpc/control/scheduler_client.h). Heartbeats go on
// for as long as the worker or the client it handed out (ReleaseClient)
// lives.
//
// In sync mode every worker must run the same number of steps (equal data
// shards, or --max_steps): the servers apply a step only when every worker
// pushed it.
//
// OpenSchedulerRemoteClient is the other way to use a scheduler's cluster:
// a client that only follows the map (tools, tests, serving readers); it
// registers nothing.
//
// Thread-safety: AfterStep, Checkpoint and the client are thread-safe.
#ifndef PSDB_RPC_CLIENT_CLUSTER_WORKER_H_
#define PSDB_RPC_CLIENT_CLUSTER_WORKER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "psdb/parameter_client.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/scheduler_client.h"

namespace psdb::rpc {

struct ClusterWorkerOptions {
  // "host:port" of ps-scheduler, or several: "h1:p1,h2:p2". REQUIRED.
  std::string scheduler;
  // This worker's node id ([A-Za-z0-9_.:-]{1,128}); a node id that comes
  // back after being marked dead takes its rank back. REQUIRED.
  std::string node_id;
  // The worker's own PS_SERVER_NUM / PS_WORKER_NUM, if it has them; the
  // scheduler refuses values that differ from its own. Default: unset
  std::optional<int> server_num;
  std::optional<int> worker_num;
  // Sync (BSP) pushes and step clock. Default: true
  bool sync = true;
  // SSP staleness in async mode; < 0 = no step clock. Default: -1
  int staleness = -1;
  // How long to wait for the scheduler and the cluster to form, and for a
  // step clock or checkpoint barrier (each plus remote.call_timeout).
  // Default: 5 min, 10 min
  absl::Duration wait_ready = absl::Minutes(5);
  absl::Duration step_timeout = absl::Minutes(10);
  // Deadlines, retries and TLS of the client; its call_timeout and TLS also
  // serve the scheduler calls (a map refresh takes at most one
  // call_timeout). Its cluster, map_source, push_to_every_server and
  // worker_id are set by Join. Default: RemoteOptions's defaults
  RemoteOptions remote;
};

class ClusterWorker {
 public:
  static absl::StatusOr<std::unique_ptr<ClusterWorker>> Join(
      const ClusterWorkerOptions& options);
  ~ClusterWorker();
  ClusterWorker(const ClusterWorker&) = delete;
  ClusterWorker& operator=(const ClusterWorker&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  // Lives as long as this object (until ReleaseClient).
  ParameterClient* client() const { return client_.get(); }
  // Hands the client over; it keeps the heartbeats going for as long as it
  // lives. client() is null afterwards.
  std::unique_ptr<RemoteClient> ReleaseClient() { return std::move(client_); }

  // The worker's registered scheduler client (e.g. for a collective's
  // rendezvous, collective/group.h); lives as long as this object.
  SchedulerClient* scheduler() const { return sched_.get(); }

  absl::Status AfterStep(int64_t step);
  absl::StatusOr<std::string> Checkpoint(absl::string_view root, int64_t step);

 private:
  ClusterWorker() = default;
  ClusterWorkerOptions options_;
  int rank_ = 0;
  int world_ = 1;
  std::shared_ptr<SchedulerClient> sched_;
  std::unique_ptr<RemoteClient> client_;
};

// A RemoteClient whose map comes from the scheduler at `scheduler_address`
// ("host:port" or "h1:p1,h2:p2"): waits up to `wait_ready` for the cluster
// to be ready and for every server of the map to accept connections, routes
// with the map, watches it, and on FAILED_PRECONDITION takes the watched
// map (or fetches one). `base` supplies deadlines, TLS (also used for the
// scheduler) and limits. Registers nothing.
absl::StatusOr<std::unique_ptr<RemoteClient>> OpenSchedulerRemoteClient(
    absl::string_view scheduler_address, const RemoteOptions& base = {},
    absl::Duration wait_ready = absl::Minutes(5));

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CLIENT_CLUSTER_WORKER_H_
