// ps-server's command line (tools/server/): the flags and PS_* variables
// resolved into ServerOptions, StoreOptions, TLS, cluster placement, the
// replica's and the checkpoint call's options; clear errors for bad or
// contradictory settings; and the built binary's --help, --dry_run and a
// refused start that leaves no trace.
#include <sys/wait.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tests/tools/cli_flags_testing.h"
#include "tools/server/server_flags.h"

namespace psdb::tools {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::ShellResult;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Mode = ServerLaunch::Mode;

class ServerFlagsTest : public ::psdb::testing::FlagsTest {
 protected:
  // The launch of `ps-server ARGS...` with the flags set and `env`.
  static absl::StatusOr<ServerLaunch> Resolve(
      const rpc::SettingMap& env = {},
      const std::vector<std::string>& args = {}) {
    return ServerLaunchFromFlags(args, env);
  }

  // What the error of resolving `env` with `flags` (set for this call
  // only) says; "" if none.
  static std::string ErrorOf(const std::map<std::string, std::string>& flags,
                             const rpc::SettingMap& env = {},
                             const std::vector<std::string>& args = {}) {
    ::psdb::testing::ScopedFlags scoped;
    scoped.Set(flags);
    absl::StatusOr<ServerLaunch> launch = Resolve(env, args);
    if (launch.ok()) return "";
    EXPECT_EQ(launch.status().code(), absl::StatusCode::kInvalidArgument)
        << launch.status();
    return std::string(launch.status().message());
  }
};

std::vector<std::string> Addresses(const ClusterMap& cluster) {
  std::vector<std::string> out;
  for (const ServerInfo& s : cluster.servers()) out.push_back(s.address);
  return out;
}

TEST_F(ServerFlagsTest, ATrainingServersDefaults) {
  SetFlags({{"data_dir", "/data/psdb"}});
  ASSERT_OK_AND_ASSIGN(ServerLaunch launch, Resolve());
  EXPECT_EQ(launch.mode, Mode::kTrain);
  EXPECT_FALSE(launch.dry_run);
  EXPECT_EQ(launch.malloc_keep_mb, 256);
  EXPECT_EQ(launch.data_dir, "/data/psdb");
  EXPECT_EQ(launch.shutdown_grace, absl::Seconds(30));

  const rpc::ServerOptions& s = launch.server;
  EXPECT_EQ(s.host, "127.0.0.1");
  EXPECT_EQ(s.port, 0);
  EXPECT_EQ(s.num_threads, 0);
  EXPECT_EQ(s.max_batch_keys, 65536u);
  EXPECT_EQ(s.max_dim, 1024);
  EXPECT_EQ(s.shard_id, 0);
  EXPECT_TRUE(s.cluster.servers().empty());
  EXPECT_EQ(s.cluster.epoch(), 1u);
  EXPECT_EQ(s.tls.cert_file, "");
  EXPECT_FALSE(s.tls.insecure);
  EXPECT_EQ(s.peer_tls.ca_file, "");
  EXPECT_EQ(s.sync.num_workers, 0);
  EXPECT_EQ(s.metrics_port, -1);
  EXPECT_EQ(s.metrics_host, "");

  const StoreOptions& store = launch.store;
  EXPECT_EQ(store.memory_budget_bytes, uint64_t{1024} << 20);
  EXPECT_EQ(store.disk_reserve_bytes, 0u);
  EXPECT_EQ(store.max_batch_keys, 65536u);
  EXPECT_EQ(store.shard_id, 0);
  EXPECT_EQ(store.restore_from, "");
  EXPECT_EQ(store.durability, Durability::kCheckpoint);
  EXPECT_FALSE(store.wal_sync);

  EXPECT_FALSE(launch.node.has_scheduler());
  EXPECT_EQ(launch.node.role, rpc::NodeRoleKind::kServer);
  EXPECT_FALSE(launch.sync_mode);
  EXPECT_EQ(launch.advertise_host, "127.0.0.1");
  EXPECT_EQ(launch.cluster_wait, absl::Seconds(300));
}

TEST_F(ServerFlagsTest, AStaticClusterAndEveryStoreFlag) {
  SetFlags({{"data_dir", "/data/psdb"},
            {"servers", "h1:7000,h2:7000,h3:7000"},
            {"shard_id", "1"},
            {"cluster_epoch", "4"},
            {"host", "0.0.0.0"},
            {"port", "7000"},
            {"threads", "8"},
            {"max_batch_keys", "1000"},
            {"max_dim", "64"},
            {"memory_budget_mb", "2048"},
            {"disk_reserve_mb", "16"},
            {"restore_from", "/ckpt/ckpt-1"},
            {"durability", "wal"},
            {"wal_sync", "true"},
            {"metrics_port", "9100"},
            {"metrics_host", "127.0.0.2"},
            {"shutdown_grace_seconds", "5"},
            {"malloc_keep_mb", "0"},
            {"insecure", "true"}});
  ASSERT_OK_AND_ASSIGN(ServerLaunch launch, Resolve());
  EXPECT_EQ(launch.malloc_keep_mb, 0);
  EXPECT_EQ(launch.shutdown_grace, absl::Seconds(5));
  const rpc::ServerOptions& s = launch.server;
  EXPECT_EQ(s.host, "0.0.0.0");
  EXPECT_EQ(s.port, 7000);
  EXPECT_EQ(s.num_threads, 8);
  EXPECT_EQ(s.max_batch_keys, 1000u);
  EXPECT_EQ(s.max_dim, 64);
  EXPECT_EQ(s.shard_id, 1);
  EXPECT_THAT(Addresses(s.cluster),
              ElementsAre("h1:7000", "h2:7000", "h3:7000"));
  EXPECT_EQ(s.cluster.epoch(), 4u);
  EXPECT_EQ(s.metrics_port, 9100);
  EXPECT_EQ(s.metrics_host, "127.0.0.2");
  EXPECT_TRUE(s.tls.insecure);
  EXPECT_TRUE(s.peer_tls.insecure);
  const StoreOptions& store = launch.store;
  EXPECT_EQ(store.memory_budget_bytes, uint64_t{2048} << 20);
  EXPECT_EQ(store.disk_reserve_bytes, uint64_t{16} << 20);
  EXPECT_EQ(store.max_batch_keys, 1000u);
  EXPECT_EQ(store.shard_id, 1);
  EXPECT_EQ(store.restore_from, "/ckpt/ckpt-1");
  EXPECT_EQ(store.durability, Durability::kWal);
  EXPECT_TRUE(store.wal_sync);
  // No scheduler: advertise_host is the listen host, unused.
  EXPECT_EQ(launch.advertise_host, "0.0.0.0");
}

TEST_F(ServerFlagsTest, TlsServesWithTheCertificateAndReachesPeersWithIt) {
  SetFlags({{"data_dir", "/d"},
            {"tls_cert", "s.pem"},
            {"tls_key", "s.key"},
            {"tls_ca", "ca.pem"},
            {"require_client_cert", "true"},
            {"tls_crl", "ca.crl"},
            {"cert_expiry_warning_days", "7"}});
  ASSERT_OK_AND_ASSIGN(ServerLaunch launch, Resolve());
  const rpc::ServerOptions& s = launch.server;
  EXPECT_EQ(s.tls.cert_file, "s.pem");
  EXPECT_EQ(s.tls.key_file, "s.key");
  EXPECT_EQ(s.tls.ca_file, "ca.pem");
  EXPECT_TRUE(s.tls.require_client_cert);
  EXPECT_EQ(s.tls.crl_file, "ca.crl");
  EXPECT_EQ(s.tls.cert_expiry_warning_days, 7);
  // Peers (Migrate) and the scheduler are reached with the same files.
  EXPECT_EQ(s.peer_tls.ca_file, "ca.pem");
  EXPECT_EQ(s.peer_tls.cert_file, "s.pem");
  EXPECT_EQ(s.peer_tls.key_file, "s.key");
  EXPECT_FALSE(s.peer_tls.insecure);
}

TEST_F(ServerFlagsTest, ASchedulerPlacesTheServer) {
  SetFlags({{"data_dir", "/d"},
            {"sync_mode", "sync"},
            {"sync_reduce", "sum"},
            {"advertise_host", "pod-3.psdb"},
            {"cluster_wait_seconds", "60"},
            {"port", "7000"}});
  const rpc::SettingMap env = {{"PS_SCHED_HOST", "10.0.0.9"},
                               {"PS_SCHED_PORT", "7100"},
                               {"PS_NODE_ID", "server-3"},
                               {"PS_WORKER_NUM", "2"}};
  ASSERT_OK_AND_ASSIGN(ServerLaunch launch, Resolve(env));
  EXPECT_TRUE(launch.node.has_scheduler());
  EXPECT_EQ(launch.node.SchedulerAddress(), "10.0.0.9:7100");
  EXPECT_EQ(launch.node.node_id, "server-3");
  EXPECT_FALSE(launch.node.node_id_generated);
  EXPECT_FALSE(launch.node.join);
  EXPECT_EQ(launch.advertise_host, "pod-3.psdb");
  EXPECT_EQ(launch.cluster_wait, absl::Seconds(60));
  EXPECT_TRUE(launch.sync_mode);
  EXPECT_EQ(launch.server.sync.num_workers, 2);
  EXPECT_EQ(launch.server.sync.reduce, rpc::SyncReduce::kSum);

  // Without PS_WORKER_NUM the scheduler says how many workers push.
  SetFlags({{"sync_reduce", "mean"}, {"join", "true"}});
  ASSERT_OK_AND_ASSIGN(launch,
                       Resolve({{"PS_SCHED_ADDRESSES", "s1:7100,s2:7100"},
                                {"PS_NODE_ID", "server-4"}}));
  EXPECT_EQ(launch.node.SchedulerAddress(), "s1:7100,s2:7100");
  EXPECT_TRUE(launch.node.join);
  EXPECT_TRUE(launch.sync_mode);
  EXPECT_EQ(launch.server.sync.num_workers, 0);
  EXPECT_EQ(launch.server.sync.reduce, rpc::SyncReduce::kMean);
}

TEST_F(ServerFlagsTest, SyncWithoutASchedulerTakesTheWorkerCount) {
  SetFlags({{"data_dir", "/d"}, {"sync_mode", "sync"}, {"worker_num", "3"}});
  ASSERT_OK_AND_ASSIGN(ServerLaunch launch, Resolve({{"PS_WORKER_NUM", "5"}}));
  EXPECT_EQ(launch.server.sync.num_workers, 3);  // the flag wins
  EXPECT_EQ(launch.server.sync.reduce, rpc::SyncReduce::kMean);
}

TEST_F(ServerFlagsTest, AServingReplica) {
  SetFlags({{"serve_from", "/shared/ckpt"},
            {"shard_id", "2"},
            {"follow_interval_s", "30"},
            {"serve_versions", "3"},
            {"memory_budget_mb", "512"},
            {"max_batch_keys", "4096"},
            {"port", "7400"},
            {"dry_run", "true"}});
  ASSERT_OK_AND_ASSIGN(ServerLaunch launch, Resolve());
  EXPECT_EQ(launch.mode, Mode::kServe);
  EXPECT_TRUE(launch.dry_run);
  EXPECT_EQ(launch.data_dir, "");
  EXPECT_EQ(launch.server.port, 7400);
  EXPECT_EQ(launch.server.shard_id, 2);
  EXPECT_EQ(launch.follow.root, "/shared/ckpt");
  EXPECT_EQ(launch.follow.shard_id, 2);
  EXPECT_EQ(launch.follow.interval, absl::Seconds(30));
  EXPECT_EQ(launch.follow.serve_versions, 3);
  EXPECT_EQ(launch.follow.store.memory_budget_bytes, uint64_t{512} << 20);
  EXPECT_EQ(launch.follow.store.max_batch_keys, 4096u);

  SetFlags({{"serve_all_shards", "true"}});
  ASSERT_OK_AND_ASSIGN(launch, Resolve());
  EXPECT_EQ(launch.follow.shard_id, rpc::kAllShards);
}

TEST_F(ServerFlagsTest, TheCheckpointCall) {
  SetFlags({{"root", "/shared/ckpt"},
            {"step", "1200"},
            {"servers", "h1:7000,h2:7000"},
            {"cluster_epoch", "3"},
            {"checkpoint_timeout_seconds", "60"},
            {"tls_ca", "ca.pem"}});
  ASSERT_OK_AND_ASSIGN(ServerLaunch launch, Resolve({}, {"checkpoint"}));
  EXPECT_EQ(launch.mode, Mode::kCheckpoint);
  const rpc::AdminCheckpointOptions& c = launch.checkpoint;
  EXPECT_EQ(c.root, "/shared/ckpt");
  EXPECT_EQ(c.step, 1200);
  EXPECT_THAT(c.servers, ElementsAre("h1:7000", "h2:7000"));
  EXPECT_EQ(c.cluster_epoch, 3u);
  EXPECT_EQ(c.timeout, absl::Seconds(60));
  EXPECT_EQ(c.tls.ca_file, "ca.pem");
  EXPECT_EQ(c.scheduler_address, "");

  SetFlags({{"servers", ""}});
  ASSERT_OK_AND_ASSIGN(launch, Resolve({{"PS_SCHED_HOST", "10.0.0.9"},
                                        {"PS_SCHED_PORT", "7100"}},
                                       {"checkpoint"}));
  EXPECT_EQ(launch.checkpoint.scheduler_address, "10.0.0.9:7100");
  EXPECT_TRUE(launch.checkpoint.servers.empty());
}

TEST_F(ServerFlagsTest, BadOrContradictorySettingsAreClearErrors) {
  const std::string exactly_one =
      "give exactly one of --data_dir (training) and --serve_from (read-only "
      "serving)";
  EXPECT_EQ(ErrorOf({}), exactly_one);
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"serve_from", "/c"}}), exactly_one);
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"max_batch_keys", "0"}}),
            "--max_batch_keys must be >= 1");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"disk_reserve_mb", "-1"}}),
            "--disk_reserve_mb must be >= 0");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"servers", "h1:7000|h1:7001"}}),
            "server list \"h1:7000|h1:7001\": shard 0 names 2 replicas ('|'); "
            "this list takes one address per server");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}}, {{"PS_ROLE", "worker"}}),
            "PS_ROLE=worker contradicts this binary, which is the server");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"servers", "h1:7000"}},
                    {{"PS_SCHED_HOST", "s"}, {"PS_SCHED_PORT", "7100"}}),
            "--servers contradicts the scheduler (PS_SCHED_HOST/PS_SCHED_PORT "
            "or PS_SCHED_ADDRESSES): it assigns the server list");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"restore_from", "/c"}, {"join", "1"}},
                    {{"PS_SCHED_HOST", "s"}, {"PS_SCHED_PORT", "7100"}}),
            "--join with --restore_from: a joining server owns no keys until "
            "add-server, which moves its rows to it");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"durability", "fast"}}),
            "durability \"fast\": expected checkpoint or wal");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"sync_reduce", "max"}}),
            "--sync_reduce=max: expected mean or sum");
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"sync_mode", "sometimes"}}),
            "--sync_mode=sometimes: expected async or sync");
  const std::string needs_workers =
      "--sync_mode=sync needs the number of workers (>= 1): PS_WORKER_NUM "
      "(--worker_num) or a scheduler";
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"sync_mode", "sync"}}),
            needs_workers);
  EXPECT_EQ(ErrorOf({{"data_dir", "/d"}, {"sync_mode", "sync"}},
                    {{"PS_WORKER_NUM", "0"}}),
            needs_workers);

  EXPECT_EQ(ErrorOf({{"serve_from", "/c"}, {"restore_from", "/c"}}),
            "--servers and --restore_from do not apply to --serve_from: a "
            "replica serves the checkpoint's own shard under its own ring");
  EXPECT_EQ(ErrorOf({{"serve_from", "/c"}, {"sync_mode", "sync"}}),
            "--sync_mode does not apply to --serve_from (no pushes)");
  EXPECT_EQ(
      ErrorOf({{"serve_from", "/c"}}, {{"PS_SCHED_ADDRESSES", "s1:7100"}}),
      "--serve_from: a serving replica does not join a scheduler (unset "
      "PS_SCHED_HOST/PS_SCHED_PORT and PS_SCHED_ADDRESSES)");
  EXPECT_EQ(ErrorOf({{"serve_from", "/c"}, {"follow_interval_s", "-1"}}),
            "--follow_interval_s must be >= 0");
  EXPECT_EQ(ErrorOf({{"serve_from", "/c"}, {"serve_versions", "0"}}),
            "--serve_versions must be >= 1");

  EXPECT_EQ(ErrorOf({}, {}, {"backup"}),
            "unknown command 'backup': expected checkpoint");
  EXPECT_EQ(ErrorOf({}, {}, {"checkpoint", "now"}),
            "unknown command 'checkpoint': expected checkpoint");
  EXPECT_EQ(ErrorOf({{"servers", "h1:7000|h1:7001"}}, {}, {"checkpoint"}),
            "server list \"h1:7000|h1:7001\": shard 0 names 2 replicas ('|'); "
            "this list takes one address per server");
}

