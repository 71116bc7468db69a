// EtcdScheduler: two or three SchedulerServers in this process sharing one
// real etcd (EtcdCluster on loopback), driven through their backends and
// over loopback gRPC. What one scheduler wrote, every other one serves.
#include "rpc/control/etcd_scheduler.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "rpc/wire/cluster_map_proto.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/rpc/control/etcd_cluster.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::EtcdCluster;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

v1::RegisterRequest Req(absl::string_view id, v1::NodeRole role,
                        absl::string_view addr = "", uint64_t incarnation = 0) {
  v1::RegisterRequest r;
  r.set_node_id(std::string(id));
  r.set_role(role);
  r.set_address(std::string(addr));
  r.set_incarnation(incarnation);
  return r;
}

class EtcdSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = EtcdCluster::Start(1);
    ASSERT_OK(etcd);
    etcd_ = *std::move(etcd);
  }

  SchedulerOptions Options(int servers, int workers) {
    SchedulerOptions options;
    options.server_num = servers;
    options.worker_num = workers;
    options.etcd_endpoints = etcd_->endpoint_list();
    options.cluster = "test";
    options.heartbeat_interval = absl::Milliseconds(200);
    options.lease_ttl = absl::Seconds(2);
    options.log = [this](absl::string_view line) {
      absl::MutexLock lock(&mu_);
      log_.emplace_back(line);
    };
    return options;
  }

  std::unique_ptr<SchedulerServer> Start(int servers, int workers) {
    auto s = SchedulerServer::Start(Options(servers, workers));
    EXPECT_OK(s);
    return s.ok() ? *std::move(s) : nullptr;
  }

  bool Logged(absl::string_view needle) {
    absl::MutexLock lock(&mu_);
    for (const std::string& l : log_) {
      if (absl::StrContains(l, needle)) return true;
    }
    return false;
  }

  std::unique_ptr<EtcdCluster> etcd_;
  absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
};

TEST_F(EtcdSchedulerTest, TwoSchedulersFormOneClusterWithUniqueRanks) {
  auto a = Start(3, 2);
  auto b = Start(3, 2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // Servers and workers register concurrently, alternating schedulers.
  std::vector<std::thread> threads;
  std::vector<int> server_ranks(3, -1), worker_ranks(2, -1);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      SchedulerBackend* s = (i % 2 == 0 ? a : b)->backend();
      auto r = s->Register(Req(absl::StrCat("s", i), v1::NODE_ROLE_SERVER,
                               absl::StrCat("127.0.0.1:", 9000 + i)),
                           absl::Now());
      ASSERT_OK(r);
      server_ranks[i] = r->rank();
    });
  }
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      SchedulerBackend* s = (i % 2 == 0 ? b : a)->backend();
      auto r = s->Register(Req(absl::StrCat("w", i), v1::NODE_ROLE_WORKER),
                           absl::Now());
      ASSERT_OK(r);
      worker_ranks[i] = r->rank();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<int>(server_ranks.begin(), server_ranks.end()),
            (std::set<int>{0, 1, 2}));
  EXPECT_EQ(std::set<int>(worker_ranks.begin(), worker_ranks.end()),
            (std::set<int>{0, 1}));
  // Both serve the same ready map, at the same epoch (the ring's revision).
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap ma, a->backend()->WaitReady(
                                              absl::Now() + absl::Seconds(10)));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap mb, b->backend()->WaitReady(
                                              absl::Now() + absl::Seconds(10)));
  EXPECT_TRUE(ma.ready());
  EXPECT_GT(ma.epoch(), 0u);
  EXPECT_EQ(ma.SerializeAsString(), mb.SerializeAsString());
  ASSERT_EQ(ma.servers_size(), 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ma.servers(r).rank(), r);
    EXPECT_EQ(
        ma.servers(r).address(),
        absl::StrCat("127.0.0.1:",
                     9000 + std::stoi(ma.servers(r).node_id().substr(1))));
    EXPECT_EQ(ma.servers(r).state(), v1::NODE_STATE_ALIVE);
  }
  EXPECT_TRUE(Logged("cluster ready: 3 servers, 2 workers, epoch"));
  // All ranks taken: one more is refused by either scheduler.
  EXPECT_THAT(
      b->backend()->Register(Req("s9", v1::NODE_ROLE_SERVER, "127.0.0.1:9999"),
                             absl::Now()),
      StatusIs(absl::StatusCode::kResourceExhausted));
  // Exactly one leads; the other names it.
  ASSERT_TRUE(WaitFor([&] {
    return a->backend()->Status().leader() != b->backend()->Status().leader();
  }));
  v1::SchedulerStatus sa = a->backend()->Status();
  v1::SchedulerStatus sb = b->backend()->Status();
  EXPECT_TRUE(sa.healthy());
  EXPECT_EQ(sa.backend(), "etcd");
  EXPECT_EQ(sa.leader_address(), sb.leader_address());
  EXPECT_EQ(sa.leader_address(), sa.leader() ? a->address() : b->address());
}

