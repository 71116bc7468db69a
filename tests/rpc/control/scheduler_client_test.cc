// SchedulerClient with several scheduler addresses, and its map watch, over
// loopback gRPC. Two in-process schedulers share no state (etcd is what
// makes real ones share it), so these tests check the fail-over mechanics:
// which scheduler a call reaches, and that a re-sent call is the same call
// (incarnation, barrier sequence). Membership a real fail-over would find in
// etcd is given to the second scheduler by registering it there directly.
#include "rpc/control/scheduler_client.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "rpc/control/scheduler.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ReservedPort;
using ::psdb::testing::WaitFor;

// A real in-process Scheduler behind its own loopback gRPC server that
// records the Register and Barrier requests reaching it, and can answer the
// next calls UNAVAILABLE without passing them on (a scheduler going away).
class RecordingScheduler final : public v1::SchedulerService::Service {
 public:
  RecordingScheduler(int servers, int workers)
      : scheduler_(Options(servers, workers)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~RecordingScheduler() override { Shutdown(); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  Scheduler& scheduler() { return scheduler_; }

  // The next `n` calls of any kind fail UNAVAILABLE.
  void FailNext(int n) {
    absl::MutexLock lock(&mu_);
    fail_next_ = n;
  }
  std::vector<v1::RegisterRequest> registers() {
    absl::MutexLock lock(&mu_);
    return registers_;
  }
  std::vector<v1::BarrierRequest> barriers() {
    absl::MutexLock lock(&mu_);
    return barriers_;
  }
  // Blocked calls end UNAVAILABLE; the port stops listening.
  void Shutdown() {
    if (server_ == nullptr) return;
    scheduler_.Close();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
    server_->Wait();
    server_.reset();
  }

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    {
      absl::MutexLock lock(&mu_);
      registers_.push_back(*req);
    }
    if (Fail()) return Unavailable();
    auto r = scheduler_.Register(*req, absl::Now());
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp = *std::move(r);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    if (Fail()) return Unavailable();
    auto r = scheduler_.Heartbeat(req->node_id(), absl::Now());
    if (!r.ok()) return ToGrpcStatus(r.status());
    resp->set_map_version(*r);
    return grpc::Status::OK;
  }
  grpc::Status GetClusterMap(grpc::ServerContext*,
                             const v1::GetClusterMapRequest*,
                             v1::GetClusterMapResponse* resp) override {
    if (Fail()) return Unavailable();
    *resp->mutable_map() = scheduler_.Map();
    return grpc::Status::OK;
  }
  grpc::Status Barrier(grpc::ServerContext*, const v1::BarrierRequest* req,
                       v1::BarrierResponse*) override {
    {
      absl::MutexLock lock(&mu_);
      barriers_.push_back(*req);
    }
    if (Fail()) return Unavailable();
    return ToGrpcStatus(scheduler_.Barrier(
        req->name(), req->node_id(),
        absl::Now() + absl::Milliseconds(req->timeout_ms())));
  }

 private:
  static SchedulerOptions Options(int servers, int workers) {
    SchedulerOptions o;
    o.server_num = servers;
    o.worker_num = workers;
    o.heartbeat_interval = absl::Milliseconds(100);
    o.heartbeat_timeout = absl::Seconds(30);
    o.log = [](absl::string_view) {};
    return o;
  }
  bool Fail() {
    absl::MutexLock lock(&mu_);
    if (fail_next_ == 0) return false;
    --fail_next_;
    return true;
  }
  static grpc::Status Unavailable() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected: going away");
  }

  Scheduler scheduler_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  int fail_next_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::RegisterRequest> registers_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::BarrierRequest> barriers_ ABSL_GUARDED_BY(mu_);
};

v1::RegisterRequest Req(absl::string_view id, v1::NodeRole role,
                        absl::string_view addr = "") {
  v1::RegisterRequest r;
  r.set_node_id(std::string(id));
  r.set_role(role);
  r.set_address(std::string(addr));
  return r;
}

