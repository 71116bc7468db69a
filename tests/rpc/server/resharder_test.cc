// Live resharding on in-process servers over loopback (rpc/control/
// README.md): the test plays the coordinator (PREPARE, COPY, CLOSE,
// HANDOFF, publish, COMMIT) while workers keep pulling and pushing through
// RemoteClient, whose map source returns the published map.
//  - Async: a counting table (SGD, lr 1, zeros, gradient -1 per push) under
//    three pushing threads while a fourth server is added and one of the
//    first drained: every pushed unit lands exactly once.
//  - Sync: two workers (BSP) on Adam rows, a server added at step 20 and
//    one drained at step 40, final rows (values, state, headers)
//    bit-identical to a run without the changes.
//  - An add moves about 1/(N+1) of the rows, all onto the new server, and
//    every server then holds exactly the rows it owns.
//  - An abort after the copy leaves the map and every row as they were.
#include "rpc/server/resharder.h"

#include <barrier>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/client/remote_client.h"
#include "rpc/server/server.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;

// How LiveCluster::Change runs.
struct ChangeOptions {
  int64_t rows_per_second = 0;
  bool abort_after_copy = false;
  // Called after COPY, before CLOSE.
  std::function<void()> before_close;
};

// Servers 0..total-1 on loopback; the first `initial` form the ring at
// epoch 1, the others are joining.
class LiveCluster {
 public:
  LiveCluster(int total, int initial, int sync_workers) {
    std::vector<std::unique_ptr<ReservedPort>> ports;
    ClusterMapSpec spec;
    spec.epoch = 1;
    for (int i = 0; i < total; ++i) {
      ports.push_back(std::make_unique<ReservedPort>());
      ServerInfo info;
      info.id = i;
      info.address = absl::StrCat("127.0.0.1:", ports.back()->port());
      info.state = i < initial ? ServerState::kAlive : ServerState::kJoining;
      spec.servers.push_back(info);
    }
    auto map = ClusterMap::Create(spec);
    EXPECT_TRUE(map.ok()) << map.status();
    published_ = *map;
    for (int i = 0; i < total; ++i) {
      auto store = Store::Open({}, dir_.Sub(absl::StrCat("s", i)));
      EXPECT_TRUE(store.ok()) << store.status();
      ServerOptions options;
      options.port = ports[i]->port();
      options.cluster = published_;
      options.shard_id = i;
      options.num_threads = 2;
      options.sync.num_workers = sync_workers;
      auto server = PsServer::Start(options, store->get());
      EXPECT_TRUE(server.ok()) << server.status();
      stores_.push_back(*std::move(store));
      servers_.push_back(*std::move(server));
      stubs_.push_back(v1::ParameterService::NewStub(grpc::CreateChannel(
          spec.servers[i].address, grpc::InsecureChannelCredentials())));
    }
  }

  ClusterMap published() const {
    absl::MutexLock lock(&mu_);
    return published_;
  }

  absl::StatusOr<std::unique_ptr<RemoteClient>> Client(int worker_id,
                                                       bool sync) {
    RemoteClientOptions options;
    options.cluster = published();
    options.map_source = [this]() -> absl::StatusOr<ClusterMap> {
      return published();
    };
    if (sync) {
      options.worker_id = worker_id;
      options.push_to_every_server = true;
    }
    return RemoteClient::Open(options);
  }

  // The published map with the ring of `ring_ids` (the others joining),
  // at `epoch`.
  absl::StatusOr<ClusterMap> MapOf(const std::vector<int>& ring_ids,
                                   uint64_t epoch) const {
    ClusterMapSpec next = published().spec();
    next.epoch = epoch;
    for (ServerInfo& s : next.servers) {
      const bool on =
          std::find(ring_ids.begin(), ring_ids.end(), s.id) != ring_ids.end();
      s.state = on ? ServerState::kAlive : ServerState::kJoining;
    }
    return ClusterMap::Create(next);
  }

