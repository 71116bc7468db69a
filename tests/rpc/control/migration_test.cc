// Live resharding end to end, in-process over loopback gRPC: a
// SchedulerServer, real PsServers each over its own Store, joined through
// JoinClusterAsServer, a RemoteClient following the scheduler's map, and
// the admin call (AdminMembershipChange, what ps-scheduler add-server /
// drain-server run). Every operation is replayed on a reference Store
// (embedded, the same table and calls in the same order), so after each
// migration every row read through the client (values, optimizer state,
// headers) must equal the reference's bit for bit; each store must hold
// exactly the keys it owns under the published map (rows moved exactly
// once, sources emptied of what they handed over); the sources' counters
// must equal the rows whose owner changed.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "psdb/store.h"
#include "psdb/table_spec.h"
#include "rpc/client/cluster_worker.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/admin_membership.h"
#include "rpc/control/scheduler.h"
#include "rpc/control/scheduler_client.h"
#include "rpc/server/server.h"
#include "rpc/wire/cluster_map_proto.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

constexpr int kDim = 4;
constexpr int kKeys = 600;

TableSpec Table() {
  TableSpec spec;
  spec.name = "emb";
  spec.dim = kDim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.1f;
  spec.seed = 7;
  return spec;
}

std::vector<uint64_t> Keys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < kKeys; ++k) keys.push_back(k * 2654435761ull + 11);
  return keys;
}

std::vector<float> Grads(size_t n, int round) {
  std::vector<float> g(n * kDim);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = 0.125f * static_cast<float>((i * 7 + round * 3) % 11) - 0.5f;
  }
  return g;
}

// One ps-server: its store, its scheduler client (beats), its PsServer.
struct Node {
  std::string id;
  const ReservedPort port;  // held through kills and restarts
  ScratchDir dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<SchedulerClient> sched;
  std::unique_ptr<PsServer> server;
  ServerOptions options;  // what `server` started with
  int rank = -1;
};

class MigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FormCluster();
    // Two rounds of pushes over every key (rows with state and headers).
    for (int round = 1; round <= 2; ++round) Push(Keys(), round);
  }

  // Scheduler, s0 and s1 (each with `sync` as its SyncOptions), the client
  // and the reference, with the table created.
  void FormCluster(SyncOptions sync = {}) {
    sync_ = sync;
    SchedulerOptions o;
    o.server_num = 2;
    o.worker_num = 0;
    o.heartbeat_interval = absl::Milliseconds(100);
    o.heartbeat_timeout = absl::Seconds(5);
    o.log = [this](absl::string_view line) {
      absl::MutexLock lock(&mu_);
      log_.emplace_back(line);
    };
    ASSERT_OK_AND_ASSIGN(sched_, SchedulerServer::Start(o));
    // Two servers form the cluster (each waits for the other).
    nodes_.push_back(std::make_unique<Node>());
    nodes_.push_back(std::make_unique<Node>());
    absl::Status started[2];
    std::thread t0(
        [&] { started[0] = StartNode("s0", false, nodes_[0].get()); });
    std::thread t1(
        [&] { started[1] = StartNode("s1", false, nodes_[1].get()); });
    t0.join();
    t1.join();
    ASSERT_OK(started[0]);
    ASSERT_OK(started[1]);

    RemoteClientOptions ro;
    ro.call_timeout = absl::Seconds(60);
    ASSERT_OK_AND_ASSIGN(
        client_,
        OpenSchedulerRemoteClient(sched_->address(), ro, absl::Seconds(30)));
    ASSERT_OK_AND_ASSIGN(ref_, Store::Open({}, ref_dir_.Sub("ref")));
    ASSERT_OK(client_->CreateTable(Table()));
    ASSERT_OK(ref_->CreateTable(Table()));
  }

  void TearDown() override {
    client_.reset();
    for (auto& n : nodes_) {
      if (n->sched != nullptr) n->sched->StopHeartbeats();
      if (n->server != nullptr) n->server->Shutdown(absl::Seconds(5));
    }
    if (sched_ != nullptr) sched_->Shutdown();
  }

  absl::Status StartNode(const std::string& id, bool join, Node* node) {
    node->id = id;
    const int port = node->port.port();
    NodeConfig config;
    config.role = NodeRoleKind::kServer;
    config.sched_host = "127.0.0.1";
    config.sched_port =
        std::stoi(sched_->address().substr(sched_->address().rfind(':') + 1));
    config.node_id = id;
    config.join = join;
    PSDB_ASSIGN_OR_RETURN(
        auto joined,
        JoinClusterAsServer(config, absl::StrCat("127.0.0.1:", port), {},
                            absl::Seconds(30)));
    node->sched = std::move(joined.first);
    node->rank = joined.second.rank;
    StoreOptions so;
    so.shard_id = node->rank;
    PSDB_ASSIGN_OR_RETURN(node->store, Store::Open(so, node->dir.Sub("db")));
    ServerOptions options;
    options.port = port;
    options.num_threads = 2;
    options.cluster = joined.second.cluster;
    options.shard_id = node->rank;
    options.sync = sync_;
    node->options = options;
    PSDB_ASSIGN_OR_RETURN(node->server,
                          PsServer::Start(options, node->store.get()));
    return absl::OkStatus();
  }

  // A server killed (its process gone: the PsServer stops at once; its
  // store, like a disk, stays) and started again on its address with the
  // map it started with.
  void Kill(Node* node) { node->server->Shutdown(absl::ZeroDuration()); }
  absl::Status Restart(Node* node) {
    node->server.reset();
    PSDB_ASSIGN_OR_RETURN(node->server,
                          PsServer::Start(node->options, node->store.get()));
    return absl::OkStatus();
  }

  // The scheduler's GetStatus.migration.
  v1::MigrationStatus MigrationNow() {
    auto channel = grpc::CreateChannel(sched_->address(),
                                       grpc::InsecureChannelCredentials());
    grpc::ClientContext ctx;
    v1::SchedulerStatus status;
    EXPECT_TRUE(v1::SchedulerService::NewStub(channel)
                    ->GetStatus(&ctx, v1::GetSchedulerStatusRequest(), &status)
                    .ok());
    return status.migration();
  }

  // Starts a rate-limited add of s2 on its own thread, waits until rows
  // are moving, runs `fault`, and returns the add's result.
  absl::StatusOr<v1::MigrationStatus> AddWithFault(
      const std::function<void()>& fault) {
    absl::StatusOr<v1::MigrationStatus> result;
    std::thread add(
        [&] { result = Change(MembershipChange::Kind::kAdd, "s2", 40); });
    const bool copying = WaitFor(
        [&] {
          const v1::MigrationStatus m = MigrationNow();
          return m.phase() == "copy" && m.rows_moved() > 0;
        },
        absl::Seconds(30));
    EXPECT_TRUE(copying);
    fault();
    add.join();
    return result;
  }

  // The same push through the cluster and on the reference.
  void Push(const std::vector<uint64_t>& keys, int round) {
    const std::vector<float> g = Grads(keys.size(), round);
    PushOptions p;
    p.step = round;
    ASSERT_OK(client_->Push("emb", keys, g, p));
    ASSERT_OK(ref_->Push("emb", keys, g, p));
  }

  // Every row through the client equals the reference's, bit for bit.
  void ExpectRowsEqualReference() {
    RowBatch got, want;
    ASSERT_OK(client_->PullRows("emb", Keys(), &got));
    ASSERT_OK(ref_->PullRows("emb", Keys(), &want));
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got.values.size(), want.values.size());
    ASSERT_EQ(got.state.size(), want.state.size());
    EXPECT_EQ(0, std::memcmp(got.values.data(), want.values.data(),
                             got.values.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(got.state.data(), want.state.data(),
                             got.state.size() * sizeof(float)));
    EXPECT_EQ(got.headers, want.headers);
  }

  ClusterMap Map() {
    auto wire = sched_->backend()->CurrentMap();
    EXPECT_OK(wire);
    auto map = ClusterMapFromProto(*wire);
    EXPECT_OK(map);
    return *map;
  }

  // Each live store holds exactly the keys its rank owns under `map`.
  void ExpectStoresHoldTheirKeys(const ClusterMap& map) {
    for (auto& n : nodes_) {
      if (n->store == nullptr) continue;
      ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> resident,
                           n->store->ResidentKeys("emb", 10 * kKeys));
      std::sort(resident.begin(), resident.end());
      std::vector<uint64_t> owned;
      for (uint64_t k : Keys()) {
        if (map.Owns(n->rank, k)) owned.push_back(k);
      }
      std::sort(owned.begin(), owned.end());
      EXPECT_EQ(resident, owned) << "server " << n->id << " rank " << n->rank;
    }
  }

  static uint64_t Moved(const ClusterMap& from, const ClusterMap& to) {
    uint64_t moved = 0;
    for (uint64_t k : Keys()) moved += from.Owner(k) != to.Owner(k);
    return moved;
  }

  absl::StatusOr<v1::MigrationStatus> Change(
      MembershipChange::Kind kind, const std::string& id,
      int64_t max_rows_per_second = 0,
      std::vector<std::string>* lines = nullptr) {
    AdminMembershipOptions o;
    o.scheduler_address = sched_->address();
    o.kind = kind;
    o.node_id = id;
    o.batch_rows = 64;
    o.max_rows_per_second = max_rows_per_second;
    o.progress_interval = absl::Milliseconds(100);
    o.timeout = absl::Seconds(120);
    return AdminMembershipChange(o, [lines](absl::string_view line) {
      if (lines != nullptr) lines->emplace_back(line);
    });
  }

  SyncOptions sync_;
  std::unique_ptr<SchedulerServer> sched_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unique_ptr<RemoteClient> client_;
  ScratchDir ref_dir_;
  std::unique_ptr<Store> ref_;
  absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
};

