// Real ps-scheduler processes: settings validation at start, cluster
// formation over loopback gRPC with the logged assignments, clean stop.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

ChildOptions SchedulerChild(std::map<std::string, std::string> env,
                            std::vector<std::string> args = {}) {
  ChildOptions o;
  o.binary = ::psdb::testing::BuiltBinary("tools/ps-scheduler");
  o.env = std::move(env);
  o.args = std::move(args);
  return o;
}

TEST(SchedulerProcessTest, MissingOrContradictorySettingsFailAtStart) {
  struct Case {
    std::map<std::string, std::string> env;
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"PS_SERVER_NUM", "2"}, {"PS_SCHED_PORT", "7100"}},
       {},
       "the scheduler needs PS_WORKER_NUM (--worker_num)"},
      {{{"PS_ROLE", "worker"},
        {"PS_SERVER_NUM", "1"},
        {"PS_WORKER_NUM", "1"},
        {"PS_SCHED_PORT", "7100"}},
       {},
       "PS_ROLE=worker contradicts this binary, which is the scheduler"},
      {{{"PS_SERVER_NUM", "1"}, {"PS_WORKER_NUM", "1"}},
       {"--sched_port=http"},
       "--sched_port=http: expected an integer in [1, 65535]"},
  };
  for (const Case& c : cases) {
    ASSERT_OK_AND_ASSIGN(auto child,
                         ChildProcess::Start(SchedulerChild(c.env, c.args)));
    ASSERT_OK_AND_ASSIGN(int status, child->Wait(absl::Seconds(60)));
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_THAT(child->Stderr(), HasSubstr(c.message));
  }
}

TEST(SchedulerProcessTest, FormsTheClusterLogsAssignmentsAndStopsCleanly) {
  const ReservedPort port;
  // Flags win: the environment says 5 servers, the flag 2.
  ChildOptions o =
      SchedulerChild({{"PS_SERVER_NUM", "5"},
                      {"PS_WORKER_NUM", "1"},
                      {"PS_SCHED_HOST", "127.0.0.1"},
                      {"PS_SCHED_PORT", absl::StrCat(port.port())}},
                     {"--server_num=2", "--heartbeat_interval_ms=100"});
  o.ready_prefix = "scheduler listening on ";
  ASSERT_OK_AND_ASSIGN(auto sched, ChildProcess::Start(o));
  EXPECT_EQ(sched->ready_value(), absl::StrCat("127.0.0.1:", port.port()));

  NodeConfig server_config;
  server_config.role = NodeRoleKind::kServer;
  server_config.sched_host = "127.0.0.1";
  server_config.sched_port = port.port();
  server_config.server_num = 2;
  // Two servers join concurrently; both block until the worker arrives.
  std::vector<absl::StatusOr<
      std::pair<std::unique_ptr<SchedulerClient>, ServerPlacement>>>
      joined(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      NodeConfig c = server_config;
      c.node_id = absl::StrCat("server-", i);
      joined[i] = JoinClusterAsServer(c, absl::StrCat("127.0.0.1:", 7001 + i),
                                      {}, absl::Seconds(60));
    });
  }
  SchedulerClientOptions so;
  so.address = sched->ready_value();
  ASSERT_OK_AND_ASSIGN(auto worker, SchedulerClient::Open(so));
  ASSERT_TRUE(WaitFor([&] {
    auto m = worker->GetClusterMap();
    return m.ok() && m->servers_size() == 2;
  }));
  v1::RegisterRequest wr;
  wr.set_node_id("worker-0");
  wr.set_role(v1::NODE_ROLE_WORKER);
  ASSERT_OK_AND_ASSIGN(auto reg, worker->Register(wr));
  EXPECT_EQ(reg.rank(), 0);
  for (auto& t : threads) t.join();
  int rank_sum = 0;
  for (auto& j : joined) {
    ASSERT_OK(j);
    EXPECT_EQ(j->second.cluster.epoch(), 1u);
    ASSERT_EQ(j->second.cluster.servers().size(), 2u);
    rank_sum += j->second.rank;
    EXPECT_EQ(j->second.cluster.servers()[j->second.rank].address,
              absl::StrCat("127.0.0.1:", 7001 + (&j - &joined[0])));
  }
  EXPECT_EQ(rank_sum, 1);

  // The map workers route with (no servers listen at these addresses here;
  // ClusterScriptTest opens a RemoteClient from a real cluster's map).
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, worker->GetClusterMap());
  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(map));
  EXPECT_EQ(routed.epoch(), 1u);
  EXPECT_EQ(routed.servers().size(), 2u);

  const std::string log = sched->Stderr();
  EXPECT_THAT(log, HasSubstr("addr:127.0.0.1:7001 assigned rank "));
  EXPECT_THAT(log, HasSubstr("server node id:server-"));
  EXPECT_THAT(log, HasSubstr("worker node id:worker-0 assigned rank 0"));
  EXPECT_THAT(log, HasSubstr("cluster ready: 2 servers, 1 worker, epoch 1"));

  sched->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int status, sched->Wait());
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_THAT(sched->Stderr(), HasSubstr("stopped cleanly"));
}

TEST(SchedulerProcessTest, KilledSchedulerRestartsFromItsRecoveryPath) {
  const ReservedPort port;
  ::psdb::testing::ScratchDir dir;
  ChildOptions o = SchedulerChild({{"PS_SERVER_NUM", "1"},
                                   {"PS_WORKER_NUM", "1"},
                                   {"PS_SCHED_PORT", absl::StrCat(port.port())},
                                   {"PS_ENABLE_RECOVERY", "1"},
                                   {"PS_RECOVERY_PATH", dir.path()}},
                                  {"--heartbeat_interval_ms=100"});
  o.ready_prefix = "scheduler listening on ";
  ASSERT_OK_AND_ASSIGN(auto sched, ChildProcess::Start(o));
  SchedulerClientOptions so;
  so.address = sched->ready_value();
  ASSERT_OK_AND_ASSIGN(auto server, SchedulerClient::Open(so));
  ASSERT_OK_AND_ASSIGN(auto worker, SchedulerClient::Open(so));
  v1::RegisterRequest sr;
  sr.set_node_id("server-0");
  sr.set_role(v1::NODE_ROLE_SERVER);
  sr.set_address("127.0.0.1:7001");
  ASSERT_OK(server->Register(sr));
  v1::RegisterRequest wr;
  wr.set_node_id("worker-0");
  wr.set_role(v1::NODE_ROLE_WORKER);
  ASSERT_OK(worker->Register(wr));
  server->StartHeartbeats();
  worker->StartHeartbeats();

  sched->Signal(SIGKILL);
  ASSERT_OK(sched->Wait());
  ASSERT_OK_AND_ASSIGN(auto restarted, ChildProcess::Start(o));
  EXPECT_THAT(restarted->Stderr(),
              HasSubstr("recovery: reloaded 1 servers and 1 workers from"));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, server->GetClusterMap());
  EXPECT_TRUE(map.ready());
  EXPECT_EQ(map.servers(0).node_id(), "server-0");
  EXPECT_EQ(map.workers(0).node_id(), "worker-0");
  // The nodes reconnect and beat on; nobody registers again.
  ASSERT_TRUE(WaitFor([&] {
    return server->map_version() == map.version() &&
           worker->map_version() == map.version();
  }));
  EXPECT_EQ(server->reregistrations(), 0);
  EXPECT_EQ(worker->reregistrations(), 0);
  server->StopHeartbeats();
  worker->StopHeartbeats();
}

}  // namespace
}  // namespace psdb::rpc
