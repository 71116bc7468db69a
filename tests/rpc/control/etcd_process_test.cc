// The control plane on etcd with real processes: ps-scheduler --etcd,
// ps-server, and a real etcd (EtcdCluster), all on loopback.
#include <signal.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/etcd_client.h"
#include "rpc/control/scheduler_client.h"
#include "tests/rpc/control/etcd_cluster.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildOptions;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ClusterServerOptions;
using ::psdb::testing::EtcdCluster;
using ::psdb::testing::PsSchedulerOptions;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::RunShell;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

// ps-scheduler on `port` keeping cluster `name` in `etcd`.
ChildOptions EtcdScheduler(const EtcdCluster& etcd, int port, int servers,
                           int workers, const std::string& name) {
  ChildOptions o = PsSchedulerOptions(port, servers, workers);
  o.args = {"--heartbeat_interval_ms=200",
            absl::StrCat("--etcd=", etcd.endpoints()),
            absl::StrCat("--cluster=", name), "--lease_ttl_s=2"};
  return o;
}

// ps-server `node_id` knowing every scheduler of `sched_addresses`.
ChildOptions Server(const std::string& sched_addresses,
                    const std::string& node_id, const std::string& data_dir,
                    std::vector<std::string> extra = {}) {
  ChildOptions o = ClusterServerOptions(0, node_id, data_dir, std::move(extra));
  o.env.erase("PS_SCHED_HOST");
  o.env.erase("PS_SCHED_PORT");
  o.env["PS_SCHED_ADDRESSES"] = sched_addresses;
  return o;
}

// Two ps-schedulers on one etcd cluster `name`; ready_value()s joined.
struct Schedulers {
  std::vector<std::unique_ptr<ReservedPort>> ports;  // held for their life
  std::vector<std::unique_ptr<ChildProcess>> procs;
  std::string addresses;
  // Index of the one whose log says it leads, or -1.
  int Leader() const {
    for (size_t i = 0; i < procs.size(); ++i) {
      if (procs[i] != nullptr &&
          procs[i]->Stderr().find("leading cluster") != std::string::npos) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
};

absl::StatusOr<Schedulers> StartSchedulers(const EtcdCluster& etcd, int servers,
                                           int workers,
                                           const std::string& name) {
  Schedulers s;
  for (int i = 0; i < 2; ++i) {
    s.ports.push_back(std::make_unique<ReservedPort>());
    PSDB_ASSIGN_OR_RETURN(
        std::unique_ptr<ChildProcess> p,
        ChildProcess::Start(EtcdScheduler(etcd, s.ports.back()->port(), servers,
                                          workers, name)));
    s.addresses += (i == 0 ? "" : ",") + p->ready_value();
    s.procs.push_back(std::move(p));
  }
  return s;
}

std::string Health(int port) {
  return absl::StrCat(BuiltBinary("tools/ps-scheduler"),
                      " --health --sched_port=", port);
}

TEST(EtcdProcessTest, EtcdDownFailsTheHealthCheckButServersKeepServing) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  ScratchDir dir;
  const ReservedPort held;
  const int port = held.port();
  ASSERT_OK_AND_ASSIGN(
      auto sched, ChildProcess::Start(EtcdScheduler(*etcd, port, 1, 0, "hc")));
  ASSERT_OK_AND_ASSIGN(auto server, ChildProcess::Start(ClusterServerOptions(
                                        port, "server-0", dir.Sub("s0"))));
  psdb::testing::ShellResult ok = RunShell(Health(port));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("healthy: scheduler"));
  EXPECT_THAT(ok.output, HasSubstr("etcd cluster 'hc', leader"));

  RemoteClientOptions options;
  options.call_timeout = absl::Seconds(5);
  ASSERT_OK_AND_ASSIGN(auto client,
                       OpenSchedulerRemoteClient(sched->ready_value(), options,
                                                 absl::Seconds(60)));
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 2;
  spec.initializer.kind = InitKind::kZeros;
  spec.optimizer.learning_rate = 0.5f;
  ASSERT_OK(client->CreateTable(spec));
  const std::vector<uint64_t> keys = {1, 2, 3};
  const std::vector<float> grads = {1, 1, 2, 2, 3, 3};
  ASSERT_OK(client->Push("emb", keys, grads, {}));

