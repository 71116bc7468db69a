// SchedulerClient: a node's side of SchedulerService (rpc/control/scheduler.h):
// register, beat, fetch the cluster map, wait at barriers, and
// JoinClusterAsServer, what ps-server does with PS_SCHED_HOST/PORT. (A
// worker joins through rpc/client/cluster_worker.h, which uses this client.)
//
//   PSDB_ASSIGN_OR_RETURN(auto sched, SchedulerClient::Open({.address = a}));
//   PSDB_ASSIGN_OR_RETURN(auto reg, sched->Register(req));
//   sched->StartHeartbeats();
//   PSDB_RETURN_IF_ERROR(sched->Barrier("step-0", absl::Seconds(60)));
//
// Heartbeats run on a background thread every interval the scheduler gave at
// registration. When the scheduler answers that this node was marked dead
// (or does not know it, e.g. it restarted), the thread registers again with
// the same id, address and role, taking the rank back.
//
// Thread-safety: thread-safe.
#ifndef PSDB_RPC_CONTROL_SCHEDULER_CLIENT_H_
#define PSDB_RPC_CONTROL_SCHEDULER_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/control/node_config.h"
#include "rpc/wire/psdb.pb.h"
#include "rpc/wire/tls.h"
#include "shard/cluster_map.h"

namespace psdb::rpc {

struct SchedulerClientOptions {
  // "host:port" of ps-scheduler. REQUIRED.
  std::string address;
  // Deadline of one call (Register waits this long for the scheduler to come
  // up). Default: 30 s
  absl::Duration call_timeout = absl::Seconds(30);
  ClientTlsOptions tls;
};

class SchedulerClient {
 public:
  // Creates the channel (connects lazily).
  static absl::StatusOr<std::unique_ptr<SchedulerClient>> Open(
      const SchedulerClientOptions& options);
  ~SchedulerClient();  // Stops heartbeats.
  SchedulerClient(const SchedulerClient&) = delete;
  SchedulerClient& operator=(const SchedulerClient&) = delete;

  // Registers this node (waiting up to wait + call_timeout for the
  // scheduler to be reachable) and remembers the request for heartbeats and
  // re-registration.
  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& req,
      absl::Duration wait = absl::ZeroDuration());
  // The map now (wait = 0) or once ready, waiting up to `wait`.
  absl::StatusOr<v1::ClusterMap> GetClusterMap(
      absl::Duration wait = absl::ZeroDuration());
  // REQUIRES: Register succeeded (the barrier is joined as this node).
  absl::Status Barrier(absl::string_view name, absl::Duration timeout);
  // SSP: reports that this worker finished `finished_step` and waits until
  // every worker has finished finished_step - staleness; returns the
  // slowest worker's finished step. REQUIRES: Register succeeded.
  absl::StatusOr<int64_t> StepClock(int64_t finished_step, int staleness,
                                    absl::Duration timeout);
  // One beat now; returns the map version.
  absl::StatusOr<uint64_t> Heartbeat();

  // Background beats at the registered interval. REQUIRES: Register
  // succeeded. StopHeartbeats waits for the thread; both are idempotent.
  void StartHeartbeats();
  void StopHeartbeats();
  // Latest map version a beat or registration returned (0 before).
  uint64_t map_version() const;
  // Registrations after the first (re-joins after being marked dead).
  int reregistrations() const;

  class Impl;

 private:
  explicit SchedulerClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where a ps-server sits in the cluster.
struct ServerPlacement {
  int rank = 0;
  // The ready map (rpc/control/cluster_map_proto.h): every server, its
  // epoch.
  ClusterMap cluster;
  // The cluster's PS_WORKER_NUM (sync mode aggregates over them).
  int worker_num = 0;
  bool recovered = false;
};

// Registers a server at `address` with the scheduler of `config`, starts
// its heartbeats and waits up to `wait_ready` for the cluster to form.
// The returned client must live as long as the server (it beats).
absl::StatusOr<std::pair<std::unique_ptr<SchedulerClient>, ServerPlacement>>
JoinClusterAsServer(const NodeConfig& config, absl::string_view address,
                    const ClientTlsOptions& tls, absl::Duration wait_ready);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_SCHEDULER_CLIENT_H_
