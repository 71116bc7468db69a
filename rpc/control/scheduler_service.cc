#include "rpc/control/scheduler_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/etcd_scheduler.h"
#include "rpc/control/migration_coordinator.h"
#include "rpc/control/node_config.h"
#include "rpc/wire/convert.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

// now + ms, but no later than the call's own deadline.
absl::Time Deadline(grpc::ServerContext* ctx, int64_t ms) {
  const absl::Time wanted = absl::Now() + absl::Milliseconds(ms);
  if (ctx->deadline() == std::chrono::system_clock::time_point::max()) {
    return wanted;
  }
  return std::min(wanted, absl::FromChrono(ctx->deadline()));
}

}  // namespace

SchedulerServiceImpl::SchedulerServiceImpl(const SchedulerOptions& options,
                                           SchedulerBackend* backend,
                                           EtcdScheduler* etcd)
    : options_(options), backend_(backend), etcd_(etcd) {}

grpc::Status SchedulerServiceImpl::Register(grpc::ServerContext*,
                                            const v1::RegisterRequest* req,
                                            v1::RegisterResponse* resp) {
  auto r = backend_->Register(*req, absl::Now());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::Heartbeat(grpc::ServerContext*,
                                             const v1::HeartbeatRequest* req,
                                             v1::HeartbeatResponse* resp) {
  auto r = backend_->Heartbeat(req->node_id(), absl::Now());
  if (!r.ok()) return ToGrpcStatus(r.status());
  resp->set_map_version(*r);
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::GetClusterMap(
    grpc::ServerContext* ctx, const v1::GetClusterMapRequest* req,
    v1::GetClusterMapResponse* resp) {
  absl::StatusOr<v1::ClusterMap> r =
      req->wait_ready_ms() <= 0
          ? backend_->CurrentMap()
          : backend_->WaitReady(Deadline(ctx, req->wait_ready_ms()));
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_map() = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::Barrier(grpc::ServerContext* ctx,
                                           const v1::BarrierRequest* req,
                                           v1::BarrierResponse*) {
  const int64_t ms = req->timeout_ms() > 0 ? req->timeout_ms() : 60000;
  return ToGrpcStatus(backend_->Barrier(req->name(), req->node_id(),
                                        req->sequence(), Deadline(ctx, ms)));
}

grpc::Status SchedulerServiceImpl::StepClock(grpc::ServerContext* ctx,
                                             const v1::StepClockRequest* req,
                                             v1::StepClockResponse* resp) {
  const int64_t ms = req->timeout_ms() > 0 ? req->timeout_ms() : 60000;
  auto r = backend_->StepClock(req->node_id(), req->finished_step(),
                               req->staleness(), Deadline(ctx, ms));
  if (!r.ok()) return ToGrpcStatus(r.status());
  resp->set_slowest_finished_step(*r);
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::WatchClusterMap(
    grpc::ServerContext* ctx, const v1::WatchClusterMapRequest* req,
    grpc::ServerWriter<v1::ClusterMap>* writer) {
  uint64_t after = req->after_version();
  // Waits in slices so a cancelled call ends the stream (a shutdown ends
  // the wait at once). Each slice reads the map once (etcd: one range
  // read per stream every 5 s, and one per change).
  while (!ctx->IsCancelled()) {
    absl::StatusOr<v1::ClusterMap> map =
        backend_->WaitForMapAfter(after, Deadline(ctx, 5000));
    if (absl::IsDeadlineExceeded(map.status())) continue;
    if (!map.ok()) return ToGrpcStatus(map.status());
    after = map->version();
    if (!writer->Write(*map)) break;
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::GetStatus(
    grpc::ServerContext*, const v1::GetSchedulerStatusRequest*,
    v1::SchedulerStatus* resp) {
  *resp = backend_->Status();
  absl::MutexLock lock(&mu_);
  if (migration_ != nullptr) *resp->mutable_migration() = migration_->status();
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::AddServer(
    grpc::ServerContext*, const v1::AddServerRequest* req,
    v1::MembershipChangeResponse* resp) {
  return ToGrpcStatus(
      ChangeMembership({MembershipChange::Kind::kAdd, req->node_id()},
                       req->batch_rows(), req->max_rows_per_second(), resp));
}

grpc::Status SchedulerServiceImpl::DrainServer(
    grpc::ServerContext*, const v1::DrainServerRequest* req,
    v1::MembershipChangeResponse* resp) {
  return ToGrpcStatus(
      ChangeMembership({MembershipChange::Kind::kDrain, req->node_id()},
                       req->batch_rows(), req->max_rows_per_second(), resp));
}

absl::Status SchedulerServiceImpl::ChangeMembership(
    const MembershipChange& change, int32_t batch_rows,
    int64_t max_rows_per_second, v1::MembershipChangeResponse* resp) {
  const std::string verb =
      absl::StrCat(MembershipKindName(change.kind), "-server");
  PSDB_RETURN_IF_ERROR(ValidateNodeId(change.node_id));
  if (batch_rows < 0 || max_rows_per_second < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(verb, " node id:", change.node_id,
                     ": batch_rows and max_rows_per_second must be >= 0"));
  }
  std::shared_ptr<MigrationCoordinator> coordinator;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::UnavailableError("scheduler is shutting down");
    if (etcd_ != nullptr && !etcd_->leader()) {
      const v1::SchedulerStatus status = backend_->Status();
      return absl::FailedPreconditionError(absl::StrCat(
          "refused ", verb, " node id:", change.node_id,
          ": this scheduler is a standby; send it to the leader (",
          status.leader_address().empty() ? std::string("none yet")
                                          : status.leader_address(),
          ")"));
    }
    if (migrating_) {
      const v1::MigrationStatus running = migration_->status();
      return absl::FailedPreconditionError(absl::StrCat(
          "refused ", verb, " node id:", change.node_id, ": migration ",
          running.migration_id(), " (", running.kind(), "-server node id:",
          running.node_id(), ") is running: ", running.phase(), ", ",
          running.rows_moved(), "/", running.rows_to_move(), " rows moved"));
    }
    PSDB_ASSIGN_OR_RETURN(MembershipPlan plan,
                          backend_->PlanMembershipChange(change));
    MigrationOptions mo;
    mo.batch_rows = batch_rows;
    mo.max_rows_per_second = max_rows_per_second;
    mo.tls = options_.server_tls;
    const SchedulerOptions* o = &options_;
    mo.log = [o](absl::string_view line) {
      scheduler_internal::LogLine(*o, line);
    };
    coordinator =
        std::make_shared<MigrationCoordinator>(mo, change, std::move(plan));
    migration_ = coordinator;
    migrating_ = true;
  }
  const uint64_t from = coordinator->status().from_epoch();
  absl::StatusOr<v1::MigrationStatus> result = coordinator->Run(
      [&] { return backend_->PublishMembershipChange(change, from); });
  {
    absl::MutexLock lock(&mu_);
    migrating_ = false;
  }
  *resp->mutable_migration() = coordinator->status();
  return result.status();
}

grpc::Status SchedulerServiceImpl::RendezvousSet(
    grpc::ServerContext*, const v1::RendezvousSetRequest* req,
    v1::RendezvousSetResponse*) {
  return ToGrpcStatus(backend_->RendezvousSet(req->key(), req->value()));
}

grpc::Status SchedulerServiceImpl::RendezvousGet(
    grpc::ServerContext* ctx, const v1::RendezvousGetRequest* req,
    v1::RendezvousGetResponse* resp) {
  const int64_t ms = req->timeout_ms() > 0 ? req->timeout_ms() : 60000;
  const std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  auto r = backend_->RendezvousGet(keys, Deadline(ctx, ms));
  if (!r.ok()) return ToGrpcStatus(r.status());
  for (std::string& value : *r) resp->add_values(std::move(value));
  return grpc::Status::OK;
}

void SchedulerServiceImpl::Close() {
  absl::MutexLock lock(&mu_);
  closing_ = true;
  if (migrating_) migration_->Cancel();
}

}  // namespace psdb::rpc
