// ClusterWorker: what `ps-train --store scheduler:HOST:PORT` adds to the
// embedded trainer. It registers with ps-scheduler as a worker (PS_NODE_ID,
// or "ps-train-<pid>"), beats, waits for the cluster map, and gives the
// trainer:
//  - its rank and world (the workers of the map) for data sharding,
//  - a ParameterClient routed by the map whose pushes carry this worker's
//    rank as worker_id; in sync mode every push goes to every server
//    (RemoteClientOptions::push_to_every_server) so ps-servers started with
//    --sync_mode=sync aggregate each (table, step) over all workers,
//  - after_step: StepClock(step, 0) in sync mode (BSP: a pull of step s+1
//    sees all of step s), StepClock(step, staleness) in async mode when
//    staleness >= 0 (SSP), nothing otherwise,
//  - checkpoint_fn: every rank meets at a barrier (after its pushes and cache
//    flush), then rank 0 writes one cluster checkpoint
//    (rpc/cluster_checkpoint.h) under the checkpoint directory; other ranks
//    return "". Requires the checkpoint directory to be one directory the
//    servers and rank 0 see (one machine or a shared filesystem).
//
// In sync mode every worker must run the same number of steps (equal data
// shards, or --max_steps): the servers apply a step only when every worker
// pushed it.
//
// Thread-safety: the hooks and the client are thread-safe.
#ifndef PSDB_TOOLS_TRAIN_CLUSTER_WORKER_H_
#define PSDB_TOOLS_TRAIN_CLUSTER_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/scheduler_client.h"
#include "store/parameter_client.h"

namespace psdb::train {

struct ClusterWorkerOptions {
  // "host:port" of ps-scheduler. REQUIRED.
  std::string scheduler;
  // Sync (BSP) pushes and step clock. Default: true
  bool sync = true;
  // SSP staleness in async mode; < 0 = no step clock. Default: -1
  int staleness = -1;
  // How long to wait for the cluster to form, and for a step clock or
  // checkpoint barrier. Default: 5 min, 10 min
  absl::Duration wait_ready = absl::Minutes(5);
  absl::Duration step_timeout = absl::Minutes(10);
};

class ClusterWorker {
 public:
  static absl::StatusOr<std::unique_ptr<ClusterWorker>> Join(
      const ClusterWorkerOptions& options);
  ~ClusterWorker();

  int rank() const { return rank_; }
  int world() const { return world_; }
  // Lives as long as this object.
  ParameterClient* client() const { return client_.get(); }

  absl::Status AfterStep(int64_t step);
  absl::StatusOr<std::string> Checkpoint(absl::string_view root, int64_t step);

 private:
  ClusterWorker() = default;
  ClusterWorkerOptions options_;
  int rank_ = 0;
  int world_ = 1;
  std::unique_ptr<rpc::SchedulerClient> sched_;
  std::unique_ptr<ParameterClient> client_;
};

}  // namespace psdb::train

#endif  // PSDB_TOOLS_TRAIN_CLUSTER_WORKER_H_
