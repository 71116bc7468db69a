#include "tools/scheduler/scheduler_cli.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/admin_membership.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "rpc/wire/tls.h"
#include "tools/common/args.h"
#include "tools/common/flags_help.h"
#include "tools/common/shutdown_signals.h"
#include "tools/common/tls_flags.h"
#include "tools/scheduler/scheduler_flags.h"

namespace psdb::tools {
namespace {

int Fail(std::ostream& err, const absl::Status& status) {
  err << absl::StrCat("ps-scheduler: ", status.ToString(), "\n");
  return 1;
}

// --health: GetStatus of the scheduler at `address`.
int Health(const std::string& address, const rpc::ClientTlsOptions& tls,
           std::ostream& out, std::ostream& err) {
  auto channel = rpc::MakeChannel(tls, address);
  if (!channel.ok()) return Fail(err, channel.status());
  auto stub = v1::SchedulerService::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::SchedulerStatus status;
  const absl::Status call = rpc::FromGrpcStatus(
      stub->GetStatus(&ctx, v1::GetSchedulerStatusRequest(), &status));
  if (!call.ok()) {
    out << "unhealthy: scheduler " << address << " does not answer: " << call
        << std::endl;
    return 1;
  }
  const std::string role = status.leader()
                               ? "leader"
                               : absl::StrCat("standby (leader: ",
                                              status.leader_address().empty()
                                                  ? "none"
                                                  : status.leader_address(),
                                              ")");
  if (!status.healthy()) {
    out << "unhealthy: scheduler " << address << " (" << status.backend()
        << "): " << status.reason() << std::endl;
    return 1;
  }
  out << "healthy: scheduler " << address << " (" << status.backend()
      << (status.cluster().empty() ? "" : " cluster '") << status.cluster()
      << (status.cluster().empty() ? "" : "'") << ", " << role << ")"
      << std::endl;
  return 0;
}

// add-server / drain-server (rpc/control/admin_membership.h).
int ChangeMembership(const rpc::AdminMembershipOptions& options,
                     std::ostream& out) {
  const std::string verb =
      absl::StrCat(rpc::MembershipKindName(options.kind), "-server");
  const absl::Time start = absl::Now();
  auto done = rpc::AdminMembershipChange(
      options, [&out](absl::string_view line) { out << line << std::endl; });
  if (!done.ok()) {
    out << verb << (options.node_id.empty() ? "" : " ") << options.node_id
        << ": failed: " << done.status() << std::endl;
    return 1;
  }
  out << rpc::FormatMigrationDone(*done, absl::Now() - start) << std::endl;
  return 0;
}

// --dry_run's line.
std::string DryRunLine(const rpc::SchedulerOptions& options) {
  return absl::StrCat(
      "ps-scheduler (dry run): ", options.server_num, " servers, ",
      options.worker_num, " workers, listen on ", options.host, ":",
      options.port, ", state ",
      options.etcd_endpoints.empty()
          ? std::string("in this process")
          : absl::StrCat("in etcd ", absl::StrJoin(options.etcd_endpoints, ","),
                         " under /psdb/", options.cluster, "/, lease ttl ",
                         absl::FormatDuration(options.lease_ttl)));
}

// The scheduler until SIGTERM / SIGINT (or, with --dry_run, its settings).
int Serve(const rpc::SchedulerOptions& options, bool dry_run, std::ostream& out,
          std::ostream& err) {
  if (dry_run) {
    // Reads the TLS files (certificate, CA, CRL) as a start would.
    auto credentials = rpc::MakeServerCredentials(options.tls, options.host);
    if (!credentials.ok()) return Fail(err, credentials.status());
    out << DryRunLine(options) << std::endl;
    return 0;
  }
  const ShutdownSignals signals = ShutdownSignals::Block();
  auto server = rpc::SchedulerServer::Start(options);
  if (!server.ok()) return Fail(err, server.status());
  err << absl::StrCat("ps-scheduler: waiting for ", options.server_num,
                      " servers and ", options.worker_num, " workers\n");
  if ((*server)->metrics_port() >= 0) {
    out << "metrics on " << (*server)->metrics_address() << std::endl;
  }
  out << "scheduler listening on " << (*server)->address() << std::endl;

  const int signal_number = signals.Wait();
  err << absl::StrCat("ps-scheduler: signal ", signal_number,
                      ", shutting down\n");
  (*server)->Shutdown();
  server->reset();
  err << "ps-scheduler: stopped cleanly\n";
  return 0;
}

}  // namespace

int RunScheduler(int argc, char** argv, std::ostream& out, std::ostream& err) {
  SetFlagsHelp(
      "ps-scheduler --server_num=N --worker_num=M --sched_port=P "
      "[--sched_host=H] (or PS_SERVER_NUM, PS_WORKER_NUM, PS_SCHED_PORT, "
      "PS_SCHED_HOST) [--tls_cert=... --tls_key=... [--tls_ca=... "
      "--require_client_cert --tls_crl=...] [--tls_ciphers=A:B]]\n"
      "ps-scheduler add-server --scheduler=HOST:PORT --node_id=ID "
      "[--batch_rows=N] [--max_rows_per_second=N]\n"
      "ps-scheduler drain-server --scheduler=HOST:PORT --node_id=ID "
      "[--batch_rows=N] [--max_rows_per_second=N]",
      {{"tools/scheduler/scheduler_flags.cc", "ps-scheduler"},
       {"tools/common/tls_flags.cc", "ps-scheduler TLS"},
       {"rpc/control/node_config_flags.cc",
        "ps-scheduler cluster (PS_* variables)"}});
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // Before anything makes a TLS connection: gRPC reads the list once.
  if (absl::Status set = ApplyTlsCiphersFlag(); !set.ok()) {
    return Fail(err, set);
  }
  absl::StatusOr<SchedulerLaunch> launch = SchedulerLaunchFromFlags(
      std::vector<std::string>(positional.begin() + 1, positional.end()),
      PsVariablesInEnvironment());
  if (!launch.ok()) return Fail(err, launch.status());
  switch (launch->command) {
    case SchedulerLaunch::Command::kAddServer:
    case SchedulerLaunch::Command::kDrainServer:
      return ChangeMembership(launch->membership, out);
    case SchedulerLaunch::Command::kHealth:
      return Health(launch->health_address, launch->health_tls, out, err);
    case SchedulerLaunch::Command::kServe:
      break;
  }
  return Serve(launch->scheduler, launch->dry_run, out, err);
}

}  // namespace psdb::tools