  // Moves the cluster to a ring of `ring_ids` with the protocol's phases.
  absl::Status Change(const std::vector<int>& ring_ids,
                      const ChangeOptions& options = {}) {
    const ClusterMap old = published();
    v1::ClusterMap target;
    target.set_ready(true);
    for (int id : ring_ids) {
      v1::NodeEntry* entry = target.add_servers();
      entry->set_rank(id);
      entry->set_address(old.Find(id)->address);
      entry->set_state(v1::NODE_STATE_ALIVE);
    }
    const uint64_t id = next_id_++;
    std::vector<int> all, old_ring;
    for (const ServerInfo& s : old.servers()) {
      all.push_back(s.id);
      if (OnRing(s.state)) old_ring.push_back(s.id);
    }
    auto phase = [&](v1::ReshardPhase p, const std::vector<int>& on,
                     const v1::ClusterMap& map) -> absl::Status {
      std::vector<absl::Status> results(on.size());
      std::vector<std::thread> threads;
      for (size_t i = 0; i < on.size(); ++i) {
        threads.emplace_back([&, i] {
          v1::ReshardRequest req;
          req.set_phase(p);
          req.set_migration_id(id);
          *req.mutable_target() = map;
          req.set_batch_rows(256);
          req.set_max_rows_per_second(options.rows_per_second);
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(60));
          v1::ReshardResponse resp;
          grpc::Status s = stubs_[on[i]]->Reshard(&ctx, req, &resp);
          results[i] = s.ok() ? absl::OkStatus()
                              : absl::InternalError(
                                    absl::StrCat("server ", on[i], " phase ", p,
                                                 ": ", s.error_message()));
          absl::MutexLock lock(&mu_);
          rows_moved_ += p == v1::RESHARD_PHASE_HANDOFF ? resp.rows_moved() : 0;
        });
      }
      for (auto& t : threads) t.join();
      for (const absl::Status& s : results) PSDB_RETURN_IF_ERROR(s);
      return absl::OkStatus();
    };
    PSDB_RETURN_IF_ERROR(phase(v1::RESHARD_PHASE_PREPARE, all, target));
    PSDB_RETURN_IF_ERROR(phase(v1::RESHARD_PHASE_COPY, old_ring, target));
    if (options.before_close) options.before_close();
    if (options.abort_after_copy) {
      return phase(v1::RESHARD_PHASE_ABORT, all, target);
    }
    PSDB_RETURN_IF_ERROR(phase(v1::RESHARD_PHASE_CLOSE, old_ring, target));
    PSDB_RETURN_IF_ERROR(phase(v1::RESHARD_PHASE_HANDOFF, old_ring, target));
    // Publish: the commit point.
    PSDB_ASSIGN_OR_RETURN(ClusterMap next_map,
                          MapOf(ring_ids, old.epoch() + 1));
    {
      absl::MutexLock lock(&mu_);
      published_ = next_map;
    }
    target.set_epoch(next_map.epoch());
    return phase(v1::RESHARD_PHASE_COMMIT, all, target);
  }

  // The phase server `i` is in for the migration Change runs now.
  v1::ReshardPhase PhaseOf(int i) {
    v1::ReshardRequest req;
    req.set_phase(v1::RESHARD_PHASE_STATUS);
    req.set_migration_id(next_id_ - 1);
    grpc::ClientContext ctx;
    v1::ReshardResponse resp;
    if (!stubs_[i]->Reshard(&ctx, req, &resp).ok()) {
      return v1::RESHARD_PHASE_UNSPECIFIED;
    }
    return resp.phase();
  }

  // How many servers' stores hold `table`.
  int StoresWithTable(const std::string& table) const {
    int n = 0;
    for (const auto& store : stores_) n += store->GetTable(table).ok();
    return n;
  }

  // Every key of `table` each server's store holds, sorted.
  std::vector<std::vector<uint64_t>> KeysByServer(const std::string& table) {
    std::vector<std::vector<uint64_t>> out(stores_.size());
    for (size_t i = 0; i < stores_.size(); ++i) {
      EXPECT_OK(stores_[i]->ScanKeys(
          table, 1024, [&](absl::Span<const uint64_t> keys) {
            out[i].insert(out[i].end(), keys.begin(), keys.end());
            return absl::OkStatus();
          }));
      std::sort(out[i].begin(), out[i].end());
    }
    return out;
  }

  // Each server holds exactly the keys it owns under the published map.
  void ExpectEveryRowAtItsOwner(const std::string& table) {
    const ClusterMap map = published();
    const auto keys = KeysByServer(table);
    for (size_t i = 0; i < keys.size(); ++i) {
      for (uint64_t key : keys[i]) {
        ASSERT_EQ(map.Owner(key), static_cast<ServerId>(i))
            << "key " << key << " is on server " << i;
      }
    }
  }

 private:
  ScratchDir dir_;
  mutable absl::Mutex mu_;
  ClusterMap published_ ABSL_GUARDED_BY(mu_);
  uint64_t rows_moved_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ = 1;
  std::vector<std::unique_ptr<Store>> stores_;
  std::vector<std::unique_ptr<PsServer>> servers_;
  std::vector<std::unique_ptr<v1::ParameterService::Stub>> stubs_;
};

