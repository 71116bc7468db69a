// ps-scheduler's command line (tools/scheduler/): the flags and PS_*
// variables resolved into SchedulerOptions, --health's and add-server's
// settings, clear errors for bad or contradictory settings; and the built
// binary's --help, --dry_run and grpc.health.v1.
#include <sys/wait.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/health_check.h"
#include "tests/testing/test_util.h"
#include "tests/tools/cli_flags_testing.h"
#include "tools/scheduler/scheduler_flags.h"

namespace psdb::tools {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ShellResult;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Command = SchedulerLaunch::Command;

class SchedulerFlagsTest : public ::psdb::testing::FlagsTest {
 protected:
  // The launch of `ps-scheduler ARGS...` with the flags set and `env`.
  static absl::StatusOr<SchedulerLaunch> Resolve(
      const rpc::SettingMap& env, const std::vector<std::string>& args = {}) {
    return SchedulerLaunchFromFlags(args, env);
  }

  // What the error of resolving `env` with `flags` (set for this call
  // only) says; "" if none.
  static std::string ErrorOf(const std::map<std::string, std::string>& flags,
                             const rpc::SettingMap& env,
                             const std::vector<std::string>& args = {}) {
    ::psdb::testing::ScopedFlags scoped;
    scoped.Set(flags);
    absl::StatusOr<SchedulerLaunch> launch = Resolve(env, args);
    if (launch.ok()) return "";
    EXPECT_EQ(launch.status().code(), absl::StatusCode::kInvalidArgument)
        << launch.status();
    return std::string(launch.status().message());
  }
};

const rpc::SettingMap kCluster = {
    {"PS_SERVER_NUM", "2"}, {"PS_WORKER_NUM", "3"}, {"PS_SCHED_PORT", "7100"}};

TEST_F(SchedulerFlagsTest, DefaultsAroundTheRequiredSettings) {
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch launch, Resolve(kCluster));
  EXPECT_EQ(launch.command, Command::kServe);
  EXPECT_FALSE(launch.dry_run);
  const rpc::SchedulerOptions& o = launch.scheduler;
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 7100);
  EXPECT_EQ(o.server_num, 2);
  EXPECT_EQ(o.worker_num, 3);
  EXPECT_EQ(o.recovery_path, "");
  EXPECT_EQ(o.heartbeat_interval, absl::Seconds(1));
  EXPECT_EQ(o.heartbeat_timeout, absl::Seconds(5));
  EXPECT_EQ(o.metrics_port, -1);
  EXPECT_EQ(o.metrics_host, "");
  EXPECT_TRUE(o.etcd_endpoints.empty());
  EXPECT_EQ(o.cluster, "default");
  EXPECT_EQ(o.lease_ttl, absl::Seconds(10));
  EXPECT_EQ(o.advertise_address, "");
  EXPECT_EQ(o.tls.cert_file, "");
  EXPECT_EQ(o.tls.cert_expiry_warning_days, 90);
  EXPECT_FALSE(o.tls.insecure);
  EXPECT_EQ(o.server_tls.ca_file, "");
}

TEST_F(SchedulerFlagsTest, FlagsWinOverTheEnvironment) {
  SetFlags({{"server_num", "4"},
            {"sched_host", "0.0.0.0"},
            {"heartbeat_interval_ms", "200"},
            {"heartbeat_timeout_ms", "900"},
            {"metrics_port", "9100"},
            {"metrics_host", "127.0.0.2"},
            {"insecure", "true"},
            {"dry_run", "true"}});
  rpc::SettingMap env = kCluster;
  env["PS_SCHED_HOST"] = "10.0.0.9";
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch launch, Resolve(env));
  EXPECT_TRUE(launch.dry_run);
  const rpc::SchedulerOptions& o = launch.scheduler;
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 7100);
  EXPECT_EQ(o.server_num, 4);
  EXPECT_EQ(o.worker_num, 3);
  EXPECT_EQ(o.heartbeat_interval, absl::Milliseconds(200));
  EXPECT_EQ(o.heartbeat_timeout, absl::Milliseconds(900));
  EXPECT_EQ(o.metrics_port, 9100);
  EXPECT_EQ(o.metrics_host, "127.0.0.2");
  EXPECT_TRUE(o.tls.insecure);
  EXPECT_TRUE(o.server_tls.insecure);
}

