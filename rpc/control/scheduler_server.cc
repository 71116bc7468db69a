// SchedulerServer (scheduler.h): the backend (in process or etcd) behind
// its gRPC service (scheduler_service.h), the thread that ticks it, the
// metrics endpoint and grpc.health.v1; start and shutdown order.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "rpc/control/etcd_scheduler.h"
#include "rpc/control/scheduler.h"
#include "rpc/control/scheduler_metrics.h"
#include "rpc/control/scheduler_service.h"
#include "rpc/wire/address.h"
#include "rpc/wire/metrics_http.h"
#include "rpc/wire/tls.h"
#include "util/status_macros.h"

namespace psdb::rpc {

class SchedulerServer::Impl {
 public:
  explicit Impl(const SchedulerOptions& options) : options(options) {}

  // Ticks the backend every heartbeat_interval / 4 until `stopping`.
  void Monitor() {
    const absl::Duration period = options.heartbeat_interval / 4;
    absl::MutexLock lock(&mu);
    while (!stopping) {
      mu.AwaitWithTimeout(absl::Condition(&stopping), period);
      if (stopping) break;
      mu.Unlock();
      backend->Tick(absl::Now());
      mu.Lock();
    }
  }

  const SchedulerOptions options;
  std::unique_ptr<SchedulerBackend> backend;
  // The same object as backend when it is one (etcd), else null.
  EtcdScheduler* etcd = nullptr;
  // Declared before `server`, which must go first.
  std::unique_ptr<SchedulerServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;
  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::thread monitor;
  bool shut_down = false;
  // Metrics (null when off); the endpoint stops before the scheduler goes.
  std::shared_ptr<prometheus::Collectable> collector;
  std::unique_ptr<MetricsHttpServer> metrics;
};

SchedulerServer::SchedulerServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
SchedulerServer::~SchedulerServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    const SchedulerOptions& options) {
  PSDB_RETURN_IF_ERROR(ValidateSchedulerOptions(options));
  PSDB_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                        MakeServerCredentials(options.tls, options.host));
  auto impl = std::make_unique<Impl>(options);
  if (options.etcd_endpoints.empty()) {
    auto scheduler = std::make_unique<Scheduler>(options);
    PSDB_RETURN_IF_ERROR(scheduler->Recover(absl::Now()));
    impl->backend = std::move(scheduler);
  } else {
    PSDB_ASSIGN_OR_RETURN(std::unique_ptr<EtcdScheduler> etcd,
                          EtcdScheduler::Open(options));
    impl->etcd = etcd.get();
    impl->backend = std::move(etcd);
  }
  impl->service = std::make_unique<SchedulerServiceImpl>(
      options, impl->backend.get(), impl->etcd);
  // Metrics first: a bad metrics address fails Start before anything serves.
  if (options.metrics_port >= 0) {
    PSDB_ASSIGN_OR_RETURN(
        impl->metrics,
        MetricsHttpServer::Start(
            options.metrics_host.empty() ? options.host : options.metrics_host,
            options.metrics_port));
    impl->collector = NewSchedulerCollector(impl->backend.get());
    impl->metrics->Register(impl->collector);
  }
  // grpc.health.v1 (Kubernetes' gRPC probes, grpc_health_probe): the
  // overall status (service "") is SERVING from here on, whether or not the
  // cluster is complete, until Shutdown.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // Nodes ping every 10 s to notice a dead scheduler host
  // (scheduler_client.cc); allow it, with or without a call open.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  ListenExclusively(options.host, options.port, creds, &builder, &impl->port);
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("ps-scheduler: cannot listen on ",
                     JoinHostPort(options.host, options.port),
                     " (address in use or not local?)"));
  }
  impl->server->GetHealthCheckService()->SetServingStatus(true);
  impl->address = JoinHostPort(options.host, impl->port);
  if (impl->etcd != nullptr) {
    impl->etcd->StartCampaign(options.advertise_address.empty()
                                  ? impl->address
                                  : options.advertise_address);
  }
  Impl* raw = impl.get();
  impl->monitor = std::thread([raw] { raw->Monitor(); });
  return std::unique_ptr<SchedulerServer>(new SchedulerServer(std::move(impl)));
}

int SchedulerServer::port() const { return impl_->port; }
std::string SchedulerServer::address() const { return impl_->address; }
int SchedulerServer::metrics_port() const {
  return impl_->metrics != nullptr ? impl_->metrics->port() : -1;
}
std::string SchedulerServer::metrics_address() const {
  return impl_->metrics != nullptr ? impl_->metrics->address() : "";
}
SchedulerBackend* SchedulerServer::backend() { return impl_->backend.get(); }
std::shared_ptr<grpc::Channel> SchedulerServer::InProcessChannel() const {
  return impl_->server->InProcessChannel(grpc::ChannelArguments());
}

void SchedulerServer::Shutdown() {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->server->GetHealthCheckService()->SetServingStatus(false);
  impl_->service->Close();
  impl_->metrics.reset();  // waits for a running scrape
  impl_->backend->Close();
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
  }
  impl_->monitor.join();
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::seconds(5));
  impl_->server->Wait();
}

}  // namespace psdb::rpc
