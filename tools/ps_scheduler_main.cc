// ps-scheduler: forms a psdb cluster (rpc/control/scheduler.h). Settings come
// from the PS_* variables or the same-named flags (rpc/control/node_config.h):
//
//   PS_SERVER_NUM=2 PS_WORKER_NUM=2 PS_SCHED_PORT=7100 ps-scheduler
//   ps-scheduler --server_num=2 --worker_num=0 --sched_host=0.0.0.0
//                --sched_port=7100 --insecure   (one command line)
//
// Prints "scheduler listening on HOST:PORT" once it serves (after "metrics
// on HOST:PORT" with --metrics_port: Prometheus text at /metrics,
// rpc/control/scheduler_metrics.h), then one line
// per assignment on stderr ("server node id:<id> addr:<host:port> assigned
// rank 0", "cluster ready: 2 servers, 2 workers, epoch 1", deaths,
// recoveries). SIGTERM or SIGINT stops it (exit 0); a bad or missing
// setting exits 1 at once with the reason. With PS_ENABLE_RECOVERY=1 and
// PS_RECOVERY_PATH=DIR the membership is saved under DIR after every change
// and reloaded at start, so a restarted scheduler carries on with the
// running nodes (they reconnect on their own).
//
// Live resharding (rpc/control/migration_coordinator.h), admin commands
// against a running scheduler (with --etcd, the leader):
//   ps-scheduler add-server --scheduler=HOST:PORT --node_id=ID
//                [--batch_rows=N] [--max_rows_per_second=N]
//   ps-scheduler drain-server --scheduler=HOST:PORT --node_id=ID [...]
// add-server moves to a server started with `ps-server --join` the rows
// it will own and puts it on the ring (a new epoch); drain-server moves
// every row of a server to the others and takes it out of the map. Both
// print a progress line about once a second ("add-server s3: copy
// 12000/40000 rows moved (30%)") and a last one ("add-server s3: done,
// epoch 1 -> 2, 40000 rows moved in 1.2 s"); exit 0, or 1 with the error
// (an aborted migration leaves the map unchanged).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/admin_membership.h"
#include "rpc/control/etcd_client.h"
#include "rpc/control/node_config_flags.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/address.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "rpc/wire/tls.h"
#include "tools/common/flags_help.h"
#include "tools/common/tls_flags.h"

ABSL_FLAG(int, heartbeat_interval_ms, 1000, "How often nodes beat.");
ABSL_FLAG(int, heartbeat_timeout_ms, 5000,
          "A node silent this long is marked dead.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics over HTTP at /metrics on this port; "
          "0 picks a free one, -1 = off.");
ABSL_FLAG(std::string, metrics_host, "",
          "Address the metrics endpoint binds; default --sched_host.");
ABSL_FLAG(std::string, etcd, "",
          "etcd client endpoints HOST:PORT[,HOST:PORT...]: keep the cluster "
          "state in etcd (overrides PS_ETCD_ENDPOINTS); empty = in this "
          "process.");
ABSL_FLAG(std::string, cluster, "",
          "Cluster name: its state lives under /psdb/NAME/ in etcd "
          "(overrides PS_CLUSTER_NAME; default 'default').");
constexpr int kDefaultLeaseTtlS = 10;
ABSL_FLAG(int, lease_ttl_s, kDefaultLeaseTtlS,
          "etcd lease TTL of nodes and schedulers: a killed node is dead, "
          "and a standby leads, this long after the kill.");
ABSL_FLAG(std::string, advertise_address, "",
          "HOST:PORT other schedulers see as this one's (default: the bound "
          "address).");
ABSL_FLAG(std::string, etcd_tls_ca, "", "PEM CA of etcd's certificate.");
ABSL_FLAG(std::string, etcd_tls_cert, "", "PEM client certificate for etcd.");
ABSL_FLAG(std::string, etcd_tls_key, "", "PEM key of --etcd_tls_cert.");
ABSL_FLAG(bool, dry_run, false,
          "Resolve and check every setting, print them, exit 0 (1 with the "
          "reason) without serving.");
ABSL_FLAG(std::string, scheduler, "",
          "add-server / drain-server: HOST:PORT of the scheduler (default "
          "--sched_host:--sched_port).");
ABSL_FLAG(int, batch_rows, 0,
          "add-server / drain-server: rows per Migrate call; 0 = 1024.");
ABSL_FLAG(int64_t, max_rows_per_second, 0,
          "add-server / drain-server: rows per second per source server; "
          "0 = no limit.");
ABSL_FLAG(bool, health, false,
          "Ask the scheduler at --sched_host (default 127.0.0.1) and "
          "--sched_port for its status; exit 0 when healthy, 1 otherwise.");

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ps-scheduler: %s\n", status.ToString().c_str());
  return 1;
}