TEST_F(SchedulerFlagsTest, TlsServesWithTheCertificateAndReachesServersWithIt) {
  SetFlags({{"tls_cert", "s.pem"},
            {"tls_key", "s.key"},
            {"tls_ca", "ca.pem"},
            {"require_client_cert", "true"},
            {"tls_crl", "ca.crl"},
            {"cert_expiry_warning_days", "30"}});
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch launch, Resolve(kCluster));
  const rpc::SchedulerOptions& o = launch.scheduler;
  EXPECT_EQ(o.tls.cert_file, "s.pem");
  EXPECT_EQ(o.tls.key_file, "s.key");
  EXPECT_EQ(o.tls.ca_file, "ca.pem");
  EXPECT_TRUE(o.tls.require_client_cert);
  EXPECT_EQ(o.tls.crl_file, "ca.crl");
  EXPECT_EQ(o.tls.cert_expiry_warning_days, 30);
  EXPECT_EQ(o.server_tls.ca_file, "ca.pem");
  EXPECT_EQ(o.server_tls.cert_file, "s.pem");
  EXPECT_EQ(o.server_tls.key_file, "s.key");
}

TEST_F(SchedulerFlagsTest, RecoveryPathOnlyWhenRecoveryIsEnabled) {
  rpc::SettingMap env = kCluster;
  env["PS_RECOVERY_PATH"] = "/var/lib/psdb";
  env["PS_ENABLE_RECOVERY"] = "1";
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch on, Resolve(env));
  EXPECT_EQ(on.scheduler.recovery_path, "/var/lib/psdb");
  SetFlags({{"enable_recovery", "0"}});
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch off, Resolve(env));
  EXPECT_EQ(off.scheduler.recovery_path, "");
}

TEST_F(SchedulerFlagsTest, EtcdFromTheEnvironmentOrTheFlag) {
  rpc::SettingMap env = kCluster;
  env["PS_ETCD_ENDPOINTS"] = "http://e1:2379,e2:2379";
  env["PS_CLUSTER_NAME"] = "prod";
  SetFlags({{"lease_ttl_s", "4"},
            {"advertise_address", "sched-0.psdb:7100"},
            {"etcd_tls_ca", "etcd-ca.pem"},
            {"etcd_tls_cert", "etcd.pem"},
            {"etcd_tls_key", "etcd.key"}});
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch launch, Resolve(env));
  const rpc::SchedulerOptions& o = launch.scheduler;
  EXPECT_THAT(o.etcd_endpoints, ElementsAre("e1:2379", "e2:2379"));
  EXPECT_EQ(o.cluster, "prod");
  EXPECT_EQ(o.lease_ttl, absl::Seconds(4));
  EXPECT_EQ(o.advertise_address, "sched-0.psdb:7100");
  EXPECT_EQ(o.etcd_tls.ca_file, "etcd-ca.pem");
  EXPECT_EQ(o.etcd_tls.cert_file, "etcd.pem");
  EXPECT_EQ(o.etcd_tls.key_file, "etcd.key");
  EXPECT_FALSE(o.etcd_tls.insecure);

  SetFlags({{"etcd", "e3:2379"}, {"cluster", "staging"}});
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch flagged, Resolve(env));
  EXPECT_THAT(flagged.scheduler.etcd_endpoints, ElementsAre("e3:2379"));
  EXPECT_EQ(flagged.scheduler.cluster, "staging");
}

TEST_F(SchedulerFlagsTest, BadOrContradictorySettingsAreClearErrors) {
  rpc::SettingMap no_workers = kCluster;
  no_workers.erase("PS_WORKER_NUM");
  EXPECT_EQ(ErrorOf({}, no_workers),
            "the scheduler needs PS_WORKER_NUM (--worker_num) (>= 0; 0 = a "
            "serving-only cluster)");
  EXPECT_EQ(ErrorOf({{"sched_port", "http"}}, kCluster),
            "--sched_port=http: expected an integer in [1, 65535]");
  EXPECT_EQ(ErrorOf({{"cluster", "prod"}}, kCluster),
            "--cluster (PS_CLUSTER_NAME) names a cluster in etcd; give --etcd "
            "(PS_ETCD_ENDPOINTS) too, or neither");
  EXPECT_EQ(ErrorOf({{"lease_ttl_s", "3"}}, kCluster),
            "--lease_ttl_s is etcd's lease TTL; without --etcd a node's death "
            "is --heartbeat_timeout_ms");
  EXPECT_EQ(ErrorOf({{"heartbeat_timeout_ms", "800"}}, kCluster),
            "need 0 < heartbeat_interval < heartbeat_timeout, got 1s and "
            "800ms");
  EXPECT_EQ(ErrorOf({{"metrics_port", "70000"}}, kCluster),
            "metrics_port out of range: 70000");
  rpc::SettingMap etcd_and_recovery = kCluster;
  etcd_and_recovery["PS_ETCD_ENDPOINTS"] = "e1:2379";
  etcd_and_recovery["PS_ENABLE_RECOVERY"] = "1";
  etcd_and_recovery["PS_RECOVERY_PATH"] = "/r";
  EXPECT_EQ(ErrorOf({}, etcd_and_recovery),
            "recovery_path (PS_ENABLE_RECOVERY) and etcd are exclusive: with "
            "etcd the membership already survives a scheduler restart");
  etcd_and_recovery.erase("PS_ENABLE_RECOVERY");
  EXPECT_EQ(ErrorOf({{"cluster", "no/slash"}}, etcd_and_recovery),
            "cluster name must match [A-Za-z0-9_.-]{1,64}, got 'no/slash'");
  EXPECT_EQ(ErrorOf({}, kCluster, {"grow"}),
            "unknown command 'grow': expected add-server or drain-server");
  EXPECT_EQ(ErrorOf({}, kCluster, {"add-server", "s3"}),
            "unknown command 'add-server': expected add-server or "
            "drain-server");
}