TableSpec CountingTable() {
  TableSpec spec;
  spec.name = "count";
  spec.dim = 1;
  spec.optimizer.kind = optim::OptimizerKind::kSgd;
  spec.optimizer.learning_rate = 1.0f;
  spec.initializer.kind = InitKind::kZeros;
  return spec;
}

// Creates the counting table through `client` and counts keys 0..n-1 once
// (each row 1); returns the keys.
absl::StatusOr<std::vector<uint64_t>> CountOnce(RemoteClient& client,
                                                size_t n) {
  PSDB_RETURN_IF_ERROR(client.CreateTable(CountingTable()));
  std::vector<uint64_t> keys(n);
  std::iota(keys.begin(), keys.end(), 0);
  PSDB_RETURN_IF_ERROR(
      client.Push("count", keys, std::vector<float>(n, -1.0f), {}));
  return keys;
}

TEST(LiveReshardTest, AsyncPushesLandExactlyOnceThroughAddAndDrain) {
  LiveCluster cluster(4, 3, /*sync_workers=*/0);
  ASSERT_OK_AND_ASSIGN(auto admin, cluster.Client(0, false));
  ASSERT_OK(admin->CreateTable(CountingTable()));
  constexpr int kThreads = 3;
  constexpr uint64_t kKeys = 6000;
  std::atomic<int> pushes{0};
  std::atomic<bool> stop{false};
  std::vector<std::map<uint64_t, int>> counted(kThreads);
  std::vector<absl::Status> errors(kThreads);
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([&, w] {
      auto client = cluster.Client(w, false);
      if (!client.ok()) {
        errors[w] = client.status();
        return;
      }
      std::mt19937_64 rng(w + 1);
      while (!stop.load()) {
        std::vector<uint64_t> keys(200);
        for (uint64_t& k : keys) k = rng() % kKeys;
        const std::vector<float> grads(keys.size(), -1.0f);
        absl::Status s = (*client)->Push("count", keys, grads, {});
        if (!s.ok()) {
          errors[w] = s;
          return;
        }
        for (uint64_t k : keys) ++counted[w][k];
        ++pushes;
      }
    });
  }
  // Waits for `n` more pushes; false (and the workers stopped) if the
  // workers stall or fail.
  auto more_pushes = [&](int n) {
    const int from = pushes.load();
    const bool ok = WaitFor([&] { return pushes.load() >= from + n; });
    if (!ok) {
      stop = true;
      for (auto& t : workers) t.join();
      workers.clear();
    }
    return ok;
  };
  absl::Status changed;
  if (more_pushes(30)) changed = cluster.Change({0, 1, 2, 3});  // add 3
  if (changed.ok() && more_pushes(30)) {
    changed = cluster.Change({1, 2, 3});  // drain server 0
  }
  if (changed.ok()) more_pushes(30);
  stop = true;
  for (auto& t : workers) t.join();
  ASSERT_OK(changed);
  for (const absl::Status& e : errors) ASSERT_OK(e);
  ASSERT_EQ(cluster.published().epoch(), 3u);

  std::map<uint64_t, int> total;
  for (const auto& m : counted) {
    for (const auto& [k, n] : m) total[k] += n;
  }
  std::vector<uint64_t> keys;
  for (const auto& [k, n] : total) keys.push_back(k);
  ASSERT_OK_AND_ASSIGN(auto reader, cluster.Client(0, false));
  EXPECT_EQ(reader->epoch(), 3u);
  RowBatch rows;
  ASSERT_OK(reader->PullRows("count", keys, &rows));
  int wrong = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (rows.values[i] != static_cast<float>(total[keys[i]])) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "of " << keys.size() << " keys";
  cluster.ExpectEveryRowAtItsOwner("count");
  EXPECT_TRUE(cluster.KeysByServer("count")[0].empty());  // drained
}

