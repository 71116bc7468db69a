// Recovery of a killed server on real processes: 1 ps-scheduler, 2
// ps-servers (sync mode), 2 workers. After step 2 the workers write a
// cluster checkpoint; server rank 1 is killed with SIGKILL; the workers'
// calls fail with retriable errors (not hangs); the server is restarted with
// the same node id and address, takes its rank back and reopens its shard
// from the latest cluster checkpoint; the workers re-pull and train steps 3
// and 4. The final rows equal those of a cluster restarted from the same
// checkpoint that trains steps 3 and 4 without any kill.
//
// Run twice: with the scheduler's state in its process, and with it in a
// real etcd (ps-scheduler --etcd, leases of 2 s: the killed server's lease
// expires, the leader marks it dead, and it takes its rank back from etcd).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/cluster_checkpoint.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "tests/rpc/control/etcd_cluster.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::EtcdCluster;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

constexpr int kDim = 2;

std::vector<uint64_t> Keys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 40; ++k) keys.push_back(k * 104729 + 3);
  return keys;
}

std::vector<float> Grads(int worker, int step) {
  std::vector<float> g(Keys().size() * kDim);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = 0.25f * static_cast<float>((i * 3 + worker * 7 + step) % 9) - 1.0f;
  }
  return g;
}

struct Cluster {
  // Set: the scheduler keeps its state in this etcd.
  const EtcdCluster* etcd = nullptr;
  const ReservedPort sched_port;  // held for the processes' life
  std::unique_ptr<ChildProcess> sched;
  std::vector<std::unique_ptr<ChildProcess>> servers;
  std::vector<std::string> server_args[2];
  std::vector<std::unique_ptr<SchedulerClient>> workers;
  std::vector<int> rank;
  std::vector<std::unique_ptr<RemoteClient>> clients;
};

absl::StatusOr<std::unique_ptr<ChildProcess>> StartServer(const Cluster& c,
                                                          int s) {
  ChildOptions so =
      ClusterServerOptions(c.sched_port.port(), absl::StrCat("server-", s), "");
  so.args = c.server_args[s];  // --data_dir and the rest, as the test asks
  return ChildProcess::Start(so);
}

// Scheduler, two workers registered, two servers started with `args(s)`.
void StartCluster(const std::function<std::vector<std::string>(int)>& args,
                  Cluster* c) {
  ChildOptions o = PsSchedulerOptions(c->sched_port.port(), 2, 2);
  o.args = {"--heartbeat_interval_ms=100", "--heartbeat_timeout_ms=1000"};
  if (c->etcd != nullptr) {
    o.args.push_back(absl::StrCat("--etcd=", c->etcd->endpoints()));
    o.args.push_back(absl::StrCat("--cluster=c", c->sched_port.port()));
    o.args.push_back("--lease_ttl_s=2");
  }
  ASSERT_OK_AND_ASSIGN(c->sched, ChildProcess::Start(o));
  for (int w = 0; w < 2; ++w) {
    SchedulerClientOptions so;
    so.address = c->sched->ready_value();
    ASSERT_OK_AND_ASSIGN(auto client, SchedulerClient::Open(so));
    v1::RegisterRequest r;
    r.set_node_id(absl::StrCat("worker-", w));
    r.set_role(v1::NODE_ROLE_WORKER);
    ASSERT_OK_AND_ASSIGN(auto reg, client->Register(r));
    c->rank.push_back(reg.rank());
    client->StartHeartbeats();
    c->workers.push_back(std::move(client));
  }
  for (int s = 0; s < 2; ++s) c->server_args[s] = args(s);
  std::vector<absl::StatusOr<std::unique_ptr<ChildProcess>>> started(2);
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s) {
    threads.emplace_back([&, s] { started[s] = StartServer(*c, s); });
  }
  for (auto& t : threads) t.join();
  for (auto& s : started) {
    ASSERT_OK(s);
    c->servers.push_back(*std::move(s));
  }
  for (int w = 0; w < 2; ++w) {
    RemoteClientOptions ro;
    ro.push_to_every_server = true;
    ro.call_timeout = absl::Seconds(5);
    ASSERT_OK_AND_ASSIGN(auto client,
                         OpenSchedulerRemoteClient(c->sched->ready_value(), ro,
                                                   absl::Seconds(60)));
    c->clients.push_back(std::move(client));
  }
}

// One BSP step: both workers push, then both pass the step clock.
void Step(Cluster* c, int step) {
  const std::vector<uint64_t> keys = Keys();
  for (int w = 0; w < 2; ++w) {
    PushOptions p;
    p.step = step;
    p.worker_id = c->rank[w];
    ASSERT_OK(c->clients[w]->Push("emb", keys, Grads(c->rank[w], step), p));
  }
  absl::Status other;
  std::thread t([&] {
    other = c->workers[0]->StepClock(step, 0, absl::Seconds(60)).status();
  });
  ASSERT_OK(c->workers[1]->StepClock(step, 0, absl::Seconds(60)));
  t.join();
  ASSERT_OK(other);
}