TEST_F(SchedulerFlagsTest, HealthAsksTheSchedHostAndPort) {
  SetFlags({{"health", "true"}});
  // Neither PS_SERVER_NUM nor PS_WORKER_NUM: --health needs only where.
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch launch,
                       Resolve({{"PS_SCHED_PORT", "7100"}}));
  EXPECT_EQ(launch.command, Command::kHealth);
  EXPECT_EQ(launch.health_address, "127.0.0.1:7100");
  ASSERT_OK_AND_ASSIGN(launch, Resolve({{"PS_SCHED_HOST", "10.0.0.9"},
                                        {"PS_SCHED_PORT", "7200"}}));
  EXPECT_EQ(launch.health_address, "10.0.0.9:7200");
  SetFlags({{"sched_host", "::1"}, {"sched_port", "7300"}});
  ASSERT_OK_AND_ASSIGN(launch, Resolve({{"PS_SCHED_PORT", "7200"}}));
  EXPECT_EQ(launch.health_address, "[::1]:7300");

  SetFlags({{"sched_host", ""}, {"sched_port", ""}});
  EXPECT_EQ(ErrorOf({}, {}), "--health needs --sched_port (or PS_SCHED_PORT)");
  EXPECT_EQ(ErrorOf({{"sched_port", "http"}}, {}),
            "--sched_port must be a number, got 'http'");
}

TEST_F(SchedulerFlagsTest, AdminCallsPresentACertificateOnlyWhereRequired) {
  SetFlags({{"health", "true"},
            {"sched_port", "7100"},
            {"tls_ca", "ca.pem"},
            {"tls_cert", "s.pem"},
            {"tls_key", "s.key"}});
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch launch, Resolve({}));
  EXPECT_EQ(launch.health_tls.ca_file, "ca.pem");
  EXPECT_EQ(launch.health_tls.cert_file, "");
  EXPECT_EQ(launch.health_tls.key_file, "");
  SetFlags({{"require_client_cert", "true"}});
  ASSERT_OK_AND_ASSIGN(launch, Resolve({}));
  EXPECT_EQ(launch.health_tls.cert_file, "s.pem");
  EXPECT_EQ(launch.health_tls.key_file, "s.key");
}

TEST_F(SchedulerFlagsTest, AddAndDrainServer) {
  SetFlags({{"scheduler", "sched:7100"},
            {"node_id", "s3"},
            {"batch_rows", "64"},
            {"max_rows_per_second", "1000"}});
  ASSERT_OK_AND_ASSIGN(SchedulerLaunch add, Resolve({}, {"add-server"}));
  EXPECT_EQ(add.command, Command::kAddServer);
  EXPECT_EQ(add.membership.kind, rpc::MembershipChange::Kind::kAdd);
  EXPECT_EQ(add.membership.scheduler_address, "sched:7100");
  EXPECT_EQ(add.membership.node_id, "s3");
  EXPECT_EQ(add.membership.batch_rows, 64);
  EXPECT_EQ(add.membership.max_rows_per_second, 1000);

  // Without --scheduler: --sched_host/--sched_port or their variables;
  // PS_NODE_ID is this process's id, not the server's.
  SetFlags({{"scheduler", ""}, {"node_id", ""}});
  ASSERT_OK_AND_ASSIGN(
      SchedulerLaunch drain,
      Resolve({{"PS_SCHED_PORT", "7100"}, {"PS_NODE_ID", "admin-1"}},
              {"drain-server"}));
  EXPECT_EQ(drain.command, Command::kDrainServer);
  EXPECT_EQ(drain.membership.kind, rpc::MembershipChange::Kind::kDrain);
  EXPECT_EQ(drain.membership.scheduler_address, "127.0.0.1:7100");
  EXPECT_EQ(drain.membership.node_id, "");
  // No usable port: no address (AdminMembershipChange refuses it).
  ASSERT_OK_AND_ASSIGN(drain,
                       Resolve({{"PS_SCHED_PORT", "x"}}, {"drain-server"}));
  EXPECT_EQ(drain.membership.scheduler_address, "");
}

