// tools/cluster.sh on real processes: starts a serving-only cluster (1
// scheduler, 2 servers, 0 workers) with one log per process, serves through
// the scheduler's map, and stops everything cleanly; and the same with
// --etcd (a local etcd, 2 schedulers on it, servers given both).
#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/control/scheduler_client.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ReservedPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::ShellResult;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ClusterScriptTest, StartsServesAndStopsAServingOnlyCluster) {
  ScratchDir dir;
  const std::string script = absl::StrCat(PSDB_SOURCE_DIR, "/tools/cluster.sh");
  const std::string bin = ::psdb::testing::BuiltBinary("tools");
  const ReservedPort held;  // for the cluster's life
  const int port = held.port();
  const std::string common =
      absl::StrCat(" --dir ", dir.Sub("c"), " --bin ", bin);

  // A worker count without a worker command is refused at once.
  ShellResult bad =
      RunShell(absl::StrCat(script, " start --servers 1 --workers 2", common));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("needs the worker command after --"));

  ShellResult start = RunShell(absl::StrCat(
      script, " start --servers 2 --workers 0 --port ", port, common));
  ASSERT_EQ(start.exit_code, 0) << start.output;
  EXPECT_THAT(start.output,
              HasSubstr("cluster ready: 2 servers, 0 workers, epoch 1"));
  const std::string sched_log = ReadFile(dir.Sub("c/logs/scheduler.log"));
  EXPECT_THAT(sched_log, HasSubstr("server node id:server-0 addr:127.0.0.1:"));
  EXPECT_THAT(sched_log, HasSubstr("server node id:server-1 addr:127.0.0.1:"));

  // Clients find the servers through the scheduler.
  ASSERT_OK_AND_ASSIGN(
      auto client, OpenSchedulerRemoteClient(absl::StrCat("127.0.0.1:", port),
                                             {}, absl::Seconds(60)));
  TableSpec spec;
  spec.name = "serving";
  spec.dim = 2;
  ASSERT_OK(client->CreateTable(spec));
  std::vector<uint64_t> keys = {1, 2, 3, 1000, 99999};
  std::vector<float> out(keys.size() * 2);
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(client->Pull("serving", keys, absl::MakeSpan(out), serving));

  ShellResult status = RunShell(absl::StrCat(script, " status", common));
  EXPECT_THAT(status.output, HasSubstr("server-1 pid"));
  EXPECT_THAT(status.output, HasSubstr("running"));

  ShellResult stop = RunShell(absl::StrCat(script, " stop", common));
  ASSERT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_THAT(stop.output, HasSubstr("cluster.sh: stopped"));
  EXPECT_THAT(ReadFile(dir.Sub("c/logs/server_0.log")),
              HasSubstr("stopped cleanly"));
  EXPECT_THAT(ReadFile(dir.Sub("c/logs/server_1.log")),
              HasSubstr("stopped cleanly"));
  EXPECT_THAT(ReadFile(dir.Sub("c/logs/scheduler.log")),
              HasSubstr("stopped cleanly"));
  EXPECT_NE(access(dir.Sub("c/pids").c_str(), F_OK), 0);
}

// --etcd: etcd on loopback, two ps-schedulers sharing its state, servers that
// know both (PS_SCHED_ADDRESSES).
TEST(ClusterScriptTest, StartsAnEtcdBackedClusterWithTwoSchedulers) {
  ScratchDir dir;
  const std::string script = absl::StrCat(PSDB_SOURCE_DIR, "/tools/cluster.sh");
  const std::string bin = ::psdb::testing::BuiltBinary("tools");
  // --port and --port+1, both held for the cluster's life.
  std::unique_ptr<ReservedPort> first, second;
  for (int tries = 0; tries < 20; ++tries) {
    first = std::make_unique<ReservedPort>();
    second = std::make_unique<ReservedPort>(ReservedPort::Scope::kLoopback,
                                            first->port() + 1);
    if (second->port() != 0) break;
  }
  ASSERT_NE(second->port(), 0) << "no two adjacent free loopback ports";
  const int port = first->port();
  const std::string common =
      absl::StrCat(" --dir ", dir.Sub("c"), " --bin ", bin);

  ShellResult start =
      RunShell(absl::StrCat(script,
                            " start --etcd --cluster script-test --servers 2 "
                            "--workers 0 --port ",
                            port, common));
  ASSERT_EQ(start.exit_code, 0)
      << start.output << "\nscheduler_0.log:\n"
      << ReadFile(dir.Sub("c/logs/scheduler_0.log")) << "\nserver_0.log:\n"
      << ReadFile(dir.Sub("c/logs/server_0.log"));
  EXPECT_THAT(start.output, HasSubstr("etcd serving on 127.0.0.1:"));
  // The epoch is the etcd revision the ring was written at.
  EXPECT_THAT(start.output,
              HasSubstr("cluster ready: 2 servers, 0 workers, epoch "));
  EXPECT_THAT(ReadFile(dir.Sub("c/logs/etcd.log")),
              HasSubstr("ready to serve client requests"));
  EXPECT_EQ(access(dir.Sub("c/etcd/member").c_str(), F_OK), 0);

  // Every scheduler answers: the map through the second one serves too.
  for (int p : {port, port + 1}) {
    ASSERT_OK_AND_ASSIGN(
        auto client, OpenSchedulerRemoteClient(absl::StrCat("127.0.0.1:", p),
                                               {}, absl::Seconds(60)));
    TableSpec spec;
    spec.name = absl::StrCat("serving", p);
    spec.dim = 2;
    ASSERT_OK(client->CreateTable(spec));
    std::vector<uint64_t> keys = {1, 2, 3, 1000, 99999};
    std::vector<float> out(keys.size() * 2);
    PullOptions serving;
    serving.serving = true;
    ASSERT_OK(client->Pull(spec.name, keys, absl::MakeSpan(out), serving));
  }

  ShellResult status = RunShell(absl::StrCat(script, " status", common));
  EXPECT_THAT(status.output, HasSubstr("scheduler-1 pid"));
  EXPECT_THAT(status.output, HasSubstr("etcd pid"));
  EXPECT_THAT(status.output, ::testing::Not(HasSubstr("exited")));

  ShellResult stop = RunShell(absl::StrCat(script, " stop", common));
  ASSERT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_THAT(stop.output, HasSubstr("cluster.sh: stopped"));
  for (const char* log :
       {"server_0", "server_1", "scheduler_0", "scheduler_1"}) {
    EXPECT_THAT(ReadFile(dir.Sub(absl::StrCat("c/logs/", log, ".log"))),
                HasSubstr("stopped cleanly"))
        << log;
  }
  EXPECT_NE(access(dir.Sub("c/pids").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace psdb::rpc
