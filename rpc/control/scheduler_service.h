// SchedulerServiceImpl: the gRPC face of a SchedulerBackend (scheduler.h):
// psdb.v1.SchedulerService's calls mapped onto the backend, absl::Status to
// grpc::Status, waits bounded by the call's own deadline; and the one
// migration at a time that AddServer / DrainServer run on the calling
// thread (migration_coordinator.h). SchedulerServer (scheduler_server.cc)
// owns it, the backend and the gRPC server; the rules the calls keep are in
// scheduler.h's header.
//
// Internal to rpc/control.
//
// Thread-safety: thread-safe; every call may run on its own gRPC thread.
// Barrier, StepClock, GetClusterMap with wait_ready_ms, RendezvousGet and
// WatchClusterMap block their caller; AddServer / DrainServer run the whole
// migration on their caller's thread.
#ifndef PSDB_RPC_CONTROL_SCHEDULER_SERVICE_H_
#define PSDB_RPC_CONTROL_SCHEDULER_SERVICE_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/psdb.grpc.pb.h"

namespace psdb::rpc {

class EtcdScheduler;
class MigrationCoordinator;

class SchedulerServiceImpl final : public v1::SchedulerService::Service {
 public:
  // REQUIRES: `backend` outlives this; `etcd` is `backend` when it is an
  // EtcdScheduler (only its leader runs migrations), else null.
  SchedulerServiceImpl(const SchedulerOptions& options,
                       SchedulerBackend* backend, EtcdScheduler* etcd);
  SchedulerServiceImpl(const SchedulerServiceImpl&) = delete;
  SchedulerServiceImpl& operator=(const SchedulerServiceImpl&) = delete;

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  grpc::Status GetClusterMap(grpc::ServerContext* ctx,
                             const v1::GetClusterMapRequest* req,
                             v1::GetClusterMapResponse* resp) override;
  grpc::Status Barrier(grpc::ServerContext* ctx, const v1::BarrierRequest* req,
                       v1::BarrierResponse*) override;
  grpc::Status StepClock(grpc::ServerContext* ctx,
                         const v1::StepClockRequest* req,
                         v1::StepClockResponse* resp) override;
  grpc::Status WatchClusterMap(
      grpc::ServerContext* ctx, const v1::WatchClusterMapRequest* req,
      grpc::ServerWriter<v1::ClusterMap>* writer) override;
  grpc::Status GetStatus(grpc::ServerContext*,
                         const v1::GetSchedulerStatusRequest*,
                         v1::SchedulerStatus* resp) override;
  grpc::Status AddServer(grpc::ServerContext*, const v1::AddServerRequest* req,
                         v1::MembershipChangeResponse* resp) override;
  grpc::Status DrainServer(grpc::ServerContext*,
                           const v1::DrainServerRequest* req,
                           v1::MembershipChangeResponse* resp) override;
  grpc::Status RendezvousSet(grpc::ServerContext*,
                             const v1::RendezvousSetRequest* req,
                             v1::RendezvousSetResponse*) override;
  grpc::Status RendezvousGet(grpc::ServerContext* ctx,
                             const v1::RendezvousGetRequest* req,
                             v1::RendezvousGetResponse* resp) override;

  // The first step of shutting down: later AddServer / DrainServer calls
  // are refused with UNAVAILABLE and a running migration is cancelled (it
  // aborts unless its map is published). Idempotent.
  void Close();

 private:
  // AddServer and DrainServer: one migration at a time, validated by
  // PlanMembershipChange, committed by PublishMembershipChange.
  absl::Status ChangeMembership(const MembershipChange& change,
                                int32_t batch_rows, int64_t max_rows_per_second,
                                v1::MembershipChangeResponse* resp);

  const SchedulerOptions options_;
  SchedulerBackend* const backend_;
  EtcdScheduler* const etcd_;
  absl::Mutex mu_;
  // The running or last migration; `migrating_` while one runs.
  std::shared_ptr<MigrationCoordinator> migration_ ABSL_GUARDED_BY(mu_);
  bool migrating_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_SCHEDULER_SERVICE_H_