TEST_F(EtcdSchedulerTest, ConcurrentRegistrationsNeverShareARank) {
  constexpr int kServers = 8;
  auto a = Start(kServers, 0);
  auto b = Start(kServers, 0);
  std::vector<std::thread> threads;
  std::vector<int> ranks(kServers + 4, -1);
  std::atomic<int> refused{0};
  for (int i = 0; i < kServers + 4; ++i) {  // 4 too many
    threads.emplace_back([&, i] {
      auto r = (i % 2 == 0 ? a : b)
                   ->backend()
                   ->Register(Req(absl::StrCat("s", i), v1::NODE_ROLE_SERVER,
                                  absl::StrCat("10.0.0.", i, ":1")),
                              absl::Now());
      if (r.ok()) {
        ranks[i] = r->rank();
      } else {
        EXPECT_THAT(r, StatusIs(absl::StatusCode::kResourceExhausted));
        ++refused;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::multiset<int> given;
  for (int r : ranks) {
    if (r >= 0) given.insert(r);
  }
  EXPECT_EQ(refused.load(), 4);
  ASSERT_EQ(given.size(), static_cast<size_t>(kServers));
  for (int r = 0; r < kServers; ++r) EXPECT_EQ(given.count(r), 1u) << r;
}

TEST_F(EtcdSchedulerTest, OneAddressGoesToOneServerEvenInARace) {
  auto a = Start(3, 0);
  auto b = Start(3, 0);
  // Eight servers race for one address through two schedulers.
  std::atomic<int> won{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = (i % 2 == 0 ? a : b)
                   ->backend()
                   ->Register(Req(absl::StrCat("s", i), v1::NODE_ROLE_SERVER,
                                  "10.0.0.1:7000"),
                              absl::Now());
      if (r.ok()) {
        ++won;
      } else {
        EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));
        EXPECT_THAT(r.status().message(), HasSubstr("already used"));
        ++refused;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(refused.load(), 7);
}

TEST_F(EtcdSchedulerTest, ExpiredLeaseMarksDeadAndTheNodeTakesItsRankBack) {
  auto a = Start(2, 0);
  auto b = Start(2, 0);
  SchedulerBackend* sa = a->backend();
  SchedulerBackend* sb = b->backend();
  ASSERT_OK(
      sa->Register(Req("s0", v1::NODE_ROLE_SERVER, "h:1", 11), absl::Now()));
  ASSERT_OK_AND_ASSIGN(
      v1::RegisterResponse s1,
      sb->Register(Req("s1", v1::NODE_ROLE_SERVER, "h:2", 22), absl::Now()));
  // The same process again (a lost answer): the same rank, not a refusal.
  ASSERT_OK_AND_ASSIGN(
      v1::RegisterResponse again,
      sa->Register(Req("s1", v1::NODE_ROLE_SERVER, "h:2", 22), absl::Now()));
  EXPECT_EQ(again.rank(), s1.rank());
  EXPECT_FALSE(again.recovered());
  // Another process with that id while it lives: refused.
  EXPECT_THAT(
      sa->Register(Req("s1", v1::NODE_ROLE_SERVER, "h:3", 33), absl::Now()),
      StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap ready,
                       sa->WaitReady(absl::Now() + absl::Seconds(10)));
  // s0 keeps beating through either scheduler; s1 falls silent.
  ASSERT_TRUE(WaitFor(
      [&] {
        EXPECT_OK(sb->Heartbeat("s0", absl::Now()));
        auto map = sa->CurrentMap();
        return map.ok() &&
               map->servers(s1.rank()).state() == v1::NODE_STATE_DEAD;
      },
      absl::Seconds(30)));
  // The scheduler that marked it logs after its etcd transaction, which
  // the map may show first.
  EXPECT_TRUE(WaitFor([&] {
    return Logged("node id:s1 addr:h:2 rank " + std::to_string(s1.rank()) +
                  " marked dead");
  }));
  EXPECT_THAT(sa->Heartbeat("s1", absl::Now()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(sa->Heartbeat("nobody", absl::Now()),
              StatusIs(absl::StatusCode::kNotFound));
  // It comes back at a new address: its rank, the same epoch.
  ASSERT_OK_AND_ASSIGN(
      v1::RegisterResponse back,
      sb->Register(Req("s1", v1::NODE_ROLE_SERVER, "h:4", 44), absl::Now()));
  EXPECT_EQ(back.rank(), s1.rank());
  EXPECT_TRUE(back.recovered());
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap after, sa->CurrentMap());
  ASSERT_OK_AND_ASSIGN(uint64_t beat_version, sb->Heartbeat("s1", absl::Now()));
  EXPECT_EQ(beat_version, after.version());
  EXPECT_EQ(after.epoch(), ready.epoch());
  EXPECT_GT(after.version(), ready.version());
  EXPECT_EQ(after.servers(s1.rank()).address(), "h:4");
  // Its new address is now claimed by it.
  EXPECT_THAT(sa->Register(Req("s9", v1::NODE_ROLE_SERVER, "h:4"), absl::Now()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(after.servers(s1.rank()).state(), v1::NODE_STATE_ALIVE);
}

TEST_F(EtcdSchedulerTest, BarrierAndStepClockSpanSchedulersAndSurviveThem) {
  auto a = Start(1, 2);
  auto b = Start(1, 2);
  ASSERT_OK(a->backend()->Register(Req("s0", v1::NODE_ROLE_SERVER, "h:1"),
                                   absl::Now()));
  ASSERT_OK(
      a->backend()->Register(Req("w0", v1::NODE_ROLE_WORKER), absl::Now()));
  ASSERT_OK(
      b->backend()->Register(Req("w1", v1::NODE_ROLE_WORKER), absl::Now()));
  const absl::Time far = absl::Now() + absl::Seconds(30);
  // w0 waits in scheduler a; w1 arrives through b: both released.
  std::thread w0(
      [&] { EXPECT_OK(a->backend()->Barrier("init", "w0", 1, far)); });
  EXPECT_OK(b->backend()->Barrier("init", "w1", 1, far));
  w0.join();
  // A call re-sent after release (same sequence) returns at once.
  EXPECT_OK(a->backend()->Barrier("init", "w0", 1, absl::Now()));
  EXPECT_THAT(a->backend()->Barrier("init", "w0", 0, far),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Timing out names who did not arrive.
  absl::Status late = a->backend()->Barrier(
      "init", "w0", 2, absl::Now() + absl::Milliseconds(300));
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(late.message(),
            "barrier 'init' timed out for node id:w0; not arrived: worker "
            "rank 1 (node id:w1)");

  // w0 finishes step 3 through a; a goes away; w1 through a third
  // scheduler finds w0's clock in etcd.
  ASSERT_OK_AND_ASSIGN(int64_t slowest,
                       a->backend()->StepClock("w0", 3, 5, far));
  EXPECT_EQ(slowest, 0);
  a->Shutdown();
  auto c = Start(1, 2);
  ASSERT_OK_AND_ASSIGN(slowest, c->backend()->StepClock("w1", 3, 0, far));
  EXPECT_EQ(slowest, 3);
  // Lock-step: w0 at 4 waits for w1's 4.
  std::thread w0_step([&] {
    auto r = b->backend()->StepClock("w0", 4, 0, far);
    EXPECT_OK(r);
    if (r.ok()) {
      EXPECT_EQ(*r, 4);
    }
  });
  ASSERT_OK_AND_ASSIGN(slowest, c->backend()->StepClock("w1", 4, 0, far));
  EXPECT_EQ(slowest, 4);
  w0_step.join();
  EXPECT_THAT(c->backend()->StepClock("w1", 2, 0, far),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<int64_t> behind = c->backend()->StepClock(
      "w1", 9, 1, absl::Now() + absl::Milliseconds(300));
  EXPECT_THAT(behind, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(behind.status().message(),
            "step clock: node id:w1 finished step 9 and may run at most 1 "
            "steps ahead; waiting for step 8 of: worker rank 0 (node id:w0, "
            "finished 4)");
}

TEST_F(EtcdSchedulerTest, AStandbyLeadsWhenTheLeaderGoes) {
  auto a = Start(1, 0);
  ASSERT_TRUE(WaitFor([&] { return a->backend()->Status().leader(); }));
  auto b = Start(1, 0);
  ASSERT_TRUE(WaitFor([&] { return Logged("standing by"); }));
  EXPECT_FALSE(b->backend()->Status().leader());
  a->Shutdown();  // revokes its lease: b leads without waiting for the TTL
  ASSERT_TRUE(WaitFor([&] { return b->backend()->Status().leader(); },
                      absl::Seconds(10)));
  EXPECT_EQ(b->backend()->Status().leader_address(), b->address());
}

TEST_F(EtcdSchedulerTest, OtherCountsForTheSameClusterAreRefused) {
  auto a = Start(2, 1);
  auto other = SchedulerServer::Start(Options(3, 1));
  EXPECT_THAT(other, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(other.status().message(), HasSubstr("server_num=2 worker_num=1"));
}

TEST_F(EtcdSchedulerTest, EtcdDownMakesTheSchedulerUnhealthyAndSaysWhy) {
  auto a = Start(1, 0);
  grpc::ClientContext ctx;
  auto stub = v1::SchedulerService::NewStub(
      grpc::CreateChannel(a->address(), grpc::InsecureChannelCredentials()));
  v1::SchedulerStatus status;
  ASSERT_TRUE(stub->GetStatus(&ctx, {}, &status).ok());
  EXPECT_TRUE(status.healthy());
  etcd_->Kill(0);
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub->GetStatus(&ctx2, {}, &status).ok());
  EXPECT_FALSE(status.healthy());
  EXPECT_THAT(status.reason(), HasSubstr(etcd_->endpoints()));
}

TEST(EtcdSchedulerThreeMembersTest, LosingOneEtcdMemberChangesNothing) {
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start(3));
  SchedulerOptions options;
  options.server_num = 2;
  options.etcd_endpoints = etcd->endpoint_list();
  options.lease_ttl = absl::Seconds(2);
  options.heartbeat_interval = absl::Milliseconds(200);
  options.log = [](absl::string_view) {};
  ASSERT_OK_AND_ASSIGN(auto a, SchedulerServer::Start(options));
  ASSERT_OK(a->backend()->Register(Req("s0", v1::NODE_ROLE_SERVER, "h:1"),
                                   absl::Now()));
  etcd->Kill(0);
  ASSERT_OK(a->backend()->Register(Req("s1", v1::NODE_ROLE_SERVER, "h:2"),
                                   absl::Now()));
  ASSERT_OK_AND_ASSIGN(
      v1::ClusterMap map,
      a->backend()->WaitReady(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(map.servers_size(), 2);
  EXPECT_OK(a->backend()->Heartbeat("s0", absl::Now()));
  EXPECT_TRUE(a->backend()->Status().healthy());
}

// Live resharding's membership in etcd: a join takes a new rank and is
// JOINING (every scheduler sees it); publishing an add or a drain rewrites
// the ring at a new epoch (its revision) only from the expected epoch; a
// drained rank is never given again; a standby refuses to run a migration.
TEST_F(EtcdSchedulerTest, JoinAddAndDrainRewriteTheRingAtNewEpochs) {
  auto a = Start(2, 0);
  auto b = Start(2, 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  SchedulerBackend* A = a->backend();
  SchedulerBackend* B = b->backend();
  v1::RegisterRequest early = Req("s9", v1::NODE_ROLE_SERVER, "127.0.0.1:7009");
  early.set_join(true);
  EXPECT_THAT(A->Register(early, absl::Now()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(A->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7000"),
                        absl::Now()));
  ASSERT_OK(B->Register(Req("s1", v1::NODE_ROLE_SERVER, "127.0.0.1:7001"),
                        absl::Now()));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap formed, A->CurrentMap());
  ASSERT_TRUE(formed.ready());
  const uint64_t e1 = formed.epoch();

  v1::RegisterRequest join = Req("s2", v1::NODE_ROLE_SERVER, "127.0.0.1:7002");
  join.set_join(true);
  ASSERT_OK_AND_ASSIGN(v1::RegisterResponse joined,
                       B->Register(join, absl::Now()));
  EXPECT_EQ(joined.rank(), 2);
  EXPECT_TRUE(
      Logged("server node id:s2 addr:127.0.0.1:7002 joining as rank 2"));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap with_joiner, A->CurrentMap());
  EXPECT_EQ(with_joiner.epoch(), e1);
  EXPECT_EQ(with_joiner.server_num(), 2);
  ASSERT_EQ(with_joiner.servers_size(), 3);
  EXPECT_EQ(with_joiner.servers(2).node_id(), "s2");
  EXPECT_EQ(with_joiner.servers(2).state(), v1::NODE_STATE_JOINING);
  EXPECT_THAT(A->Register(Req("s3", v1::NODE_ROLE_SERVER, "127.0.0.1:7003"),
                          absl::Now()),
              StatusIs(absl::StatusCode::kResourceExhausted));

  ASSERT_OK_AND_ASSIGN(
      MembershipPlan plan,
      A->PlanMembershipChange({MembershipChange::Kind::kAdd, "s2"}));
  EXPECT_EQ(plan.current.epoch(), e1);
  EXPECT_EQ(plan.target.server_num(), 3);
  EXPECT_THAT(
      A->PublishMembershipChange({MembershipChange::Kind::kAdd, "s2"}, e1 + 1),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(
      v1::ClusterMap added,
      A->PublishMembershipChange({MembershipChange::Kind::kAdd, "s2"}, e1));
  const uint64_t e2 = added.epoch();
  EXPECT_GT(e2, e1);
  EXPECT_EQ(added.server_num(), 3);
  EXPECT_EQ(added.servers(2).state(), v1::NODE_STATE_ALIVE);
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap seen_by_b, B->CurrentMap());
  EXPECT_EQ(seen_by_b.epoch(), e2);
  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(seen_by_b));
  EXPECT_EQ(routed.ring().num_servers(), 3u);

  ASSERT_OK_AND_ASSIGN(
      v1::ClusterMap drained,
      B->PublishMembershipChange({MembershipChange::Kind::kDrain, "s0"}, e2));
  EXPECT_GT(drained.epoch(), e2);
  EXPECT_EQ(drained.server_num(), 2);
  ASSERT_EQ(drained.servers_size(), 2);
  EXPECT_EQ(drained.servers(0).node_id(), "s1");
  EXPECT_THAT(A->Heartbeat("s0", absl::Now()),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(A->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7000"),
                          absl::Now()),
              StatusIs(absl::StatusCode::kResourceExhausted));
  v1::RegisterRequest rejoin =
      Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:7000");
  rejoin.set_join(true);
  ASSERT_OK_AND_ASSIGN(v1::RegisterResponse again,
                       A->Register(rejoin, absl::Now()));
  EXPECT_EQ(again.rank(), 3);  // rank 0 is retired

  // Only the leader runs a migration.
  ASSERT_TRUE(
      WaitFor([&] { return A->Status().leader() != B->Status().leader(); }));
  SchedulerServer* standby = A->Status().leader() ? b.get() : a.get();
  auto channel = grpc::CreateChannel(standby->address(),
                                     grpc::InsecureChannelCredentials());
  grpc::ClientContext ctx;
  v1::DrainServerRequest req;
  req.set_node_id("s1");
  v1::MembershipChangeResponse resp;
  const grpc::Status refused =
      v1::SchedulerService::NewStub(channel)->DrainServer(&ctx, req, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("standby"));
}

}  // namespace
}  // namespace psdb::rpc