  etcd->Kill(0);
  psdb::testing::ShellResult down = RunShell(Health(port));
  EXPECT_EQ(down.exit_code, 1) << down.output;
  EXPECT_THAT(down.output, HasSubstr("unhealthy"));
  EXPECT_THAT(down.output, HasSubstr(etcd->endpoints()));
  // The data plane does not go through etcd: pushes and pulls go on.
  for (int i = 0; i < 3; ++i) ASSERT_OK(client->Push("emb", keys, grads, {}));
  std::vector<float> rows(6);
  ASSERT_OK(client->Pull("emb", keys, absl::MakeSpan(rows), {}));
  // SGD from zero rows: four pushes of g at rate 0.5 give -2g.
  EXPECT_EQ(rows, (std::vector<float>{-2, -2, -4, -4, -6, -6}));
  EXPECT_EQ(kill(server->pid(), 0), 0) << "ps-server exited without etcd";
}

TEST(EtcdProcessTest, ThreeServersAndTwoWorkersFormThroughTwoSchedulers) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(Schedulers sched,
                       StartSchedulers(*etcd, 3, 2, "formation"));
  // Each server and worker names the schedulers in its own order.
  const std::string reversed = absl::StrCat(sched.procs[1]->ready_value(), ",",
                                            sched.procs[0]->ready_value());
  std::vector<std::unique_ptr<ChildProcess>> servers(3);
  std::vector<std::unique_ptr<ClusterWorker>> workers(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto p = ChildProcess::Start(
          Server(i % 2 == 0 ? sched.addresses : reversed,
                 absl::StrCat("server-", i), dir.Sub(absl::StrCat("s", i))));
      ASSERT_OK(p);
      servers[i] = *std::move(p);
    });
  }
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      ClusterWorkerOptions o;
      o.scheduler = w == 0 ? sched.addresses : reversed;
      o.node_id = absl::StrCat("worker-", w);
      o.wait_ready = absl::Seconds(60);
      auto joined = ClusterWorker::Join(o);
      ASSERT_OK(joined);
      workers[w] = *std::move(joined);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_NE(workers[0], nullptr);
  ASSERT_NE(workers[1], nullptr);
  EXPECT_EQ(std::set<int>({workers[0]->rank(), workers[1]->rank()}),
            (std::set<int>{0, 1}));
  std::set<std::string> server_lines;
  for (const auto& s : servers) {
    ASSERT_NE(s, nullptr);
    const std::string log = s->Stderr();
    for (int r = 0; r < 3; ++r) {
      if (log.find(absl::StrCat("rank ", r, " of 3 servers")) !=
          std::string::npos) {
        server_lines.insert(absl::StrCat(r));
      }
    }
  }
  EXPECT_EQ(server_lines, (std::set<std::string>{"0", "1", "2"}));
  // Every node's scheduler serves the same map at the same epoch.
  std::set<uint64_t> epochs;
  for (const auto& p : sched.procs) {
    SchedulerClientOptions o;
    o.address = p->ready_value();
    ASSERT_OK_AND_ASSIGN(auto client, SchedulerClient::Open(o));
    ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, client->GetClusterMap());
    EXPECT_TRUE(map.ready());
    EXPECT_EQ(map.servers_size(), 3);
    epochs.insert(map.epoch());
  }
  for (const auto& w : workers) {
    epochs.insert(static_cast<RemoteClient*>(w->client())->epoch());
  }
  EXPECT_EQ(epochs.size(), 1u);
  EXPECT_GT(*epochs.begin(), 0u);
  // One leads, the other stands by.
  EXPECT_NE(sched.Leader(), -1);
  EXPECT_TRUE(sched.procs[1 - sched.Leader()]->Stderr().find("standing by") !=
              std::string::npos);
}

constexpr int kDim = 4;
constexpr int kSteps = 8;

std::vector<uint64_t> Keys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 64; ++k) keys.push_back(k * 7919 + 11);
  return keys;
}

std::vector<float> Grads(int rank, int step) {
  std::vector<float> g(Keys().size() * kDim);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = 0.125f * static_cast<float>((i * 5 + rank * 3 + step) % 11) - 0.5f;
  }
  return g;
}