// --- The built binary --------------------------------------------------

TEST(PsServerBinaryTest, HelpNamesNoBuildPath) {
  for (const char* help : {"--help", "--helpfull", "--helpshort"}) {
    const ShellResult r =
        RunShell(absl::StrCat(BuiltBinary("tools/ps-server"), " ", help));
    EXPECT_EQ(r.exit_code, 1) << help;  // absl's --help exits 1
    EXPECT_THAT(r.output, HasSubstr("Flags from ps-server:")) << help;
    EXPECT_THAT(r.output, HasSubstr("--memory_budget_mb")) << help;
    ::psdb::testing::ExpectNoBuildPaths(r.output, PSDB_SOURCE_DIR,
                                        BuiltBinary(""));
  }
  const ShellResult help =
      RunShell(absl::StrCat(BuiltBinary("tools/ps-server"), " --help"));
  EXPECT_THAT(help.output, HasSubstr("Flags from ps-server TLS:"));
  EXPECT_THAT(help.output,
              HasSubstr("Flags from ps-server cluster (PS_* variables):"));
}

TEST(PsServerBinaryTest, DryRunPrintsTheSettingsAndCreatesNothing) {
  ScratchDir dir;
  const std::string data_dir = dir.Sub("store");
  const ShellResult r = RunShell(
      absl::StrCat(::psdb::testing::CleanEnvPrefix(),
                   "PS_NODE_ID=s0 PS_SPEED=fast ",
                   BuiltBinary("tools/ps-server"), " --data_dir=", data_dir,
                   " --servers=h1:7000,h2:7000 --shard_id=1 --dry_run"),
      /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(
      r.output,
      absl::StrCat("ps-server --dry_run: training server, store ", data_dir,
                   "\n  listen 127.0.0.1:0, plaintext\n"
                   "  static cluster of 2 servers, this one shard 1\n"
                   "  sync_mode async, memory budget 1024 MiB, durability "
                   "checkpoint, metrics port -1\n"
                   "  PS_* read: PS_NODE_ID=s0\n"
                   "  PS_* ignored (not read by ps-server): PS_SPEED=fast\n"
                   "ps-server --dry_run: ok\n"));
  EXPECT_FALSE(std::filesystem::exists(data_dir));
}

TEST(PsServerBinaryTest, ABadFlagIsRefusedAndCreatesNothing) {
  ScratchDir dir;
  const std::string data_dir = dir.Sub("store");
  const ShellResult r = RunShell(absl::StrCat(BuiltBinary("tools/ps-server"),
                                              " --data_dir=", data_dir,
                                              " --sync_mode=sometimes"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "ps-server: INVALID_ARGUMENT: --sync_mode=sometimes: expected "
            "async or sync\n");
  EXPECT_FALSE(std::filesystem::exists(data_dir));
}

}  // namespace
}  // namespace psdb::tools