// The flag, else the environment variable, else "".
std::string FlagOrEnv(const std::string& flag, const char* variable) {
  if (!flag.empty()) return flag;
  const char* value = std::getenv(variable);
  return value != nullptr ? value : "";
}

// The TLS a client of the scheduler (--health, add-server) uses.
psdb::rpc::ClientTlsOptions AdminTls() {
  psdb::rpc::ClientTlsOptions tls = psdb::tools::PeerTlsFromFlags();
  // A certificate only where this scheduler requires one of its clients.
  if (!psdb::tools::ServerTlsFromFlags().require_client_cert) {
    tls.cert_file.clear();
    tls.key_file.clear();
  }
  return tls;
}

// --health: GetStatus of the scheduler at --sched_host/--sched_port.
int Health() {
  psdb::rpc::SettingMap flags = psdb::rpc::NodeConfigFlags();
  std::string host = FlagOrEnv(flags["PS_SCHED_HOST"], "PS_SCHED_HOST");
  if (host.empty()) host = "127.0.0.1";
  const std::string port = FlagOrEnv(flags["PS_SCHED_PORT"], "PS_SCHED_PORT");
  if (port.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--health needs --sched_port (or PS_SCHED_PORT)"));
  }
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--sched_port must be a number, got '", port, "'")));
  }
  const std::string address = psdb::rpc::JoinHostPort(host, port_number);
  auto channel = psdb::rpc::MakeChannel(AdminTls(), address);
  if (!channel.ok()) return Fail(channel.status());
  auto stub = psdb::v1::SchedulerService::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  psdb::v1::SchedulerStatus status;
  const absl::Status call = psdb::rpc::FromGrpcStatus(
      stub->GetStatus(&ctx, psdb::v1::GetSchedulerStatusRequest(), &status));
  if (!call.ok()) {
    std::cout << "unhealthy: scheduler " << address
              << " does not answer: " << call << std::endl;
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
    std::cout << "unhealthy: scheduler " << address << " (" << status.backend()
              << "): " << status.reason() << std::endl;
    return 1;
  }
  std::cout << "healthy: scheduler " << address << " (" << status.backend()
            << (status.cluster().empty() ? "" : " cluster '")
            << status.cluster() << (status.cluster().empty() ? "" : "'") << ", "
            << role << ")" << std::endl;
  return 0;
}