// --- The built binary --------------------------------------------------

TEST(PsSchedulerBinaryTest, HelpNamesNoBuildPath) {
  for (const char* help : {"--help", "--helpfull", "--helpshort"}) {
    const ShellResult r =
        RunShell(absl::StrCat(BuiltBinary("tools/ps-scheduler"), " ", help));
    EXPECT_EQ(r.exit_code, 1) << help;  // absl's --help exits 1
    EXPECT_THAT(r.output, HasSubstr("Flags from ps-scheduler:")) << help;
    EXPECT_THAT(r.output, HasSubstr("--heartbeat_interval_ms")) << help;
    ::psdb::testing::ExpectNoBuildPaths(r.output, PSDB_SOURCE_DIR,
                                        BuiltBinary(""));
  }
  const ShellResult help =
      RunShell(absl::StrCat(BuiltBinary("tools/ps-scheduler"), " --help"));
  EXPECT_THAT(help.output, HasSubstr("Flags from ps-scheduler TLS:"));
  EXPECT_THAT(help.output,
              HasSubstr("Flags from ps-scheduler cluster (PS_* variables):"));
}

TEST(PsSchedulerBinaryTest, DryRunPrintsTheSettings) {
  const ShellResult r = RunShell(
      absl::StrCat(
          ::psdb::testing::CleanEnvPrefix(), "PS_SERVER_NUM=2 PS_WORKER_NUM=1 ",
          BuiltBinary("tools/ps-scheduler"), " --sched_port=7100 --dry_run"),
      /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output,
            "ps-scheduler (dry run): 2 servers, 1 workers, listen on "
            "127.0.0.1:7100, state in this process\n");
}

TEST(PsSchedulerBinaryTest, ABadSettingExitsAtOnceWithoutServing) {
  ChildOptions o;
  o.binary = BuiltBinary("tools/ps-scheduler");
  o.env = {{"PS_SERVER_NUM", "1"}, {"PS_WORKER_NUM", "0"}};
  const ReservedPort port;
  o.args = {absl::StrCat("--sched_port=", port.port()), "--lease_ttl_s=3"};
  ASSERT_OK_AND_ASSIGN(auto child, ChildProcess::Start(o));
  ASSERT_OK_AND_ASSIGN(int status, child->Wait(absl::Seconds(60)));
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(child->Stderr(),
              HasSubstr("ps-scheduler: INVALID_ARGUMENT: --lease_ttl_s is "
                        "etcd's lease TTL"));
  EXPECT_THAT(child->Stderr(), Not(HasSubstr("listening")));
}

TEST(PsSchedulerBinaryTest, HealthIsServingBeforeAnyServerRegisters) {
  const ReservedPort port;
  ASSERT_OK_AND_ASSIGN(auto sched, ChildProcess::Start(PsSchedulerOptions(
                                       port.port(), /*servers=*/2,
                                       /*workers=*/1)));
  {
    // No node has registered: the cluster is far from complete.
    auto stub = v1::SchedulerService::NewStub(grpc::CreateChannel(
        sched->ready_value(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::GetClusterMapResponse map;
    ASSERT_TRUE(
        stub->GetClusterMap(&ctx, v1::GetClusterMapRequest(), &map).ok());
    EXPECT_FALSE(map.map().ready());
    EXPECT_EQ(map.map().servers_size(), 0);
  }  // The channel closes: a connection left open holds shutdown 5 s.
  ASSERT_OK_AND_ASSIGN(
      const int health,
      testing::HealthCheck(grpc::CreateChannel(
          sched->ready_value(), grpc::InsecureChannelCredentials())));
  EXPECT_EQ(health, 1);  // SERVING
  ASSERT_OK(sched->Stop());
}

}  // namespace
}  // namespace psdb::tools