TEST_F(MigrationTest, AddThenDrainMoveEveryRowExactlyOnce) {
  const ClusterMap epoch1 = Map();
  ASSERT_EQ(epoch1.epoch(), 1u);

  // s2 joins: JOINING, rank 2, owning nothing; the map's epoch stays.
  nodes_.push_back(std::make_unique<Node>());
  ASSERT_OK(StartNode("s2", true, nodes_[2].get()));
  EXPECT_EQ(nodes_[2]->rank, 2);
  EXPECT_EQ(Map().epoch(), 1u);

  const absl::Time add_start = absl::Now();
  ASSERT_OK_AND_ASSIGN(v1::MigrationStatus added,
                       Change(MembershipChange::Kind::kAdd, "s2"));
  const double add_seconds = absl::ToDoubleSeconds(absl::Now() - add_start);
  const ClusterMap epoch2 = Map();
  // The coordinator timed every phase, and they fit in the admin call.
  EXPECT_GT(added.prepare_seconds(), 0);
  EXPECT_GT(added.copy_seconds(), 0);
  EXPECT_GT(added.handoff_seconds(), 0);
  EXPECT_GT(added.commit_seconds(), 0);
  EXPECT_LE(added.prepare_seconds() + added.copy_seconds() +
                added.handoff_seconds() + added.commit_seconds(),
            add_seconds);
  EXPECT_EQ(epoch2.epoch(), 2u);
  EXPECT_EQ(epoch2.ring().num_servers(), 3u);
  EXPECT_EQ(added.phase(), "done");
  EXPECT_EQ(added.kind(), "add");
  EXPECT_EQ(added.from_epoch(), 1u);
  EXPECT_EQ(added.to_epoch(), 2u);
  const uint64_t moved_in = Moved(epoch1, epoch2);
  EXPECT_GT(moved_in, 0u);
  EXPECT_EQ(added.rows_to_move(), moved_in);
  EXPECT_EQ(added.rows_moved(), moved_in);  // no push ran meanwhile
  ExpectStoresHoldTheirKeys(epoch2);
  ExpectRowsEqualReference();
  Push(Keys(), 3);
  ExpectRowsEqualReference();
  ExpectStoresHoldTheirKeys(epoch2);

  // Drain s0: its rows go to s1 and s2; it leaves the map, its rank
  // retired, and its client stops beating.
  ASSERT_OK_AND_ASSIGN(v1::MigrationStatus drained,
                       Change(MembershipChange::Kind::kDrain, "s0"));
  const ClusterMap epoch3 = Map();
  EXPECT_EQ(epoch3.epoch(), 3u);
  EXPECT_EQ(epoch3.Find(nodes_[0]->rank), nullptr);
  EXPECT_EQ(drained.phase(), "done");
  EXPECT_EQ(drained.from_epoch(), 2u);
  EXPECT_EQ(drained.to_epoch(), 3u);
  const uint64_t moved_out = Moved(epoch2, epoch3);
  EXPECT_EQ(drained.rows_to_move(), moved_out);
  EXPECT_EQ(drained.rows_moved(), moved_out);
  ASSERT_TRUE(
      WaitFor([&] { return nodes_[0]->sched->drained(); }, absl::Seconds(30)));
  // s0's store holds nothing any more (it owns no key under epoch 3).
  ExpectStoresHoldTheirKeys(epoch3);
  ExpectRowsEqualReference();
  Push(Keys(), 4);
  ExpectRowsEqualReference();
}

