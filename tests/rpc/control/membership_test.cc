// Membership changes on the in-process scheduler: joining servers, the
// plan (validation) and publication of add and drain, ranks retired, the
// drained server's heartbeats, recovery of all of it; and through the
// service: AddServer / DrainServer validation, a migration aborted by a
// server that does not answer (the map unchanged), a drained server's
// client that stops beating, ps-server --join's NodeConfig.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/admin_membership.h"
#include "rpc/control/node_config.h"
#include "rpc/control/scheduler.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/wire/cluster_map_proto.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

v1::RegisterRequest Server(absl::string_view id, int port, bool join = false) {
  v1::RegisterRequest r;
  r.set_node_id(std::string(id));
  r.set_role(v1::NODE_ROLE_SERVER);
  r.set_address(absl::StrCat("127.0.0.1:", port));
  r.set_join(join);
  return r;
}

v1::RegisterRequest Worker(absl::string_view id) {
  v1::RegisterRequest r;
  r.set_node_id(std::string(id));
  r.set_role(v1::NODE_ROLE_WORKER);
  return r;
}

MembershipChange Add(absl::string_view id) {
  return {MembershipChange::Kind::kAdd, std::string(id)};
}
MembershipChange Drain(absl::string_view id) {
  return {MembershipChange::Kind::kDrain, std::string(id)};
}

class MembershipTest : public ::testing::Test {
 protected:
  SchedulerOptions Options(const std::string& recovery_path = "") {
    SchedulerOptions o;
    o.server_num = 2;
    o.worker_num = 1;
    o.heartbeat_interval = absl::Milliseconds(100);
    o.heartbeat_timeout = absl::Seconds(1);
    o.recovery_path = recovery_path;
    o.log = [this](absl::string_view line) {
      absl::MutexLock lock(&mu_);
      log_.emplace_back(line);
    };
    return o;
  }

  // A ready cluster: s0 (rank 0), s1 (rank 1), w0.
  void Form(Scheduler* s) {
    ASSERT_OK(s->Register(Server("s0", 7000), kT0));
    ASSERT_OK(s->Register(Server("s1", 7001), kT0));
    ASSERT_OK(s->Register(Worker("w0"), kT0));
    ASSERT_EQ(s->Map().epoch(), 1u);
  }

  bool Logged(absl::string_view needle) {
    absl::MutexLock lock(&mu_);
    for (const std::string& l : log_) {
      if (absl::StrContains(l, needle)) return true;
    }
    return false;
  }

  absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
};

const v1::NodeEntry* Find(const v1::ClusterMap& map, absl::string_view id) {
  for (const v1::NodeEntry& e : map.servers()) {
    if (e.node_id() == id) return &e;
  }
  return nullptr;
}

TEST_F(MembershipTest, JoinBeforeReadyIsRefused) {
  Scheduler s(Options());
  ASSERT_OK(s.Register(Server("s0", 7000), kT0));
  auto r = s.Register(Server("s9", 7009, /*join=*/true), kT0);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not ready"));
  EXPECT_EQ(s.Map().servers_size(), 1);
}

