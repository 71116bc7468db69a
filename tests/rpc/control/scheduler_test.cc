// SchedulerServer in-process, driven by SchedulerClient over loopback gRPC.
#include "rpc/control/scheduler.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SchedulerTest : public ::testing::Test {
 protected:
  void StartScheduler(int servers, int workers,
                      absl::Duration interval = absl::Milliseconds(100),
                      absl::Duration timeout = absl::Seconds(10),
                      const std::string& recovery_path = "", int port = 0) {
    SchedulerOptions options;
    options.recovery_path = recovery_path;
    options.port = port;
    options.server_num = servers;
    options.worker_num = workers;
    options.heartbeat_interval = interval;
    options.heartbeat_timeout = timeout;
    options.log = [this](absl::string_view line) {
      absl::MutexLock lock(&mu_);
      log_.emplace_back(line);
    };
    auto s = SchedulerServer::Start(options);
    ASSERT_OK(s);
    sched_ = *std::move(s);
  }

  std::unique_ptr<SchedulerClient> Client() {
    SchedulerClientOptions options;
    options.address = sched_->address();
    options.call_timeout = absl::Seconds(20);
    auto c = SchedulerClient::Open(options);
    EXPECT_OK(c);
    return *std::move(c);
  }

  static v1::RegisterRequest Req(absl::string_view id, v1::NodeRole role,
                                 absl::string_view addr = "") {
    v1::RegisterRequest r;
    r.set_node_id(std::string(id));
    r.set_role(role);
    r.set_address(std::string(addr));
    return r;
  }

  std::vector<std::string> Log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  bool Logged(absl::string_view needle) {
    for (const std::string& l : Log()) {
      if (absl::StrContains(l, needle)) return true;
    }
    return false;
  }

  std::unique_ptr<SchedulerServer> sched_;
  absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
};