// Pushes keep going while rows move (a source holds them in HANDOFF, the
// client re-sends those refused after the flip): none is lost or applied
// twice. A second change while one runs is refused, naming the running one;
// progress lines are printed meanwhile.
TEST_F(MigrationTest, PushesDuringAMigrationAreNeitherLostNorDoubled) {
  nodes_.push_back(std::make_unique<Node>());
  ASSERT_OK(StartNode("s2", true, nodes_[2].get()));

  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread pusher([&] {
    // Sequential pushes of a rotating slice: the reference applies the same
    // calls in the same order.
    const std::vector<uint64_t> all = Keys();
    for (int round = 10; !stop.load(); ++round) {
      std::vector<uint64_t> slice;
      for (size_t i = round % 3; i < all.size(); i += 3)
        slice.push_back(all[i]);
      Push(slice, round);
      rounds.fetch_add(1);
    }
  });
  std::vector<std::string> lines;
  absl::StatusOr<v1::MigrationStatus> added;
  std::thread migration([&] {
    // ~2 s of copying: the rate limit keeps the migration running.
    added = Change(MembershipChange::Kind::kAdd, "s2", 50, &lines);
  });
  // While it runs: a second change is refused, naming the running one.
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::MutexLock lock(&mu_);
        for (const std::string& l : log_) {
          if (absl::StrContains(l, "add-server node id:s2") &&
              absl::StrContains(l, "source(s)")) {
            return true;
          }
        }
        return false;
      },
      absl::Seconds(30)));
  auto second = Change(MembershipChange::Kind::kDrain, "s1");
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("(add-server node id:s2) is running"));
  migration.join();
  stop.store(true);
  pusher.join();
  ASSERT_OK(added);
  EXPECT_GT(rounds.load(), 0);
  EXPECT_EQ(added->to_epoch(), 2u);
  EXPECT_GE(added->rows_moved(), added->rows_to_move());
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines[0], HasSubstr("add-server s2: "));
  ExpectRowsEqualReference();
  ExpectStoresHoldTheirKeys(Map());
}

// The joining server is killed while rows stream to it: the migration
// aborts, the map still has it JOINING at epoch 1, every row reads as the
// reference through the old map; once it is back, the add succeeds.
TEST_F(MigrationTest, NewServerKilledMidCopyAbortsThenTheAddIsRedone) {
  nodes_.push_back(std::make_unique<Node>());
  ASSERT_OK(StartNode("s2", true, nodes_[2].get()));
  const ClusterMap epoch1 = Map();

  auto aborted = AddWithFault([&] { Kill(nodes_[2].get()); });
  EXPECT_FALSE(aborted.ok());
  const v1::MigrationStatus m = MigrationNow();
  EXPECT_EQ(m.phase(), "aborted");
  EXPECT_THAT(m.error(), HasSubstr("COPY on server"));
  EXPECT_EQ(m.to_epoch(), 0u);
  EXPECT_EQ(Map(), epoch1);
  ExpectRowsEqualReference();
  Push(Keys(), 3);
  ExpectRowsEqualReference();

  ASSERT_OK(Restart(nodes_[2].get()));
  // The sources' channels to s2 may still be in their reconnect backoff
  // and fail the first attempts fast; each such attempt aborts cleanly
  // (the map unchanged), and the operator's next one succeeds.
  absl::StatusOr<v1::MigrationStatus> added;
  ASSERT_TRUE(WaitFor(
      [&] {
        added = Change(MembershipChange::Kind::kAdd, "s2");
        if (!added.ok()) {
          EXPECT_EQ(Map(), epoch1);
        }
        return added.ok();
      },
      absl::Seconds(60)))
      << added.status();
  EXPECT_EQ(added->to_epoch(), 2u);
  ExpectStoresHoldTheirKeys(Map());
  ExpectRowsEqualReference();
}