TEST_F(MembershipTest, JoinGetsTheNextRankAsJoiningOffTheRing) {
  Scheduler s(Options());
  Form(&s);
  const v1::ClusterMap before = s.Map();
  ASSERT_OK_AND_ASSIGN(auto reg, s.Register(Server("s2", 7002, true), kT0));
  EXPECT_EQ(reg.rank(), 2);
  EXPECT_FALSE(reg.recovered());
  const v1::ClusterMap after = s.Map();
  EXPECT_EQ(after.epoch(), 1u);
  EXPECT_GT(after.version(), before.version());
  EXPECT_EQ(after.server_num(), 2);  // s2 is not on the ring
  EXPECT_EQ(after.next_server_rank(), 3);
  ASSERT_EQ(after.servers_size(), 3);
  EXPECT_EQ(after.servers(2).state(), v1::NODE_STATE_JOINING);
  EXPECT_TRUE(
      Logged("server node id:s2 addr:127.0.0.1:7002 joining as rank 2"));

  // The routing map: s2 is kJoining and owns no key.
  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(after));
  ASSERT_NE(routed.Find(2), nullptr);
  EXPECT_EQ(routed.Find(2)->state, ServerState::kJoining);
  EXPECT_EQ(routed.ring().num_servers(), 2u);
  for (uint64_t k = 0; k < 1000; ++k) EXPECT_NE(routed.Owner(k), 2);

  // A joining server that goes silent stays JOINING (never on the ring)
  // and takes its rank back.
  EXPECT_THAT(s.CheckHeartbeats(kT0 + absl::Seconds(5)),
              ::testing::Contains("s2"));
  EXPECT_EQ(Find(s.Map(), "s2")->state(), v1::NODE_STATE_JOINING);
  ASSERT_OK_AND_ASSIGN(
      auto back, s.Register(Server("s2", 7002, true), kT0 + absl::Seconds(6)));
  EXPECT_EQ(back.rank(), 2);
  EXPECT_TRUE(back.recovered());
}