TEST_F(SchedulerTest, AssignsRanksAndPublishesTheMapWhenComplete) {
  StartScheduler(2, 2);
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap empty, c->GetClusterMap());
  EXPECT_FALSE(empty.ready());
  EXPECT_EQ(empty.epoch(), 0u);

  ASSERT_OK_AND_ASSIGN(
      auto s0, c->Register(Req("sA", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  EXPECT_EQ(s0.rank(), 0);
  EXPECT_FALSE(s0.map().ready());
  EXPECT_EQ(s0.heartbeat_interval_ms(), 100);
  EXPECT_EQ(s0.heartbeat_timeout_ms(), 10000);
  auto w = Client();
  ASSERT_OK_AND_ASSIGN(auto w0, w->Register(Req("wA", v1::NODE_ROLE_WORKER)));
  EXPECT_EQ(w0.rank(), 0);
  ASSERT_OK_AND_ASSIGN(
      auto s1,
      Client()->Register(Req("sB", v1::NODE_ROLE_SERVER, "127.0.0.1:7002")));
  EXPECT_EQ(s1.rank(), 1);

  // Not ready yet: a bounded wait says who is missing.
  auto not_ready = c->GetClusterMap(absl::Milliseconds(50));
  EXPECT_THAT(not_ready, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(std::string(not_ready.status().message()),
              HasSubstr("2 of 2 servers and 1 of 2 workers registered"));

  // A waiter is released by the last registration.
  absl::StatusOr<v1::ClusterMap> waited;
  std::thread waiter(
      [&] { waited = Client()->GetClusterMap(absl::Seconds(30)); });
  ASSERT_OK_AND_ASSIGN(auto w1,
                       Client()->Register(Req("wB", v1::NODE_ROLE_WORKER)));
  EXPECT_EQ(w1.rank(), 1);
  EXPECT_TRUE(w1.map().ready());
  waiter.join();
  ASSERT_OK(waited);
  EXPECT_TRUE(waited->ready());
  EXPECT_EQ(waited->epoch(), 1u);
  ASSERT_EQ(waited->servers_size(), 2);
  EXPECT_EQ(waited->servers(0).node_id(), "sA");
  EXPECT_EQ(waited->servers(0).address(), "127.0.0.1:7001");
  EXPECT_EQ(waited->servers(1).node_id(), "sB");
  EXPECT_EQ(waited->servers(1).state(), v1::NODE_STATE_ALIVE);
  ASSERT_EQ(waited->workers_size(), 2);
  EXPECT_EQ(waited->workers(1).node_id(), "wB");
  EXPECT_EQ(waited->workers(1).rank(), 1);

  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(*waited));
  EXPECT_EQ(routed.epoch(), 1u);
  ASSERT_EQ(routed.servers().size(), 2u);
  EXPECT_EQ(routed.servers()[0].address, "127.0.0.1:7001");
  EXPECT_EQ(routed.servers()[0].node_id, "sA");
  EXPECT_EQ(routed.servers()[1].address, "127.0.0.1:7002");
  EXPECT_EQ(routed.servers()[1].state, ServerState::kAlive);

  EXPECT_THAT(
      Log(),
      ElementsAre("server node id:sA addr:127.0.0.1:7001 assigned rank 0",
                  "worker node id:wA assigned rank 0",
                  "server node id:sB addr:127.0.0.1:7002 assigned rank 1",
                  "worker node id:wB assigned rank 1",
                  "cluster ready: 2 servers, 2 workers, epoch 1"));
}

TEST_F(SchedulerTest, ServingOnlyClusterIsReadyWithItsServers) {
  StartScheduler(1, 0);
  auto c = Client();
  ASSERT_OK_AND_ASSIGN(
      auto r, c->Register(Req("s", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  EXPECT_TRUE(r.map().ready());
  EXPECT_TRUE(Logged("cluster ready: 1 server, 0 workers, epoch 1"));
  EXPECT_THAT(Client()->Register(Req("w", v1::NODE_ROLE_WORKER)),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST_F(SchedulerTest, RefusesLiveDuplicatesExtrasAndContradictions) {
  StartScheduler(1, 1);
  auto c = Client();
  ASSERT_OK(c->Register(Req("s", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  auto dup =
      Client()->Register(Req("s", v1::NODE_ROLE_SERVER, "127.0.0.1:7009"));
  EXPECT_THAT(dup, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(
      std::string(dup.status().message()),
      HasSubstr("server node id:s is alive (rank 0, addr:127.0.0.1:7001"));
  EXPECT_THAT(
      Client()->Register(Req("s2", v1::NODE_ROLE_SERVER, "127.0.0.1:7002")),
      StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Client()->Register(Req("s", v1::NODE_ROLE_WORKER)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Client()->Register(Req("nameless", v1::NODE_ROLE_SERVER)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Client()->Register(Req("bad id", v1::NODE_ROLE_WORKER)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  v1::RegisterRequest counts = Req("w", v1::NODE_ROLE_WORKER);
  counts.set_worker_num(3);
  auto contradiction = Client()->Register(counts);
  EXPECT_THAT(contradiction, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(contradiction.status().message()),
              HasSubstr("has PS_WORKER_NUM=3 but the scheduler has 1"));
  counts.set_worker_num(1);
  counts.set_server_num(1);
  EXPECT_OK(Client()->Register(counts));
}

TEST_F(SchedulerTest, SilentNodeIsMarkedDeadAndTakesItsRankBack) {
  StartScheduler(2, 1, absl::Milliseconds(50), absl::Seconds(1));
  auto beating = Client();
  ASSERT_OK(
      beating->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  beating->StartHeartbeats();
  auto worker = Client();
  ASSERT_OK(worker->Register(Req("w0", v1::NODE_ROLE_WORKER)));
  worker->StartHeartbeats();
  auto silent = Client();  // registers, never beats
  ASSERT_OK(
      silent->Register(Req("s1", v1::NODE_ROLE_SERVER, "127.0.0.1:7002")));
  const uint64_t version_before = worker->map_version();

  ASSERT_TRUE(WaitFor([&] {
    auto m = beating->GetClusterMap();
    return m.ok() && m->servers(1).state() == v1::NODE_STATE_DEAD;
  }));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, beating->GetClusterMap());
  EXPECT_EQ(map.servers(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(map.workers(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(map.epoch(), 1u);  // death moves no keys
  EXPECT_TRUE(
      Logged("server node id:s1 addr:127.0.0.1:7002 rank 1 marked "
             "dead: no heartbeat for"));
  // The others are told: their beats return the new map version.
  EXPECT_TRUE(WaitFor([&] { return worker->map_version() > version_before; }));
  EXPECT_THAT(silent->Heartbeat(),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  // A restarted node with the same id (new address) takes rank 1 back.
  ASSERT_OK_AND_ASSIGN(
      auto back,
      Client()->Register(Req("s1", v1::NODE_ROLE_SERVER, "127.0.0.1:7003")));
  EXPECT_EQ(back.rank(), 1);
  EXPECT_TRUE(back.recovered());
  EXPECT_EQ(back.map().servers(1).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(back.map().servers(1).address(), "127.0.0.1:7003");
  EXPECT_EQ(back.map().epoch(), 1u);
  EXPECT_TRUE(
      Logged("server node id:s1 addr:127.0.0.1:7003 took back rank 1 "
             "(recovered)"));
}

TEST_F(SchedulerTest, HeartbeatThreadRejoinsAfterBeingMarkedDead) {
  StartScheduler(1, 0, absl::Milliseconds(50), absl::Milliseconds(300));
  auto c = Client();
  ASSERT_OK(c->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  ASSERT_TRUE(WaitFor([&] {
    return c->GetClusterMap()->servers(0).state() == v1::NODE_STATE_DEAD;
  }));
  c->StartHeartbeats();
  ASSERT_TRUE(WaitFor([&] { return c->reregistrations() == 1; }));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, c->GetClusterMap());
  EXPECT_EQ(map.servers(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(map.servers(0).rank(), 0);
  c->StopHeartbeats();
}

TEST_F(SchedulerTest, BarrierReleasesAllWorkersTogetherRepeatedly) {
  StartScheduler(1, 3);
  auto server = Client();
  ASSERT_OK(server->Register(Req("s", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  std::vector<std::unique_ptr<SchedulerClient>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(Client());
    ASSERT_OK(workers.back()->Register(
        Req(absl::StrCat("w", i), v1::NODE_ROLE_WORKER)));
  }
  for (int round = 0; round < 3; ++round) {
    std::vector<absl::Status> results(3);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        results[i] = workers[i]->Barrier("epoch-end", absl::Seconds(30));
      });
    }
    for (auto& t : threads) t.join();
    for (const absl::Status& s : results) EXPECT_OK(s);
  }
  // Only workers take part.
  EXPECT_THAT(server->Barrier("epoch-end", absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Client()->Barrier("epoch-end", absl::Seconds(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(SchedulerTest, BarrierDeadlineNamesWhoDidNotArrive) {
  StartScheduler(1, 3);
  ASSERT_OK(
      Client()->Register(Req("s", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  auto w0 = Client();
  auto w1 = Client();
  ASSERT_OK(w0->Register(Req("w0", v1::NODE_ROLE_WORKER)));
  ASSERT_OK(w1->Register(Req("w1", v1::NODE_ROLE_WORKER)));
  // w2 never registers; w1 registers but does not come.
  absl::Status s = w0->Barrier("sync", absl::Milliseconds(300));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(s.message(),
            "barrier 'sync' timed out for node id:w0; not arrived: worker rank "
            "1 (node id:w1), worker rank 2 (not registered)");
  // The timed-out caller left: a later full barrier still works.
  auto w2 = Client();
  ASSERT_OK(w2->Register(Req("w2", v1::NODE_ROLE_WORKER)));
  absl::Status r1, r2;
  std::thread t1([&] { r1 = w1->Barrier("sync", absl::Seconds(30)); });
  std::thread t2([&] { r2 = w2->Barrier("sync", absl::Seconds(30)); });
  EXPECT_OK(w0->Barrier("sync", absl::Seconds(30)));
  t1.join();
  t2.join();
  EXPECT_OK(r1);
  EXPECT_OK(r2);
}

TEST_F(SchedulerTest, StepClockBoundsHowFarAFastWorkerRunsAhead) {
  constexpr int kStaleness = 2;
  constexpr int kSteps = 12;
  StartScheduler(1, 2);
  ASSERT_OK(
      Client()->Register(Req("s", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  auto fast = Client();
  auto slow = Client();
  ASSERT_OK(fast->Register(Req("fast", v1::NODE_ROLE_WORKER)));
  ASSERT_OK(slow->Register(Req("slow", v1::NODE_ROLE_WORKER)));

  // The fast worker never waits for compute; after finishing step s it asks
  // the clock for leave to start s + 1.
  std::atomic<int> fast_finished{0};
  std::atomic<bool> bound_held{true};
  std::thread runner([&] {
    for (int s = 1; s <= kSteps; ++s) {
      fast_finished.store(s);
      auto slowest = fast->StepClock(s, kStaleness, absl::Seconds(60));
      if (!slowest.ok() || *slowest < s - kStaleness) bound_held = false;
    }
  });
  // The slow worker is driven by the test, one step at a time: at each of
  // its steps the fast one gets exactly kStaleness + 1 steps ahead (it has
  // finished that step and waits) and no further.
  for (int slow_step = 0; slow_step + kStaleness + 1 <= kSteps; ++slow_step) {
    if (slow_step > 0) {
      ASSERT_OK_AND_ASSIGN(
          int64_t slowest,
          slow->StepClock(slow_step, kStaleness, absl::Seconds(60)));
      EXPECT_EQ(slowest, slow_step);
    }
    ASSERT_TRUE(WaitFor(
        [&] { return fast_finished.load() == slow_step + kStaleness + 1; }));
    // It stays there: give it a moment to overrun if the bound were broken.
    EXPECT_FALSE(WaitFor(
        [&] { return fast_finished.load() > slow_step + kStaleness + 1; },
        absl::Milliseconds(100)));
  }
  ASSERT_OK(slow->StepClock(kSteps, kStaleness, absl::Seconds(60)));
  runner.join();
  EXPECT_TRUE(bound_held.load());

  // A deadline names the worker behind.
  auto late = fast->StepClock(kSteps + 5, kStaleness, absl::Milliseconds(100));
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(std::string(late.status().message()),
              HasSubstr("waiting for step 15 of: worker rank 1 (node id:slow, "
                        "finished 12)"));
  // Clocks never go back.
  EXPECT_THAT(slow->StepClock(3, kStaleness, absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A second scheduler on a port one already serves does not start (gRPC
// would otherwise share the port, and nodes reach either at random); the
// first goes on serving.
TEST_F(SchedulerTest, ASecondSchedulerOnItsPortIsRefusedNotShared) {
  StartScheduler(1, 0);
  SchedulerOptions options;
  options.port = sched_->port();
  options.server_num = 1;
  options.worker_num = 0;
  options.log = [](absl::string_view) {};
  auto second = SchedulerServer::Start(options);
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:",
                                     sched_->port(), " (address in use")));
  ASSERT_OK(
      Client()->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
}

TEST_F(SchedulerTest, RestartedSchedulerReloadsMembershipAndNodesCarryOn) {
  ScratchDir dir;
  StartScheduler(1, 1, absl::Milliseconds(50), absl::Seconds(5), dir.path());
  const int port = sched_->port();
  auto server = Client();
  auto worker = Client();
  ASSERT_OK(
      server->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7001")));
  ASSERT_OK(worker->Register(Req("w0", v1::NODE_ROLE_WORKER)));
  server->StartHeartbeats();
  worker->StartHeartbeats();
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap before, server->GetClusterMap());
  ASSERT_TRUE(before.ready());

  // The scheduler goes away and comes back on the same port.
  sched_->Shutdown();
  sched_.reset();
  StartScheduler(1, 1, absl::Milliseconds(50), absl::Seconds(5), dir.path(),
                 port);
  EXPECT_TRUE(Logged("recovery: reloaded 1 servers and 1 workers from"));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap after, server->GetClusterMap());
  EXPECT_TRUE(after.ready());
  EXPECT_EQ(after.epoch(), 1u);
  EXPECT_EQ(after.servers(0).node_id(), "s0");
  EXPECT_EQ(after.servers(0).address(), "127.0.0.1:7001");
  EXPECT_EQ(after.workers(0).node_id(), "w0");
  // The running nodes beat on without registering again.
  const uint64_t v = after.version();
  ASSERT_TRUE(WaitFor([&] {
    return server->map_version() == v && worker->map_version() == v;
  }));
  EXPECT_EQ(server->reregistrations(), 0);
  EXPECT_EQ(worker->reregistrations(), 0);
  // Their ids are alive: a second process with one is refused.
  EXPECT_THAT(
      Client()->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7009")),
      StatusIs(absl::StatusCode::kAlreadyExists));
  server->StopHeartbeats();
  worker->StopHeartbeats();

  // A scheduler with other counts refuses the saved membership.
  SchedulerOptions other;
  other.server_num = 2;
  other.worker_num = 1;
  other.recovery_path = dir.path();
  other.log = [](absl::string_view) {};
  auto refused = SchedulerServer::Start(other);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("holds a cluster of 1 servers and 1 workers"));
}

}  // namespace
}  // namespace psdb::rpc