// An old owner (a source) is killed while it copies: the migration aborts,
// the map is unchanged, and once the old owner is back every row reads as
// the reference (the new server dropped what it had received).
TEST_F(MigrationTest, OldOwnerKilledMidCopyAbortsAndNothingIsLost) {
  nodes_.push_back(std::make_unique<Node>());
  ASSERT_OK(StartNode("s2", true, nodes_[2].get()));
  const ClusterMap epoch1 = Map();

  auto aborted = AddWithFault([&] { Kill(nodes_[0].get()); });
  EXPECT_FALSE(aborted.ok());
  EXPECT_EQ(MigrationNow().phase(), "aborted");
  EXPECT_EQ(Map(), epoch1);
  ASSERT_OK(Restart(nodes_[0].get()));
  ExpectRowsEqualReference();
  ExpectStoresHoldTheirKeys(epoch1);

  ASSERT_OK_AND_ASSIGN(v1::MigrationStatus added,
                       Change(MembershipChange::Kind::kAdd, "s2"));
  EXPECT_EQ(added.to_epoch(), 2u);
  ExpectStoresHoldTheirKeys(Map());
  ExpectRowsEqualReference();
}

// Synchronous training (BSP, 2 workers, sum) through an add: steps keep
// running while rows move; CLOSE keeps every step wholly under one map, so
// each step's summed gradient is applied once per key. The reference
// applies the sum of both workers' gradients per step (exact in float: the
// gradients are multiples of 1/8), so values and state must be equal bit
// for bit. (The headers' sighting counts differ by design: the cluster
// sees each worker's push.)
class SyncMigrationTest : public MigrationTest {
 protected:
  void SetUp() override {
    SyncOptions sync;
    sync.num_workers = 2;
    sync.reduce = SyncReduce::kSum;
    FormCluster(sync);
    for (int w = 0; w < 2; ++w) {
      RemoteClientOptions ro;
      ro.call_timeout = absl::Seconds(60);
      ro.push_to_every_server = true;
      ro.worker_id = w;
      ASSERT_OK_AND_ASSIGN(
          workers_[w],
          OpenSchedulerRemoteClient(sched_->address(), ro, absl::Seconds(30)));
    }
  }
  void TearDown() override {
    for (auto& w : workers_) w.reset();
    MigrationTest::TearDown();
  }

  // One step: both workers push (concurrently), the reference applies the
  // sum.
  void Step(int step) {
    const std::vector<uint64_t> keys = Keys();
    std::vector<float> g[2] = {Grads(keys.size(), step),
                               Grads(keys.size(), step + 5)};
    PushOptions p;
    p.step = step;
    absl::Status pushed[2];
    std::thread other(
        [&] { pushed[1] = workers_[1]->Push("emb", keys, g[1], p); });
    pushed[0] = workers_[0]->Push("emb", keys, g[0], p);
    other.join();
    ASSERT_OK(pushed[0]);
    ASSERT_OK(pushed[1]);
    std::vector<float> sum(g[0].size());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = g[0][i] + g[1][i];
    ASSERT_OK(ref_->Push("emb", keys, sum, p));
  }

  std::unique_ptr<RemoteClient> workers_[2];
};

TEST_F(SyncMigrationTest, StepsDuringAnAddAreAppliedOnceEach) {
  for (int step = 1; step <= 2; ++step) Step(step);
  nodes_.push_back(std::make_unique<Node>());
  ASSERT_OK(StartNode("s2", true, nodes_[2].get()));
  std::atomic<bool> done{false};
  absl::StatusOr<v1::MigrationStatus> added;
  std::thread migration([&] {
    added = Change(MembershipChange::Kind::kAdd, "s2", 100);
    done.store(true);
  });
  int step = 3;
  for (; !done.load() || step < 6; ++step) Step(step);
  migration.join();
  ASSERT_OK(added);
  EXPECT_EQ(added->to_epoch(), 2u);
  Step(step);

  RowBatch got, want;
  ASSERT_OK(client_->PullRows("emb", Keys(), &got));
  ASSERT_OK(ref_->PullRows("emb", Keys(), &want));
  ASSERT_EQ(got.values.size(), want.values.size());
  EXPECT_EQ(0, std::memcmp(got.values.data(), want.values.data(),
                           got.values.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(got.state.data(), want.state.data(),
                           got.state.size() * sizeof(float)));
  for (size_t i = 0; i < got.headers.size(); ++i) {
    EXPECT_EQ(got.headers[i].update_count, want.headers[i].update_count);
    EXPECT_EQ(got.headers[i].last_update_step,
              want.headers[i].last_update_step);
  }
  ExpectStoresHoldTheirKeys(Map());
}

}  // namespace
}  // namespace psdb::rpc