// add-server / drain-server (rpc/control/admin_membership.h).
int ChangeMembership(psdb::rpc::MembershipChange::Kind kind) {
  psdb::rpc::AdminMembershipOptions options;
  options.kind = kind;
  options.scheduler_address = absl::GetFlag(FLAGS_scheduler);
  psdb::rpc::SettingMap flags = psdb::rpc::NodeConfigFlags();
  if (options.scheduler_address.empty()) {
    std::string host = FlagOrEnv(flags["PS_SCHED_HOST"], "PS_SCHED_HOST");
    const std::string port = FlagOrEnv(flags["PS_SCHED_PORT"], "PS_SCHED_PORT");
    int port_number = 0;
    if (!port.empty() && absl::SimpleAtoi(port, &port_number)) {
      options.scheduler_address = psdb::rpc::JoinHostPort(
          host.empty() ? std::string("127.0.0.1") : host, port_number);
    }
  }
  options.node_id = flags["PS_NODE_ID"];
  options.batch_rows = absl::GetFlag(FLAGS_batch_rows);
  options.max_rows_per_second = absl::GetFlag(FLAGS_max_rows_per_second);
  options.tls = AdminTls();
  const std::string verb =
      absl::StrCat(psdb::rpc::MembershipKindName(kind), "-server");
  const absl::Time start = absl::Now();
  auto done = psdb::rpc::AdminMembershipChange(
      options, [](absl::string_view line) { std::cout << line << std::endl; });
  if (!done.ok()) {
    std::cout << verb << (options.node_id.empty() ? "" : " ") << options.node_id
              << ": failed: " << done.status() << std::endl;
    return 1;
  }
  std::cout << psdb::rpc::FormatMigrationDone(*done, absl::Now() - start)
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  psdb::tools::SetFlagsHelp(
      "ps-scheduler --server_num=N --worker_num=M --sched_port=P "
      "[--sched_host=H] (or PS_SERVER_NUM, PS_WORKER_NUM, PS_SCHED_PORT, "
      "PS_SCHED_HOST) [--tls_cert=... --tls_key=... [--tls_ca=... "
      "--require_client_cert --tls_crl=...] [--tls_ciphers=A:B]]\n"
      "ps-scheduler add-server --scheduler=HOST:PORT --node_id=ID "
      "[--batch_rows=N] [--max_rows_per_second=N]\n"
      "ps-scheduler drain-server --scheduler=HOST:PORT --node_id=ID "
      "[--batch_rows=N] [--max_rows_per_second=N]",
      {{"tools/ps_scheduler_main.cc", "ps-scheduler"},
       {"tools/common/tls_flags.cc", "ps-scheduler TLS"},
       {"rpc/control/node_config_flags.cc",
        "ps-scheduler cluster (PS_* variables)"}});
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // Before anything makes a TLS connection: gRPC reads the list once.
  if (absl::Status set = psdb::tools::ApplyTlsCiphersFlag(); !set.ok()) {
    return Fail(set);
  }
  if (positional.size() > 1) {
    const std::string command = positional[1];
    if (positional.size() == 2 && command == "add-server") {
      return ChangeMembership(psdb::rpc::MembershipChange::Kind::kAdd);
    }
    if (positional.size() == 2 && command == "drain-server") {
      return ChangeMembership(psdb::rpc::MembershipChange::Kind::kDrain);
    }
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("unknown command '", command,
                     "': expected add-server or drain-server")));
  }
  if (absl::GetFlag(FLAGS_health)) return Health();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto config =
      psdb::rpc::NodeConfigFromEnvAndFlags(psdb::rpc::NodeRoleKind::kScheduler);
  if (!config.ok()) return Fail(config.status());
  psdb::rpc::SchedulerOptions options;
  options.host = config->sched_host;
  options.port = config->sched_port;
  options.server_num = *config->server_num;
  options.worker_num = *config->worker_num;
  if (config->enable_recovery) options.recovery_path = config->recovery_path;
  options.heartbeat_interval =
      absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  options.heartbeat_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  options.tls = psdb::tools::ServerTlsFromFlags();
  // Reaching ps-servers to migrate rows.
  options.server_tls = psdb::tools::PeerTlsFromFlags();
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  const std::string etcd =
      FlagOrEnv(absl::GetFlag(FLAGS_etcd), "PS_ETCD_ENDPOINTS");
  if (!etcd.empty()) {
    auto endpoints = psdb::rpc::ParseEtcdEndpoints(etcd);
    if (!endpoints.ok()) return Fail(endpoints.status());
    options.etcd_endpoints = *std::move(endpoints);
  }
  const std::string cluster =
      FlagOrEnv(absl::GetFlag(FLAGS_cluster), "PS_CLUSTER_NAME");
  if (!cluster.empty() && options.etcd_endpoints.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--cluster (PS_CLUSTER_NAME) names a cluster in etcd; give --etcd "
        "(PS_ETCD_ENDPOINTS) too, or neither"));
  }
  if (!cluster.empty()) options.cluster = cluster;
  if (options.etcd_endpoints.empty() &&
      absl::GetFlag(FLAGS_lease_ttl_s) != kDefaultLeaseTtlS) {
    return Fail(absl::InvalidArgumentError(
        "--lease_ttl_s is etcd's lease TTL; without --etcd a node's death is "
        "--heartbeat_timeout_ms"));
  }
  options.lease_ttl = absl::Seconds(absl::GetFlag(FLAGS_lease_ttl_s));
  options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  options.etcd_tls.ca_file = absl::GetFlag(FLAGS_etcd_tls_ca);
  options.etcd_tls.cert_file = absl::GetFlag(FLAGS_etcd_tls_cert);
  options.etcd_tls.key_file = absl::GetFlag(FLAGS_etcd_tls_key);
  options.etcd_tls.insecure = options.tls.insecure;
  if (absl::Status valid = psdb::rpc::ValidateSchedulerOptions(options);
      !valid.ok()) {
    return Fail(valid);
  }
  if (absl::GetFlag(FLAGS_dry_run)) {
    // Reads the TLS files (certificate, CA, CRL) as a start would.
    auto credentials =
        psdb::rpc::MakeServerCredentials(options.tls, options.host);
    if (!credentials.ok()) return Fail(credentials.status());
    std::cout << "ps-scheduler (dry run): " << options.server_num
              << " servers, " << options.worker_num << " workers, listen on "
              << options.host << ":" << options.port << ", state "
              << (options.etcd_endpoints.empty()
                      ? std::string("in this process")
                      : absl::StrCat("in etcd ",
                                     absl::StrJoin(options.etcd_endpoints, ","),
                                     " under /psdb/", options.cluster,
                                     "/, lease ttl ",
                                     absl::FormatDuration(options.lease_ttl)))
              << std::endl;
    return 0;
  }

  auto server = psdb::rpc::SchedulerServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  std::fprintf(stderr, "ps-scheduler: waiting for %d servers and %d workers\n",
               options.server_num, options.worker_num);
  if ((*server)->metrics_port() >= 0) {
    std::cout << "metrics on " << (*server)->metrics_address() << std::endl;
  }
  std::cout << "scheduler listening on " << (*server)->address() << std::endl;

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "ps-scheduler: signal %d, shutting down\n",
               signal_number);
  (*server)->Shutdown();
  server->reset();
  std::fprintf(stderr, "ps-scheduler: stopped cleanly\n");
  return 0;
}