std::vector<float> PullAll(Cluster* c) {
  std::vector<float> out(Keys().size() * kDim);
  EXPECT_OK(c->clients[0]->Pull("emb", Keys(), absl::MakeSpan(out), {}));
  return out;
}

class ServerRecoveryTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      auto etcd = EtcdCluster::Start(1);
      ASSERT_OK(etcd);
      etcd_ = *std::move(etcd);
    }
  }
  std::unique_ptr<EtcdCluster> etcd_;
};

INSTANTIATE_TEST_SUITE_P(Backends, ServerRecoveryTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Etcd" : "InProcess";
                         });

TEST_P(ServerRecoveryTest, KilledServerTakesItsRankBackFromTheCheckpoint) {
  ScratchDir dir;
  const std::string root = dir.Sub("ckpt");
  // Held through the kill, so the restarted server gets its port back.
  const ReservedPort ports[2];
  Cluster a;
  a.etcd = etcd_.get();
  ASSERT_NO_FATAL_FAILURE(StartCluster(
      [&](int s) -> std::vector<std::string> {
        return {absl::StrCat("--data_dir=", dir.Sub(absl::StrCat("a", s))),
                absl::StrCat("--port=", ports[s].port()), "--sync_mode=sync",
                "--threads=2"};
      },
      &a));
  TableSpec spec;
  spec.name = "emb";
  spec.dim = kDim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  ASSERT_OK(a.clients[0]->CreateTable(spec));
  ASSERT_NO_FATAL_FAILURE(Step(&a, 1));
  ASSERT_NO_FATAL_FAILURE(Step(&a, 2));
  const std::vector<float> at_checkpoint = PullAll(&a);
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, a.workers[0]->GetClusterMap());
  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(map));
  ASSERT_OK_AND_ASSIGN(ClusterCheckpointInfo ckpt,
                       WriteClusterCheckpoint(routed, root, 2));

  // Kill the server of rank 1.
  int victim = 0;
  for (int s = 0; s < 2; ++s) {
    if (a.servers[s]->ready_value() == map.servers(1).address()) victim = s;
  }
  a.servers[victim]->Signal(SIGKILL);
  ASSERT_OK(a.servers[victim]->Wait());
  // Calls fail within their deadline with a retriable code.
  std::vector<float> out(Keys().size() * kDim);
  absl::Status failed =
      a.clients[1]->Pull("emb", Keys(), absl::MakeSpan(out), {});
  EXPECT_TRUE(absl::IsUnavailable(failed) || absl::IsDeadlineExceeded(failed))
      << failed;
  // The scheduler marks it dead and tells the others.
  ASSERT_TRUE(WaitFor([&] {
    auto m = a.workers[0]->GetClusterMap();
    return m.ok() && m->servers(1).state() == v1::NODE_STATE_DEAD;
  }));

  // Restart: same node id and address, a fresh data dir restored from the
  // latest cluster checkpoint under the root.
  a.server_args[victim] = {
      absl::StrCat("--data_dir=", dir.Sub(absl::StrCat("a", victim, "-new"))),
      absl::StrCat("--port=", ports[victim].port()), "--sync_mode=sync",
      "--threads=2", absl::StrCat("--restore_from=", root)};
  ASSERT_OK_AND_ASSIGN(a.servers[victim], StartServer(a, victim));
  EXPECT_THAT(a.servers[victim]->Stderr(), HasSubstr("rank 1 of 2 servers"));
  EXPECT_THAT(a.servers[victim]->Stderr(), HasSubstr("(rank taken back)"));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap back, a.workers[0]->GetClusterMap());
  EXPECT_EQ(back.servers(1).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(back.epoch(), map.epoch());
  if (!GetParam()) EXPECT_EQ(back.epoch(), 1u);
  // Workers resume after re-pulling (the channel reconnects).
  ASSERT_TRUE(WaitFor([&] {
    std::vector<float> o(Keys().size() * kDim);
    return a.clients[0]->Pull("emb", Keys(), absl::MakeSpan(o), {}).ok() &&
           a.clients[1]->Pull("emb", Keys(), absl::MakeSpan(o), {}).ok();
  }));
  ASSERT_NO_FATAL_FAILURE(Step(&a, 3));
  ASSERT_NO_FATAL_FAILURE(Step(&a, 4));
  const std::vector<float> killed = PullAll(&a);

  // Reference: a fresh cluster restored from the same checkpoint, no kill.
  Cluster b;
  b.etcd = etcd_.get();
  ASSERT_NO_FATAL_FAILURE(StartCluster(
      [&](int s) -> std::vector<std::string> {
        return {absl::StrCat("--data_dir=", dir.Sub(absl::StrCat("b", s))),
                "--sync_mode=sync", "--threads=2",
                absl::StrCat("--restore_from=", ckpt.path)};
      },
      &b));
  ASSERT_NO_FATAL_FAILURE(Step(&b, 3));
  ASSERT_NO_FATAL_FAILURE(Step(&b, 4));
  const std::vector<float> reference = PullAll(&b);
  EXPECT_EQ(killed, reference);
  EXPECT_NE(killed, at_checkpoint);  // steps 3 and 4 did train
}

}  // namespace
}  // namespace psdb::rpc