TEST(LiveReshardTest, AddMovesAboutOneInNPlusOneRowsOnlyOntoTheNewServer) {
  LiveCluster cluster(4, 3, 0);
  ASSERT_OK_AND_ASSIGN(auto client, cluster.Client(0, false));
  ASSERT_OK(client->CreateTable(CountingTable()));
  std::vector<uint64_t> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7919 + 13;
  std::vector<float> out(keys.size());
  ASSERT_OK(client->Pull("count", keys, absl::MakeSpan(out), {}));
  const auto before = cluster.KeysByServer("count");
  ASSERT_OK(cluster.Change({0, 1, 2, 3}));
  const auto after = cluster.KeysByServer("count");
  // Old servers only lost rows; the new one holds what they lost.
  size_t lost = 0;
  for (int i = 0; i < 3; ++i) {
    std::set<uint64_t> now(after[i].begin(), after[i].end());
    for (uint64_t k : now) {
      EXPECT_TRUE(std::binary_search(before[i].begin(), before[i].end(), k));
    }
    lost += before[i].size() - after[i].size();
  }
  EXPECT_EQ(after[3].size(), lost);
  const double expected = keys.size() / 4.0;
  EXPECT_GT(after[3].size(), 0.8 * expected);
  EXPECT_LT(after[3].size(), 1.2 * expected);
  cluster.ExpectEveryRowAtItsOwner("count");
}

TEST(LiveReshardTest, AbortLeavesTheMapAndEveryRow) {
  LiveCluster cluster(4, 3, 0);
  ASSERT_OK_AND_ASSIGN(auto client, cluster.Client(0, false));
  ASSERT_OK_AND_ASSIGN(const std::vector<uint64_t> keys,
                       CountOnce(*client, 3000));
  const auto before = cluster.KeysByServer("count");
  ASSERT_OK(cluster.Change({0, 1, 2, 3}, {.abort_after_copy = true}));
  EXPECT_EQ(cluster.published().epoch(), 1u);
  EXPECT_EQ(cluster.KeysByServer("count"), before);  // the copies are gone
  ASSERT_OK(
      client->Push("count", keys, std::vector<float>(keys.size(), -1.0f), {}));
  RowBatch rows;
  ASSERT_OK(client->PullRows("count", keys, &rows));
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(rows.values[i], 2.0f);
}

