#include "rpc/control/scheduler_client.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/cluster_map_proto.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "util/status_macros.h"

namespace psdb::rpc {

class SchedulerClient::Impl {
 public:
  Impl(const SchedulerClientOptions& options,
       std::shared_ptr<grpc::Channel> channel)
      : options(options),
        stub(v1::SchedulerService::NewStub(std::move(channel))) {}

  void SetDeadline(grpc::ClientContext* ctx, absl::Duration d) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      absl::ToChronoMilliseconds(d));
  }

  absl::StatusOr<v1::RegisterResponse> DoRegister(
      const v1::RegisterRequest& req,
      absl::Duration wait = absl::ZeroDuration()) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, wait + options.call_timeout);
    // The scheduler may still be starting: wait for the channel.
    ctx.set_wait_for_ready(true);
    v1::RegisterResponse resp;
    PSDB_RETURN_IF_ERROR(FromGrpcStatus(stub->Register(&ctx, req, &resp)));
    absl::MutexLock lock(&mu);
    registration = req;
    registered = true;
    interval = absl::Milliseconds(resp.heartbeat_interval_ms());
    version = resp.map().version();
    return resp;
  }

  absl::StatusOr<uint64_t> DoHeartbeat() {
    v1::HeartbeatRequest req;
    absl::Duration beat_interval;
    {
      absl::MutexLock lock(&mu);
      if (!registered) {
        return absl::FailedPreconditionError("heartbeat before Register");
      }
      req.set_node_id(registration.node_id());
      beat_interval = interval;
    }
    grpc::ClientContext ctx;
    SetDeadline(&ctx, std::max(beat_interval, absl::Milliseconds(100)));
    v1::HeartbeatResponse resp;
    PSDB_RETURN_IF_ERROR(FromGrpcStatus(stub->Heartbeat(&ctx, req, &resp)));
    absl::MutexLock lock(&mu);
    version = resp.map_version();
    return resp.map_version();
  }

  void BeatLoop() {
    absl::MutexLock lock(&mu);
    while (!stopping) {
      mu.AwaitWithTimeout(absl::Condition(&stopping), interval);
      if (stopping) break;
      mu.Unlock();
      absl::StatusOr<uint64_t> beat = DoHeartbeat();
      if (absl::IsFailedPrecondition(beat.status()) ||
          absl::IsNotFound(beat.status())) {
        // Marked dead (or the scheduler forgot us): take the rank back.
        v1::RegisterRequest again;
        {
          absl::MutexLock relock(&mu);
          again = registration;
        }
        absl::StatusOr<v1::RegisterResponse> r = DoRegister(again);
        if (r.ok()) {
          absl::MutexLock relock(&mu);
          ++reregistrations;
        } else {
          std::fprintf(stderr, "psdb: re-registration of node id:%s: %s\n",
                       again.node_id().c_str(), r.status().ToString().c_str());
        }
      }
      mu.Lock();
    }
  }

  const SchedulerClientOptions options;
  std::unique_ptr<v1::SchedulerService::Stub> stub;
  mutable absl::Mutex mu;
  v1::RegisterRequest registration ABSL_GUARDED_BY(mu);
  bool registered ABSL_GUARDED_BY(mu) = false;
  absl::Duration interval ABSL_GUARDED_BY(mu) = absl::Seconds(1);
  uint64_t version ABSL_GUARDED_BY(mu) = 0;
  int reregistrations ABSL_GUARDED_BY(mu) = 0;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::thread beater;  // touched by the controlling thread only
};

SchedulerClient::SchedulerClient(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
SchedulerClient::~SchedulerClient() { StopHeartbeats(); }

absl::StatusOr<std::unique_ptr<SchedulerClient>> SchedulerClient::Open(
    const SchedulerClientOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("scheduler address is required");
  }
  grpc::ChannelArguments args;
  // Reconnect to a restarted scheduler within a heartbeat or two (gRPC's
  // default backoff grows to 120 s).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                        MakeChannel(options.tls, options.address, args));
  return std::unique_ptr<SchedulerClient>(
      new SchedulerClient(std::make_unique<Impl>(options, channel)));
}

absl::StatusOr<v1::RegisterResponse> SchedulerClient::Register(
    const v1::RegisterRequest& req, absl::Duration wait) {
  return impl_->DoRegister(req, wait);
}

absl::StatusOr<uint64_t> SchedulerClient::Heartbeat() {
  return impl_->DoHeartbeat();
}