// "127.0.0.1:P" of a port `held` (nothing listens on it while held).
std::string DeadAddress(const ReservedPort& held) {
  return absl::StrCat("127.0.0.1:", held.port());
}

std::unique_ptr<SchedulerClient> Client(const std::string& address) {
  SchedulerClientOptions options;
  options.address = address;
  options.call_timeout = absl::Seconds(20);
  auto c = SchedulerClient::Open(options);
  EXPECT_OK(c);
  return *std::move(c);
}

std::unique_ptr<SchedulerServer> StartScheduler(int servers, int workers) {
  SchedulerOptions options;
  options.server_num = servers;
  options.worker_num = workers;
  options.heartbeat_interval = absl::Milliseconds(100);
  options.heartbeat_timeout = absl::Seconds(10);
  options.log = [](absl::string_view) {};
  auto s = SchedulerServer::Start(options);
  EXPECT_OK(s);
  return *std::move(s);
}

TEST(SchedulerClientTest, OpenSplitsTheListAndRefusesEmptyEntries) {
  auto c = Client(" 127.0.0.1:1 ,127.0.0.1:2");
  EXPECT_THAT(c->addresses(),
              ::testing::ElementsAre("127.0.0.1:1", "127.0.0.1:2"));
  EXPECT_EQ(c->active_address(), "127.0.0.1:1");
  EXPECT_NE(c->incarnation(), 0u);
  EXPECT_NE(c->incarnation(), Client("127.0.0.1:1")->incarnation());
  SchedulerClientOptions bad;
  bad.address = "127.0.0.1:1,,127.0.0.1:2";
  EXPECT_THAT(SchedulerClient::Open(bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Everything a node does, through "dead,live": the dead address refuses
// connections, every call moves on to the live scheduler.
TEST(SchedulerClientTest, DeadFirstAddressFailsOverForEveryCall) {
  std::unique_ptr<SchedulerServer> live = StartScheduler(1, 2);
  const ReservedPort dead;
  const std::string list =
      absl::StrCat(DeadAddress(dead), ",", live->address());
  auto server = Client(list);
  auto w0 = Client(list);
  auto w1 = Client(list);
  ASSERT_OK_AND_ASSIGN(
      v1::RegisterResponse reg,
      server->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:9")));
  EXPECT_EQ(reg.rank(), 0);
  EXPECT_EQ(server->active_address(), live->address());
  ASSERT_OK(w0->Register(Req("w0", v1::NODE_ROLE_WORKER)));
  ASSERT_OK(w1->Register(Req("w1", v1::NODE_ROLE_WORKER)));
  ASSERT_OK_AND_ASSIGN(uint64_t version, w0->Heartbeat());
  EXPECT_EQ(version, live->backend()->CurrentMap()->version());
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap map, w0->GetClusterMap());
  EXPECT_TRUE(map.ready());
  EXPECT_EQ(map.workers_size(), 2);

  absl::Status other;
  std::thread t([&] { other = w1->Barrier("start", absl::Seconds(30)); });
  EXPECT_OK(w0->Barrier("start", absl::Seconds(30)));
  t.join();
  EXPECT_OK(other);
  absl::StatusOr<int64_t> other_clock;
  std::thread u([&] { other_clock = w1->StepClock(1, 0, absl::Seconds(30)); });
  absl::StatusOr<int64_t> clock = w0->StepClock(1, 0, absl::Seconds(30));
  u.join();
  ASSERT_OK(clock);
  ASSERT_OK(other_clock);
  EXPECT_EQ(*clock, 1);
  EXPECT_EQ(*other_clock, 1);
}

TEST(SchedulerClientTest, NthBarrierOfANameCarriesSequenceN) {
  RecordingScheduler sched(1, 1);
  auto w = Client(sched.address());
  ASSERT_OK(w->Register(Req("w0", v1::NODE_ROLE_WORKER)));
  for (const char* name : {"a", "a", "b", "a"}) {
    ASSERT_OK(w->Barrier(name, absl::Seconds(10)));
  }
  using Use = std::pair<std::string, int64_t>;
  std::vector<Use> seen;
  for (const v1::BarrierRequest& b : sched.barriers()) {
    EXPECT_EQ(b.node_id(), "w0");
    seen.emplace_back(b.name(), b.sequence());
  }
  EXPECT_THAT(seen, ::testing::ElementsAre(Use("a", 1), Use("a", 2),
                                           Use("b", 1), Use("a", 3)));
}

TEST(SchedulerClientTest, RegisterIsResentToTheNextWithTheSameIncarnation) {
  RecordingScheduler first(1, 1);
  RecordingScheduler second(1, 1);
  first.FailNext(1);
  auto w = Client(absl::StrCat(first.address(), ",", second.address()));
  v1::RegisterRequest req = Req("w0", v1::NODE_ROLE_WORKER);
  req.set_incarnation(12345);  // replaced by the client's own
  ASSERT_OK_AND_ASSIGN(v1::RegisterResponse reg, w->Register(req));
  EXPECT_EQ(reg.rank(), 0);
  EXPECT_EQ(w->active_address(), second.address());
  ASSERT_EQ(first.registers().size(), 1u);
  ASSERT_EQ(second.registers().size(), 1u);
  EXPECT_EQ(first.registers()[0].incarnation(), w->incarnation());
  EXPECT_EQ(second.registers()[0].incarnation(), w->incarnation());
  EXPECT_EQ(second.registers()[0].node_id(), "w0");
  // Later calls start at the scheduler that answered.
  ASSERT_OK(w->Heartbeat());
  EXPECT_EQ(first.registers().size(), 1u);
}

// A Barrier blocked in a scheduler that goes away (its call ends
// UNAVAILABLE) is re-sent to the next scheduler as the same use of the
// name, and completes there.
TEST(SchedulerClientTest, BarrierBlockedInAVanishingSchedulerIsResent) {
  RecordingScheduler first(1, 2);
  RecordingScheduler second(1, 2);
  auto w0 = Client(absl::StrCat(first.address(), ",", second.address()));
  ASSERT_OK(w0->Register(Req("w0", v1::NODE_ROLE_WORKER)));
  EXPECT_EQ(w0->active_address(), first.address());
  // The membership etcd would hold for the second scheduler.
  v1::RegisterRequest w0_req = Req("w0", v1::NODE_ROLE_WORKER);
  w0_req.set_incarnation(w0->incarnation());
  ASSERT_OK(second.scheduler().Register(w0_req, absl::Now()));
  for (RecordingScheduler* s : {&first, &second}) {
    ASSERT_OK(
        s->scheduler().Register(Req("w1", v1::NODE_ROLE_WORKER), absl::Now()));
  }

  // Use 1 of "ckpt" completes on the first scheduler.
  {
    absl::Status w1_status;
    std::thread w1([&] {
      w1_status = first.scheduler().Barrier("ckpt", "w1",
                                            absl::Now() + absl::Seconds(30));
    });
    EXPECT_OK(w0->Barrier("ckpt", absl::Seconds(30)));
    w1.join();
    EXPECT_OK(w1_status);
  }
  // Use 2 blocks there (w1 does not come) until the scheduler goes away.
  absl::Status status;
  std::thread blocked([&] { status = w0->Barrier("ckpt", absl::Seconds(30)); });
  ASSERT_TRUE(WaitFor([&] { return first.barriers().size() == 2; }));
  first.Shutdown();
  ASSERT_TRUE(WaitFor([&] { return second.barriers().size() == 1; }));
  const v1::BarrierRequest resent = second.barriers()[0];
  EXPECT_EQ(resent.name(), "ckpt");
  EXPECT_EQ(resent.node_id(), "w0");
  EXPECT_EQ(resent.sequence(), 2);
  EXPECT_EQ(first.barriers()[1].sequence(), 2);
  EXPECT_GT(resent.timeout_ms(), 0);
  EXPECT_LE(resent.timeout_ms(), first.barriers()[1].timeout_ms());
  // w1 arrives at the second scheduler: both are released.
  EXPECT_OK(second.scheduler().Barrier("ckpt", "w1",
                                       absl::Now() + absl::Seconds(30)));
  blocked.join();
  EXPECT_OK(status);
  EXPECT_EQ(w0->active_address(), second.address());
}

// The watch delivers each change of the map (a registration, a death)
// without the client asking for the map.
TEST(SchedulerClientTest, WatchSeesRegistrationsAndDeathsWithoutFetching) {
  std::unique_ptr<SchedulerServer> live = StartScheduler(1, 1);
  const ReservedPort dead;
  auto server = Client(absl::StrCat(DeadAddress(dead), ",", live->address()));
  ASSERT_OK(server->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:9")));
  server->StartHeartbeats();  // and the watch
  const uint64_t before = server->map_version();
  ASSERT_EQ(server->latest_map()->version(), before);

  ASSERT_OK(
      live->backend()->Register(Req("w0", v1::NODE_ROLE_WORKER), absl::Now()));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap joined,
                       server->WaitForMapVersion(before, absl::Seconds(30)));
  ASSERT_EQ(joined.workers_size(), 1);
  EXPECT_EQ(joined.workers(0).node_id(), "w0");
  EXPECT_TRUE(joined.ready());

  // An hour from now every node is silent: w0 (which never beats) is dead.
  live->backend()->Tick(absl::Now() + absl::Hours(1));
  ASSERT_OK_AND_ASSIGN(
      v1::ClusterMap died,
      server->WaitForMapVersion(joined.version(), absl::Seconds(30)));
  ASSERT_EQ(died.workers_size(), 1);
  EXPECT_EQ(died.workers(0).state(), v1::NODE_STATE_DEAD);
  EXPECT_GE(server->map_version(), died.version());

  EXPECT_THAT(
      server->WaitForMapVersion(died.version() + 1000, absl::Milliseconds(1)),
      StatusIs(absl::StatusCode::kDeadlineExceeded));
}

// When the watched scheduler goes away the stream is reopened on the next
// address and follows that scheduler's map.
TEST(SchedulerClientTest, WatchMovesToTheNextSchedulerWhenItsOneGoesAway) {
  std::unique_ptr<SchedulerServer> first = StartScheduler(1, 0);
  std::unique_ptr<SchedulerServer> second = StartScheduler(1, 0);
  auto c = Client(absl::StrCat(first->address(), ",", second->address()));
  c->StartMapWatch();
  ASSERT_OK(first->backend()->Register(
      Req("s-first", v1::NODE_ROLE_SERVER, "127.0.0.1:9"), absl::Now()));
  ASSERT_OK_AND_ASSIGN(v1::ClusterMap on_first,
                       c->WaitForMapVersion(0, absl::Seconds(30)));
  EXPECT_EQ(on_first.servers(0).node_id(), "s-first");

  first->Shutdown();
  // The second scheduler's history moves past what the client saw.
  ASSERT_OK(second->backend()->Register(
      Req("s-second", v1::NODE_ROLE_SERVER, "127.0.0.1:8"), absl::Now()));
  second->backend()->Tick(absl::Now() + absl::Hours(1));
  ASSERT_GT(second->backend()->CurrentMap()->version(), on_first.version());
  ASSERT_OK_AND_ASSIGN(
      v1::ClusterMap on_second,
      c->WaitForMapVersion(on_first.version(), absl::Seconds(30)));
  EXPECT_EQ(on_second.servers(0).node_id(), "s-second");
  c->StopMapWatch();
  c->StopMapWatch();  // idempotent
}

}  // namespace
}  // namespace psdb::rpc
