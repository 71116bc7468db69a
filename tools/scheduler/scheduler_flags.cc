#include "tools/scheduler/scheduler_flags.h"

#include <optional>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/control/etcd_client.h"
#include "rpc/control/node_config_flags.h"
#include "rpc/wire/address.h"
#include "tools/common/tls_flags.h"

namespace {
constexpr int kDefaultLeaseTtlS = 10;
}  // namespace

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

namespace psdb::tools {
namespace {

using Command = SchedulerLaunch::Command;

// The value of `name` in `settings`; "" when absent.
std::string Get(const rpc::SettingMap& settings, const std::string& name) {
  auto it = settings.find(name);
  return it != settings.end() ? it->second : "";
}

// The flag, else the environment variable, else "".
std::string FlagOrEnv(const std::string& flag, const rpc::SettingMap& env,
                      const std::string& variable) {
  return !flag.empty() ? flag : Get(env, variable);
}

// host:port of --sched_host (default 127.0.0.1) and --sched_port, or their
// PS_* variables; `who` names the command asking, in the error.
absl::StatusOr<std::string> SchedHostPort(const rpc::SettingMap& flags,
                                          const rpc::SettingMap& env,
                                          absl::string_view who) {
  std::string host =
      FlagOrEnv(Get(flags, "PS_SCHED_HOST"), env, "PS_SCHED_HOST");
  if (host.empty()) host = "127.0.0.1";
  const std::string port =
      FlagOrEnv(Get(flags, "PS_SCHED_PORT"), env, "PS_SCHED_PORT");
  if (port.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, " needs --sched_port (or PS_SCHED_PORT)"));
  }
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sched_port must be a number, got '", port, "'"));
  }
  return rpc::JoinHostPort(host, port_number);
}

// add-server / drain-server (rpc/control/admin_membership.h).
rpc::AdminMembershipOptions MembershipFromFlags(
    rpc::MembershipChange::Kind kind, const rpc::SettingMap& env) {
  const rpc::SettingMap flags = rpc::NodeConfigFlags();
  rpc::AdminMembershipOptions options;
  options.kind = kind;
  options.scheduler_address = absl::GetFlag(FLAGS_scheduler);
  if (options.scheduler_address.empty()) {
    // Left empty without a usable --sched_port: AdminMembershipChange says
    // the address is missing.
    absl::StatusOr<std::string> address =
        SchedHostPort(flags, env, "add-server / drain-server");
    if (address.ok()) options.scheduler_address = *std::move(address);
  }
  // The flag only: PS_NODE_ID is this process's own id, not the server's.
  options.node_id = Get(flags, "PS_NODE_ID");
  options.batch_rows = absl::GetFlag(FLAGS_batch_rows);
  options.max_rows_per_second = absl::GetFlag(FLAGS_max_rows_per_second);
  options.tls = AdminTlsFromFlags();
  return options;
}

absl::StatusOr<rpc::SchedulerOptions> SchedulerFromFlags(
    const rpc::SettingMap& env) {
  absl::StatusOr<rpc::NodeConfig> config = rpc::ResolveNodeConfig(
      env, rpc::NodeConfigFlags(), rpc::NodeRoleKind::kScheduler);
  if (!config.ok()) return config.status();
  rpc::SchedulerOptions options;
  options.host = config->sched_host;
  options.port = config->sched_port;
  options.server_num = *config->server_num;
  options.worker_num = *config->worker_num;
  if (config->enable_recovery) options.recovery_path = config->recovery_path;
  options.heartbeat_interval =
      absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  options.heartbeat_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  options.tls = ServerTlsFromFlags();
  // Reaching ps-servers to migrate rows.
  options.server_tls = PeerTlsFromFlags();
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  const std::string etcd =
      FlagOrEnv(absl::GetFlag(FLAGS_etcd), env, "PS_ETCD_ENDPOINTS");
  if (!etcd.empty()) {
    absl::StatusOr<std::vector<std::string>> endpoints =
        rpc::ParseEtcdEndpoints(etcd);
    if (!endpoints.ok()) return endpoints.status();
    options.etcd_endpoints = *std::move(endpoints);
  }
  const std::string cluster =
      FlagOrEnv(absl::GetFlag(FLAGS_cluster), env, "PS_CLUSTER_NAME");
  if (!cluster.empty() && options.etcd_endpoints.empty()) {
    return absl::InvalidArgumentError(
        "--cluster (PS_CLUSTER_NAME) names a cluster in etcd; give --etcd "
        "(PS_ETCD_ENDPOINTS) too, or neither");
  }
  if (!cluster.empty()) options.cluster = cluster;
  if (options.etcd_endpoints.empty() &&
      absl::GetFlag(FLAGS_lease_ttl_s) != kDefaultLeaseTtlS) {
    return absl::InvalidArgumentError(
        "--lease_ttl_s is etcd's lease TTL; without --etcd a node's death is "
        "--heartbeat_timeout_ms");
  }
  options.lease_ttl = absl::Seconds(absl::GetFlag(FLAGS_lease_ttl_s));
  options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  options.etcd_tls.ca_file = absl::GetFlag(FLAGS_etcd_tls_ca);
  options.etcd_tls.cert_file = absl::GetFlag(FLAGS_etcd_tls_cert);
  options.etcd_tls.key_file = absl::GetFlag(FLAGS_etcd_tls_key);
  options.etcd_tls.insecure = options.tls.insecure;
  if (absl::Status valid = rpc::ValidateSchedulerOptions(options);
      !valid.ok()) {
    return valid;
  }
  return options;
}

}  // namespace

rpc::ClientTlsOptions AdminTlsFromFlags() {
  rpc::ClientTlsOptions tls = PeerTlsFromFlags();
  // A certificate only where this scheduler requires one of its clients.
  if (!ServerTlsFromFlags().require_client_cert) {
    tls.cert_file.clear();
    tls.key_file.clear();
  }
  return tls;
}

absl::StatusOr<SchedulerLaunch> SchedulerLaunchFromFlags(
    const std::vector<std::string>& args, const rpc::SettingMap& env) {
  SchedulerLaunch launch;
  if (!args.empty()) {
    const std::string& command = args[0];
    if (args.size() == 1 && command == "add-server") {
      launch.command = Command::kAddServer;
      launch.membership =
          MembershipFromFlags(rpc::MembershipChange::Kind::kAdd, env);
      return launch;
    }
    if (args.size() == 1 && command == "drain-server") {
      launch.command = Command::kDrainServer;
      launch.membership =
          MembershipFromFlags(rpc::MembershipChange::Kind::kDrain, env);
      return launch;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command '", command,
                     "': expected add-server or drain-server"));
  }
  if (absl::GetFlag(FLAGS_health)) {
    launch.command = Command::kHealth;
    absl::StatusOr<std::string> address =
        SchedHostPort(rpc::NodeConfigFlags(), env, "--health");
    if (!address.ok()) return address.status();
    launch.health_address = *std::move(address);
    launch.health_tls = AdminTlsFromFlags();
    return launch;
  }
  absl::StatusOr<rpc::SchedulerOptions> options = SchedulerFromFlags(env);
  if (!options.ok()) return options.status();
  launch.scheduler = *std::move(options);
  launch.dry_run = absl::GetFlag(FLAGS_dry_run);
  return launch;
}

}  // namespace psdb::tools