absl::StatusOr<v1::ClusterMap> SchedulerClient::GetClusterMap(
    absl::Duration wait) {
  // Idempotent: retried on UNAVAILABLE (e.g. "Socket closed" on the first
  // call after the scheduler restarted) until the deadline.
  const absl::Time deadline = absl::Now() + wait + impl_->options.call_timeout;
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    ctx.set_wait_for_ready(true);
    v1::GetClusterMapRequest req;
    req.set_wait_ready_ms(absl::ToInt64Milliseconds(wait));
    v1::GetClusterMapResponse resp;
    absl::Status s =
        FromGrpcStatus(impl_->stub->GetClusterMap(&ctx, req, &resp));
    if (s.ok()) return std::move(*resp.mutable_map());
    if (!absl::IsUnavailable(s) || absl::Now() + backoff >= deadline) {
      return s;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

absl::Status SchedulerClient::Barrier(absl::string_view name,
                                      absl::Duration timeout) {
  v1::BarrierRequest req;
  {
    absl::MutexLock lock(&impl_->mu);
    if (!impl_->registered) {
      return absl::FailedPreconditionError("Barrier before Register");
    }
    req.set_node_id(impl_->registration.node_id());
  }
  req.set_name(std::string(name));
  req.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  grpc::ClientContext ctx;
  impl_->SetDeadline(&ctx, timeout + impl_->options.call_timeout);
  v1::BarrierResponse resp;
  return FromGrpcStatus(impl_->stub->Barrier(&ctx, req, &resp));
}

absl::StatusOr<int64_t> SchedulerClient::StepClock(int64_t finished_step,
                                                   int staleness,
                                                   absl::Duration timeout) {
  v1::StepClockRequest req;
  {
    absl::MutexLock lock(&impl_->mu);
    if (!impl_->registered) {
      return absl::FailedPreconditionError("StepClock before Register");
    }
    req.set_node_id(impl_->registration.node_id());
  }
  req.set_finished_step(finished_step);
  req.set_staleness(staleness);
  req.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  grpc::ClientContext ctx;
  impl_->SetDeadline(&ctx, timeout + impl_->options.call_timeout);
  v1::StepClockResponse resp;
  PSDB_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->StepClock(&ctx, req, &resp)));
  return resp.slowest_finished_step();
}

void SchedulerClient::StartHeartbeats() {
  if (impl_->beater.joinable()) return;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = false;
  }
  Impl* raw = impl_.get();
  impl_->beater = std::thread([raw] { raw->BeatLoop(); });
}

void SchedulerClient::StopHeartbeats() {
  if (!impl_->beater.joinable()) return;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
  }
  impl_->beater.join();
}

uint64_t SchedulerClient::map_version() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->version;
}

int SchedulerClient::reregistrations() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->reregistrations;
}

absl::StatusOr<std::pair<std::unique_ptr<SchedulerClient>, ServerPlacement>>
JoinClusterAsServer(const NodeConfig& config, absl::string_view address,
                    const ClientTlsOptions& tls, absl::Duration wait_ready) {
  if (!config.has_scheduler()) {
    return absl::InvalidArgumentError("no scheduler configured");
  }
  SchedulerClientOptions options;
  options.address = config.SchedulerAddress();
  options.tls = tls;
  PSDB_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerClient> client,
                        SchedulerClient::Open(options));
  v1::RegisterRequest req;
  req.set_node_id(config.node_id);
  req.set_role(v1::NODE_ROLE_SERVER);
  req.set_address(std::string(address));
  if (config.server_num.has_value()) req.set_server_num(*config.server_num);
  if (config.worker_num.has_value()) req.set_worker_num(*config.worker_num);
  // A server restarted faster than the heartbeat timeout finds its old self
  // still alive: retry until the scheduler marks it dead (bounded).
  const absl::Time give_up = absl::Now() + wait_ready;
  absl::StatusOr<v1::RegisterResponse> reg = client->Register(req);
  while (absl::IsAlreadyExists(reg.status()) && absl::Now() < give_up) {
    std::fprintf(stderr, "ps-server: %s; retrying\n",
                 reg.status().ToString().c_str());
    absl::SleepFor(absl::Milliseconds(500));
    reg = client->Register(req);
  }
  PSDB_RETURN_IF_ERROR(reg.status());
  client->StartHeartbeats();
  PSDB_ASSIGN_OR_RETURN(v1::ClusterMap map, client->GetClusterMap(wait_ready));
  ServerPlacement placement;
  PSDB_ASSIGN_OR_RETURN(placement.cluster, ClusterMapFromProto(map));
  placement.rank = reg->rank();
  placement.worker_num = map.worker_num();
  placement.recovered = reg->recovered();
  return std::make_pair(std::move(client), std::move(placement));
}

}  // namespace psdb::rpc