// A synchronous 2-worker, 2-server run of kSteps steps through two
// schedulers; with `kill_after` > 0 the leading scheduler is SIGKILLed once
// both workers finished that step. Returns every row at the end.
void SyncRun(const EtcdCluster& etcd, const std::string& name, int kill_after,
             std::vector<float>* rows) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(Schedulers sched, StartSchedulers(etcd, 2, 2, name));
  ASSERT_TRUE(WaitFor([&] { return sched.Leader() != -1; }));
  // Nodes name the leader first: their calls go to it until it dies.
  const int first = sched.Leader();
  sched.addresses = absl::StrCat(sched.procs[first]->ready_value(), ",",
                                 sched.procs[1 - first]->ready_value());
  // Servers become ready with the cluster, so all four start together.
  std::vector<std::unique_ptr<ChildProcess>> servers(2);
  std::vector<std::unique_ptr<ClusterWorker>> workers(2);
  {
    std::vector<std::thread> joins;
    for (int i = 0; i < 2; ++i) {
      joins.emplace_back([&, i] {
        auto p = ChildProcess::Start(
            Server(sched.addresses, absl::StrCat("server-", i),
                   dir.Sub(absl::StrCat("s", i)), {"--sync_mode=sync"}));
        ASSERT_OK(p);
        servers[i] = *std::move(p);
      });
    }
    for (int w = 0; w < 2; ++w) {
      joins.emplace_back([&, w] {
        ClusterWorkerOptions o;
        o.scheduler = sched.addresses;
        o.node_id = absl::StrCat("worker-", w);
        o.wait_ready = absl::Seconds(60);
        o.step_timeout = absl::Seconds(60);
        o.remote.call_timeout = absl::Seconds(10);
        auto joined = ClusterWorker::Join(o);
        ASSERT_OK(joined);
        workers[w] = *std::move(joined);
      });
    }
    for (auto& t : joins) t.join();
  }
  ASSERT_NE(workers[0], nullptr);
  ASSERT_NE(workers[1], nullptr);
  TableSpec spec;
  spec.name = "emb";
  spec.dim = kDim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  ASSERT_OK(workers[0]->client()->CreateTable(spec));
  // With a kill: worker 0 runs into step kill_after + 1's step clock (its
  // call goes to the leader and waits there for worker 1), worker 1 holds
  // back until the leader is dead; worker 0's call must be re-sent to the
  // standby and both finish every step.
  std::atomic<int> done[2] = {0, 0};
  std::atomic<bool> in_clock{false}, killed{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      ClusterWorker& worker = *workers[w];
      for (int step = 1; step <= kSteps; ++step) {
        if (kill_after > 0 && w == 1 && step == kill_after + 1) {
          ASSERT_TRUE(
              WaitFor([&] { return killed.load(); }, absl::Seconds(120)));
        }
        PushOptions p;
        p.step = step;
        p.worker_id = worker.rank();
        ASSERT_OK(worker.client()->Push("emb", Keys(),
                                        Grads(worker.rank(), step), p));
        if (w == 0 && step == kill_after + 1) in_clock = true;
        ASSERT_OK(worker.AfterStep(step));
        done[w] = step;
      }
    });
  }
  if (kill_after > 0) {
    ASSERT_TRUE(
        WaitFor([&] { return done[1] >= kill_after && in_clock.load(); },
                absl::Seconds(120)));
    // Worker 0's step clock call has reached a scheduler (its clock is in
    // etcd) and waits there for worker 1.
    EtcdOptions eo;
    eo.endpoints = etcd.endpoint_list();
    ASSERT_OK_AND_ASSIGN(auto reader, EtcdClient::Open(eo));
    const std::string clock_key =
        absl::StrCat("/psdb/", name, "/clocks/worker-0");
    ASSERT_TRUE(WaitFor([&] {
      auto kv = reader->Get(clock_key);
      return kv.ok() && kv->has_value() &&
             (*kv)->value == absl::StrCat(kill_after + 1);
    }));
    const int leader = sched.Leader();
    ASSERT_EQ(leader, first);
    sched.procs[leader]->Signal(SIGKILL);
    ASSERT_OK(sched.procs[leader]->Wait());
    sched.procs[leader].reset();
    killed = true;
    // The standby leads once the dead leader's lease ends.
    ASSERT_TRUE(WaitFor([&] { return sched.Leader() == 1 - leader; },
                        absl::Seconds(60)));
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done[0], kSteps);
  EXPECT_EQ(done[1], kSteps);
  rows->assign(Keys().size() * kDim, 0.0f);
  ASSERT_OK(
      workers[0]->client()->Pull("emb", Keys(), absl::MakeSpan(*rows), {}));
}

TEST(EtcdProcessTest, KillingTheLeadingSchedulerLosesNoStep) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(1));
  std::vector<float> reference, killed;
  ASSERT_NO_FATAL_FAILURE(SyncRun(*etcd, "reference", 0, &reference));
  ASSERT_NO_FATAL_FAILURE(SyncRun(*etcd, "killed", 3, &killed));
  // Bit-identical: no step lost, no push applied twice.
  EXPECT_EQ(killed, reference);
  EXPECT_NE(reference, std::vector<float>(reference.size(), 0.0f));
}

}  // namespace
}  // namespace psdb::rpc