// A synchronous round whose first push arrived before PREPARE and whose
// last arrives after CLOSE: its apply writes the first push's keys, which
// no request since PREPARE named, after COPY sent their rows. The source
// counts the keys of rounds pending at PREPARE as touched, so HANDOFF
// sends them again; and their steps as started, so CLOSE lets the last
// push in (holding it would keep CLOSE waiting for the round).
TEST(LiveReshardTest, RoundPendingAtPrepareReachesTheNewOwner) {
  LiveCluster cluster(4, 3, /*sync_workers=*/2);
  ASSERT_OK_AND_ASSIGN(auto w0, cluster.Client(0, true));
  ASSERT_OK_AND_ASSIGN(auto w1, cluster.Client(1, true));
  ASSERT_OK(w0->CreateTable(CountingTable()));
  ASSERT_OK_AND_ASSIGN(const ClusterMap target, cluster.MapOf({0, 1, 2, 3}, 2));
  uint64_t moving = 0;
  while (target.Owner(moving) != 3) ++moving;
  uint64_t staying = moving + 1;
  while (target.Owner(staying) == 3) ++staying;
  const std::vector<uint64_t> keys = {moving, staying};
  std::vector<float> values(2);
  ASSERT_OK(w0->Pull("count", keys, absl::MakeSpan(values), {}));  // rows exist
  PushOptions push;
  push.step = 1;
  // Returns once recorded: the round waits for worker 1.
  ASSERT_OK(w0->Push("count", {moving}, {-1.0f}, push));
  // Worker 1's push, once every old server is in CLOSE.
  auto all_closed = [&] {
    for (int i = 0; i < 3; ++i) {
      if (cluster.PhaseOf(i) != v1::RESHARD_PHASE_CLOSE) return false;
    }
    return true;
  };
  std::thread last;
  auto push_when_closed = [&] {
    last = std::thread([&] {
      EXPECT_TRUE(WaitFor(all_closed));
      EXPECT_OK(w1->Push("count", {staying}, {-1.0f}, push));
    });
  };
  EXPECT_OK(cluster.Change({0, 1, 2, 3}, {.before_close = push_when_closed}));
  if (last.joinable()) last.join();
  ASSERT_OK_AND_ASSIGN(auto reader, cluster.Client(0, false));
  RowBatch rows;
  ASSERT_OK(reader->PullRows("count", keys, &rows));
  // Each key: the mean of one worker's -1 and the other's 0, at rate 1.
  EXPECT_EQ(rows.values[0], 0.5f);
  EXPECT_EQ(rows.values[1], 0.5f);
  EXPECT_EQ(rows.headers[0].update_count, 1u);
  cluster.ExpectEveryRowAtItsOwner("count");
}

// One Resharder on its own (no peers are reached: no phase here sends
// rows): PREPARE waits for the requests the gate admitted before it that
// the migration does not track, since COPY must not read rows they may
// still write; requests admitted once it is prepared do not hold it up.
class ResharderTest : public ::testing::Test {
 protected:
  ResharderTest() {
    auto store = Store::Open({}, dir_.Sub("s"));
    EXPECT_OK(store.status());
    store_ = *std::move(store);
    ClusterMapSpec spec;
    spec.epoch = 1;
    target_.set_ready(true);
    for (int i = 0; i < 4; ++i) {
      ServerInfo info;
      info.id = i;
      info.address = absl::StrCat("127.0.0.1:", 1000 + i);
      info.state = i < 3 ? ServerState::kAlive : ServerState::kJoining;
      spec.servers.push_back(info);
      v1::NodeEntry* entry = target_.add_servers();
      entry->set_rank(i);
      entry->set_address(info.address);
      entry->set_state(v1::NODE_STATE_ALIVE);
    }
    auto map = ClusterMap::Create(spec);
    EXPECT_OK(map.status());
    resharder_ = std::make_unique<internal::Resharder>(
        *map, 0, store_.get(), /*sync=*/nullptr, ClientTlsOptions(), 1024);
  }

  // A pull of key 7 through the gate: admitted, not held.
  std::optional<internal::Resharder::Pass> Enter() {
    internal::GateRequest pull;
    pull.table = "t";
    pull.keys = absl::MakeConstSpan(&key_, 1);
    pull.client_epoch = 1;
    auto pass = resharder_->TryEnter(pull, [] {});
    EXPECT_OK(pass.status());
    EXPECT_TRUE(pass.ok() && pass->has_value());
    return pass.ok() ? *std::move(pass) : std::nullopt;
  }

  absl::Status Phase(v1::ReshardPhase phase, uint64_t id,
                     absl::Duration timeout = absl::Seconds(60)) {
    v1::ReshardRequest req;
    req.set_phase(phase);
    req.set_migration_id(id);
    *req.mutable_target() = target_;
    v1::ReshardResponse resp;
    return resharder_->Reshard(req, &resp, absl::Now() + timeout);
  }

  // PREPARE `id` on a thread; `done()` once it returned, `status()` after.
  class PrepareThread {
   public:
    PrepareThread(ResharderTest* test, uint64_t id)
        : thread_([this, test, id] {
            absl::Status s = test->Phase(v1::RESHARD_PHASE_PREPARE, id);
            absl::MutexLock lock(&mu_);
            status_ = std::move(s);
          }) {}
    ~PrepareThread() {
      if (thread_.joinable()) thread_.join();
    }
    bool done() {
      absl::MutexLock lock(&mu_);
      return status_.has_value();
    }
    absl::Status status() {
      if (thread_.joinable()) thread_.join();
      absl::MutexLock lock(&mu_);
      return *status_;
    }