TEST_F(MembershipTest, NewServerWithoutJoinIsRefusedOnceReady) {
  Scheduler s(Options());
  Form(&s);
  auto r = s.Register(Server("s5", 7005), kT0);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--join"));
  // A worker may not join.
  v1::RegisterRequest w = Worker("w9");
  w.set_join(true);
  EXPECT_THAT(s.Register(w, kT0), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(MembershipTest, PlanValidatesTheChange) {
  Scheduler s(Options());
  Form(&s);
  ASSERT_OK(s.Register(Server("s2", 7002, true), kT0));

  EXPECT_THAT(s.PlanMembershipChange(Add("nobody")),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(s.PlanMembershipChange(Add("s0")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(s.PlanMembershipChange(Drain("s2")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(s.PlanMembershipChange(Drain("w0")),
              StatusIs(absl::StatusCode::kNotFound));

  ASSERT_OK_AND_ASSIGN(MembershipPlan add, s.PlanMembershipChange(Add("s2")));
  EXPECT_EQ(add.current.epoch(), 1u);
  EXPECT_EQ(add.target.epoch(), 0u);
  EXPECT_TRUE(add.target.ready());
  EXPECT_EQ(add.target.server_num(), 3);
  EXPECT_EQ(Find(add.target, "s2")->state(), v1::NODE_STATE_ALIVE);
  ASSERT_OK_AND_ASSIGN(MembershipPlan drain,
                       s.PlanMembershipChange(Drain("s1")));
  EXPECT_EQ(drain.target.server_num(), 1);
  EXPECT_EQ(Find(drain.target, "s1"), nullptr);
  EXPECT_EQ(drain.target.servers_size(), 2);  // s0 and joining s2
  // Planning changes nothing.
  EXPECT_EQ(s.Map().epoch(), 1u);
  EXPECT_EQ(Find(s.Map(), "s2")->state(), v1::NODE_STATE_JOINING);

  // A dead server on the ring: no migration (its rows cannot move).
  ASSERT_OK(s.Heartbeat("s0", kT0 + absl::Seconds(3)));
  ASSERT_OK(s.Heartbeat("s2", kT0 + absl::Seconds(3)));
  ASSERT_OK(s.Heartbeat("w0", kT0 + absl::Seconds(3)));
  EXPECT_THAT(s.CheckHeartbeats(kT0 + absl::Seconds(3)),
              ::testing::ElementsAre("s1"));
  auto dead = s.PlanMembershipChange(Add("s2"));
  EXPECT_THAT(dead, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(
      std::string(dead.status().message()),
      HasSubstr("server node id:s1 addr:127.0.0.1:7001 rank 1 is dead"));

  // A joining server that missed its heartbeats cannot be added.
  ASSERT_OK(s.Register(Server("s1", 7001), kT0 + absl::Seconds(4)));
  ASSERT_OK(s.Heartbeat("s0", kT0 + absl::Seconds(6)));
  ASSERT_OK(s.Heartbeat("s1", kT0 + absl::Seconds(6)));
  s.CheckHeartbeats(kT0 + absl::Seconds(6));
  EXPECT_THAT(s.PlanMembershipChange(Add("s2")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(MembershipTest, LastServerCannotBeDrained) {
  SchedulerOptions o = Options();
  o.server_num = 1;
  o.worker_num = 0;
  Scheduler s(o);
  ASSERT_OK(s.Register(Server("s0", 7000), kT0));
  auto r = s.PlanMembershipChange(Drain("s0"));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("last server"));
}

TEST_F(MembershipTest, PublishAddPutsTheServerOnTheRingAtANewEpoch) {
  Scheduler s(Options());
  Form(&s);
  ASSERT_OK(s.Register(Server("s2", 7002, true), kT0));
  // A stale epoch publishes nothing.
  EXPECT_THAT(s.PublishMembershipChange(Add("s2"), 7),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(s.Map().epoch(), 1u);

  const uint64_t version = s.Map().version();
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map,
                       s.PublishMembershipChange(Add("s2"), 1));
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_GT(map.version(), version);
  EXPECT_EQ(map.server_num(), 3);
  EXPECT_EQ(Find(map, "s2")->state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(s.Map().epoch(), 2u);
  EXPECT_TRUE(
      Logged("server node id:s2 addr:127.0.0.1:7002 rank 2 added to "
             "the ring: epoch 1 -> 2, 3 servers"));
  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(map));
  EXPECT_EQ(routed.ring().num_servers(), 3u);
  // The same change again is no longer valid.
  EXPECT_THAT(s.PublishMembershipChange(Add("s2"), 2),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(MembershipTest, DrainRetiresTheRankAndTheNodeCannotTakeOneByAccident) {
  Scheduler s(Options());
  Form(&s);
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map,
                       s.PublishMembershipChange(Drain("s1"), 1));
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_EQ(map.server_num(), 1);
  EXPECT_EQ(map.next_server_rank(), 2);
  ASSERT_EQ(map.servers_size(), 1);
  EXPECT_EQ(map.servers(0).node_id(), "s0");
  EXPECT_TRUE(
      Logged("server node id:s1 addr:127.0.0.1:7001 rank 1 drained "
             "(rank retired): epoch 1 -> 2, 1 server"));

  // Its beats: NOT_FOUND saying it was drained.
  auto beat = s.Heartbeat("s1", kT0);
  EXPECT_THAT(beat, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(beat.status().message()),
              HasSubstr("was drained (rank 1 retired at epoch 2); it owns no "
                        "keys and may be stopped"));
  // Registering again without join: refused; with join: a new rank, never
  // the retired one.
  EXPECT_THAT(s.Register(Server("s1", 7001), kT0),
              StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_OK_AND_ASSIGN(auto again, s.Register(Server("s1", 7001, true), kT0));
  EXPECT_EQ(again.rank(), 2);
  EXPECT_EQ(Find(s.Map(), "s1")->state(), v1::NODE_STATE_JOINING);
  // The routing map has ids 0 and 2 (a gap where rank 1 was).
  ASSERT_OK_AND_ASSIGN(ClusterMap routed, ClusterMapFromProto(s.Map()));
  EXPECT_NE(routed.Find(0), nullptr);
  EXPECT_EQ(routed.Find(1), nullptr);
  EXPECT_NE(routed.Find(2), nullptr);
}

TEST_F(MembershipTest, RecoveryKeepsEpochRanksAndJoiningState) {
  ScratchDir dir;
  {
    Scheduler s(Options(dir.path()));
    ASSERT_OK(s.Recover(kT0));
    Form(&s);
    ASSERT_OK(s.Register(Server("s2", 7002, true), kT0));
    ASSERT_OK(s.PublishMembershipChange(Add("s2"), 1));
    ASSERT_OK(s.PublishMembershipChange(Drain("s0"), 2));
    ASSERT_OK(s.Register(Server("s3", 7003, true), kT0));
  }
  // Restarted with the counts the cluster was formed with.
  Scheduler s(Options(dir.path()));
  ASSERT_OK(s.Recover(kT0));
  const v1::ClusterMap map = s.Map();
  EXPECT_EQ(map.epoch(), 3u);
  EXPECT_EQ(map.server_num(), 2);
  EXPECT_EQ(map.next_server_rank(), 4);
  ASSERT_EQ(map.servers_size(), 3);
  EXPECT_EQ(map.servers(0).node_id(), "s1");
  EXPECT_EQ(map.servers(1).node_id(), "s2");
  EXPECT_EQ(map.servers(1).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(map.servers(2).node_id(), "s3");
  EXPECT_EQ(map.servers(2).rank(), 3);
  EXPECT_EQ(map.servers(2).state(), v1::NODE_STATE_JOINING);
  ASSERT_OK_AND_ASSIGN(auto s4, s.Register(Server("s4", 7004, true), kT0));
  EXPECT_EQ(s4.rank(), 4);
}

// --- Through the service ---------------------------------------------------

class MembershipServiceTest : public MembershipTest {
 protected:
  void SetUp() override {
    SchedulerOptions o = Options();
    o.worker_num = 0;
    ASSERT_OK_AND_ASSIGN(sched_, SchedulerServer::Start(o));
  }

  std::unique_ptr<SchedulerClient> Client() {
    SchedulerClientOptions o;
    o.address = sched_->address();
    o.call_timeout = absl::Seconds(20);
    auto c = SchedulerClient::Open(o);
    EXPECT_OK(c);
    return *std::move(c);
  }

  absl::StatusOr<v1::MigrationStatus> Change(MembershipChange::Kind kind,
                                             absl::string_view id) {
    AdminMembershipOptions o;
    o.scheduler_address = sched_->address();
    o.kind = kind;
    o.node_id = std::string(id);
    o.timeout = absl::Seconds(60);
    return AdminMembershipChange(o, nullptr);
  }

  v1::SchedulerStatus Status() {
    auto channel = grpc::CreateChannel(sched_->address(),
                                       grpc::InsecureChannelCredentials());
    auto stub = v1::SchedulerService::NewStub(channel);
    grpc::ClientContext ctx;
    v1::SchedulerStatus status;
    EXPECT_TRUE(
        stub->GetStatus(&ctx, v1::GetSchedulerStatusRequest(), &status).ok());
    return status;
  }

  std::unique_ptr<SchedulerServer> sched_;
};

TEST_F(MembershipServiceTest, AddAndDrainAreValidatedBeforeAnythingMoves) {
  const ReservedPort unused[2];  // held; nothing listens there
  auto a = Client();
  auto b = Client();
  ASSERT_OK(a->Register(Server("s0", unused[0].port())));
  ASSERT_OK(b->Register(Server("s1", unused[1].port())));
  auto r = Change(MembershipChange::Kind::kAdd, "s0");
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("already on the ring"));
  EXPECT_THAT(Change(MembershipChange::Kind::kDrain, "ghost"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Change(MembershipChange::Kind::kAdd, "bad id!"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  AdminMembershipOptions o;
  o.node_id = "s0";
  EXPECT_THAT(AdminMembershipChange(o, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // No migration ran.
  EXPECT_FALSE(Status().has_migration());
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, a->GetClusterMap());
  EXPECT_EQ(map.epoch(), 1u);
}

// A participant that does not answer PREPARE (nothing listens at the
// joining server's address): the migration aborts, the map is unchanged,
// the status says why.
TEST_F(MembershipServiceTest, UnreachableServerAbortsAndTheMapIsUnchanged) {
  const ReservedPort unused[3];  // held; nothing listens there
  auto a = Client();
  auto b = Client();
  auto j = Client();
  ASSERT_OK(a->Register(Server("s0", unused[0].port())));
  ASSERT_OK(b->Register(Server("s1", unused[1].port())));
  ASSERT_OK(j->Register(Server("s2", unused[2].port(), true)));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap before, a->GetClusterMap());

  auto r = Change(MembershipChange::Kind::kAdd, "s2");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("PREPARE on server"));
  const v1::MigrationStatus m = Status().migration();
  EXPECT_EQ(m.kind(), "add");
  EXPECT_EQ(m.node_id(), "s2");
  EXPECT_EQ(m.phase(), "aborted");
  EXPECT_NE(m.migration_id(), 0u);
  EXPECT_EQ(m.from_epoch(), 1u);
  EXPECT_EQ(m.to_epoch(), 0u);
  EXPECT_THAT(m.error(), HasSubstr("PREPARE on server"));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap after, a->GetClusterMap());
  EXPECT_EQ(after.epoch(), before.epoch());
  EXPECT_EQ(Find(after, "s2")->state(), v1::NODE_STATE_JOINING);
  EXPECT_TRUE(Logged("aborted, the map is unchanged"));
}

// The scheduler publishes a drain (as the coordinator would at its commit
// point): the drained server's client stops beating instead of taking a
// new rank.
TEST_F(MembershipServiceTest, DrainedServerStopsBeating) {
  const ReservedPort unused[2];  // held; nothing listens there
  auto a = Client();
  auto b = Client();
  ASSERT_OK(a->Register(Server("s0", unused[0].port())));
  ASSERT_OK(b->Register(Server("s1", unused[1].port())));
  a->StartHeartbeats();
  b->StartHeartbeats();
  ASSERT_OK(sched_->backend()->PublishMembershipChange(Drain("s1"), 1));
  ASSERT_TRUE(WaitFor([&] { return b->drained(); }, absl::Seconds(20)));
  EXPECT_FALSE(a->drained());
  EXPECT_EQ(b->reregistrations(), 0);
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, a->GetClusterMap());
  EXPECT_EQ(Find(map, "s1"), nullptr);
  EXPECT_EQ(map.next_server_rank(), 2);
}

TEST(MembershipNodeConfigTest, JoinIsForAServerWithAScheduler) {
  SettingMap env = {{"PS_SCHED_HOST", "127.0.0.1"},
                    {"PS_SCHED_PORT", "7100"},
                    {"PS_JOIN", "1"}};
  ASSERT_OK_AND_ASSIGN(NodeConfig server,
                       ResolveNodeConfig(env, {}, NodeRoleKind::kServer));
  EXPECT_TRUE(server.join);
  ASSERT_OK_AND_ASSIGN(NodeConfig no, ResolveNodeConfig(env, {{"PS_JOIN", "0"}},
                                                        NodeRoleKind::kServer));
  EXPECT_FALSE(no.join);
  auto worker = ResolveNodeConfig(env, {}, NodeRoleKind::kWorker);
  EXPECT_THAT(worker, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(worker.status().message()), HasSubstr("PS_JOIN=1"));
  auto alone =
      ResolveNodeConfig({{"PS_JOIN", "true"}}, {}, NodeRoleKind::kServer);
  EXPECT_THAT(alone, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ResolveNodeConfig({{"PS_SCHED_HOST", "h"},
                                 {"PS_SCHED_PORT", "1"},
                                 {"PS_JOIN", "maybe"}},
                                {}, NodeRoleKind::kServer),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MembershipFormatTest, ProgressAndDoneLines) {
  v1::MigrationStatus m;
  m.set_kind("add");
  m.set_node_id("s3");
  m.set_phase("copy");
  m.set_rows_to_move(40000);
  m.set_rows_moved(12000);
  EXPECT_EQ(FormatMigrationProgress(m),
            "add-server s3: copy 12000/40000 rows moved (30%)");
  m.set_rows_to_move(0);
  m.set_rows_moved(0);
  EXPECT_EQ(FormatMigrationProgress(m), "add-server s3: copy 0/0 rows moved");
  m.set_phase("done");
  m.set_rows_to_move(40000);
  m.set_rows_moved(40000);
  m.set_from_epoch(1);
  m.set_to_epoch(2);
  EXPECT_EQ(FormatMigrationDone(m, absl::Milliseconds(1234)),
            "add-server s3: done, epoch 1 -> 2, 40000 rows moved in 1.2 s");
}

}  // namespace
}  // namespace psdb::rpc