   private:
    absl::Mutex mu_;
    std::optional<absl::Status> status_ ABSL_GUARDED_BY(mu_);
    std::thread thread_;
  };

  // Whether migration `id` is prepared here (STATUS answers for it).
  bool Prepared(uint64_t id) {
    return Phase(v1::RESHARD_PHASE_STATUS, id).ok();
  }

  ScratchDir dir_;
  std::unique_ptr<Store> store_;
  v1::ClusterMap target_;
  std::unique_ptr<internal::Resharder> resharder_;
  const uint64_t key_ = 7;
};

TEST_F(ResharderTest, PrepareWaitsForRequestsAdmittedBeforeIt) {
  std::optional<internal::Resharder::Pass> before = Enter();
  EXPECT_EQ(Phase(v1::RESHARD_PHASE_PREPARE, 1, absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::optional<internal::Resharder::Pass> after = Enter();  // not waited for
  before.reset();
  EXPECT_OK(Phase(v1::RESHARD_PHASE_PREPARE, 1));  // re-sent: waits again
  after.reset();
  EXPECT_OK(Phase(v1::RESHARD_PHASE_ABORT, 1));
}

TEST_F(ResharderTest, AnsweringTheLastRequestWakesAWaitingPrepare) {
  std::optional<internal::Resharder::Pass> before = Enter();
  PrepareThread prepare(this, 1);
  // Prepared here means waiting: PREPARE keeps the lock until it waits.
  EXPECT_TRUE(WaitFor([&] { return Prepared(1); }));
  EXPECT_FALSE(prepare.done());
  before.reset();
  EXPECT_TRUE(WaitFor([&] { return prepare.done(); }, absl::Seconds(10)));
  EXPECT_OK(prepare.status());
  EXPECT_OK(Phase(v1::RESHARD_PHASE_ABORT, 1));
}

TEST_F(ResharderTest, AbortEndsAWaitingPrepare) {
  std::optional<internal::Resharder::Pass> before = Enter();
  PrepareThread prepare(this, 1);
  EXPECT_TRUE(WaitFor([&] { return Prepared(1); }));
  EXPECT_OK(Phase(v1::RESHARD_PHASE_ABORT, 1));
  EXPECT_TRUE(WaitFor([&] { return prepare.done(); }, absl::Seconds(10)));
  EXPECT_EQ(prepare.status().code(), absl::StatusCode::kAborted);
  before.reset();
}

// A request tracked by a migration that ended (here: aborted) is not
// tracked by the next one, which waits for it.
TEST_F(ResharderTest, PrepareWaitsForRequestsOfAnEndedMigration) {
  ASSERT_OK(Phase(v1::RESHARD_PHASE_PREPARE, 1));
  std::optional<internal::Resharder::Pass> during = Enter();
  ASSERT_OK(Phase(v1::RESHARD_PHASE_ABORT, 1));
  EXPECT_EQ(Phase(v1::RESHARD_PHASE_PREPARE, 2, absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  during.reset();
  EXPECT_OK(Phase(v1::RESHARD_PHASE_PREPARE, 2));
  EXPECT_OK(Phase(v1::RESHARD_PHASE_ABORT, 2));
}

// Rows in flight would re-create a dropped table at their new owner, so a
// drop is refused (UNAVAILABLE, nothing dropped) while a migration runs.
TEST(LiveReshardTest, DropTableIsRefusedWhileRowsMove) {
  LiveCluster cluster(4, 3, 0);
  ASSERT_OK_AND_ASSIGN(auto client, cluster.Client(0, false));
  ASSERT_OK_AND_ASSIGN(const std::vector<uint64_t> keys,
                       CountOnce(*client, 1000));
  absl::Status dropped;
  ASSERT_OK(cluster.Change({0, 1, 2, 3}, {.before_close = [&] {
                             dropped = client->DropTable("count");
                           }}));
  EXPECT_EQ(dropped.code(), absl::StatusCode::kUnavailable) << dropped;
  EXPECT_THAT(dropped.message(), ::testing::HasSubstr("live resharding"));
  RowBatch rows;
  ASSERT_OK(client->PullRows("count", keys, &rows));
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(rows.values[i], 1.0f);
  ASSERT_OK(client->DropTable("count"));
  EXPECT_EQ(client->GetTable("count").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(cluster.StoresWithTable("count"), 0);
}

TableSpec AdamTable() {
  TableSpec spec;
  spec.name = "emb";
  spec.dim = 8;
  spec.optimizer.kind = optim::OptimizerKind::kAdam;
  spec.optimizer.learning_rate = 0.01f;
  spec.seed = 11;
  return spec;
}

// Two BSP workers for `steps` steps; `at_step(s)` is called by worker 0
// after step s (changes run beside the workers, not between steps).
RowBatch RunSync(LiveCluster& cluster, int steps,
                 const std::function<void(int)>& at_step) {
  constexpr uint64_t kKeys = 3000;
  {
    auto admin = cluster.Client(0, true);
    EXPECT_TRUE(admin.ok());
    EXPECT_OK((*admin)->CreateTable(AdamTable()));
  }
  std::barrier sync_point(2);
  std::vector<std::thread> workers;
  std::vector<absl::Status> errors(2);
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      auto client = cluster.Client(w, true);
      if (!client.ok()) {
        errors[w] = client.status();
        return;
      }
      std::mt19937_64 rng(100 + w);
      for (int step = 1; step <= steps; ++step) {
        std::vector<uint64_t> keys(96);
        for (uint64_t& k : keys) k = rng() % kKeys;
        std::vector<float> values(keys.size() * 8), grads(keys.size() * 8);
        absl::Status s =
            (*client)->Pull("emb", keys, absl::MakeSpan(values), {});
        for (size_t i = 0; s.ok() && i < values.size(); ++i) {
          grads[i] = 0.5f * values[i] + 0.01f * static_cast<float>(w + 1) -
                     0.003f * static_cast<float>(step % 7);
        }
        PushOptions push;
        push.step = step;
        if (s.ok()) s = (*client)->Push("emb", keys, grads, push);
        if (!s.ok() && errors[w].ok()) errors[w] = s;
        sync_point.arrive_and_wait();
        if (w == 0) at_step(step);
      }
    });
  }
  for (auto& t : workers) t.join();
  for (const absl::Status& e : errors) EXPECT_OK(e);
  std::vector<uint64_t> all(kKeys);
  for (uint64_t k = 0; k < kKeys; ++k) all[k] = k;
  RowBatch rows;
  auto reader = cluster.Client(0, false);
  EXPECT_TRUE(reader.ok());
  EXPECT_OK((*reader)->PullRows("emb", all, &rows));
  return rows;
}

TEST(LiveReshardTest, SyncRunWithAddAndDrainIsBitIdenticalToAStaticRun) {
  LiveCluster reference(3, 3, 2);
  const RowBatch expected = RunSync(reference, 60, [](int) {});

  LiveCluster cluster(4, 3, 2);
  std::thread change;
  const RowBatch got = RunSync(cluster, 60, [&](int step) {
    // Beside the workers: they go on while rows move.
    if (step == 20 || step == 40) {
      if (change.joinable()) change.join();
      const std::vector<int> ring =
          step == 20 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{1, 2, 3};
      change =
          std::thread([&cluster, ring] { EXPECT_OK(cluster.Change(ring)); });
    }
  });
  if (change.joinable()) change.join();
  EXPECT_EQ(cluster.published().epoch(), 3u);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(0, std::memcmp(got.values.data(), expected.values.data(),
                           got.values.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(got.state.data(), expected.state.data(),
                           got.state.size() * sizeof(float)));
  int headers_differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const RowHeader& a = got.headers[i];
    const RowHeader& b = expected.headers[i];
    if (a.last_update_step != b.last_update_step ||
        a.update_count != b.update_count || a.frequency != b.frequency) {
      ++headers_differ;
    }
  }
  EXPECT_EQ(headers_differ, 0);
  cluster.ExpectEveryRowAtItsOwner("emb");
}

}  // namespace
}  // namespace psdb::rpc
