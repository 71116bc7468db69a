// Consistent reads across shards and tables (issue 33's test): a 2-shard
// training cluster writes a cluster checkpoint every 0.3 s, each setting
// every row of a sparse and a dense table to the checkpoint's step; two
// in-process replicas per shard follow the root (the default
// serve_versions, 2); 4 reader threads read both tables over both shards
// with RemoteClient::PullConsistent for a bounded time. No read fails, no
// answer mixes versions (every row equals the returned version's step),
// and each reader's versions never go back.
//
// CI time: kReadSeconds (10 s; the issue says 20 s, cut in half to keep
// the ASan CI run reasonable on 2 cores) plus about 2 s of set-up.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "psdb/client_url.h"
#include "psdb/store.h"
#include "rpc/client/remote_client.h"
#include "rpc/control/cluster_checkpoint.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/server/server.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "util/status_macros.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ScratchDir;
using ::psdb::testing::WaitFor;
using ::testing::HasSubstr;

constexpr absl::Duration kReadSeconds = absl::Seconds(10);
constexpr absl::Duration kCheckpointEvery = absl::Milliseconds(300);
constexpr int kSparseDim = 8;
constexpr int kDenseDim = 4;

// SGD with learning rate 1 from zeros: a push of -1 to every row adds
// exactly 1, so after step s every row is s.
TableSpec Spec(const std::string& name, int dim) {
  TableSpec spec;
  spec.name = name;
  spec.dim = dim;
  spec.initializer.kind = InitKind::kZeros;
  spec.optimizer.kind = optim::OptimizerKind::kSgd;
  spec.optimizer.learning_rate = 1.0f;
  return spec;
}

std::vector<uint64_t> SparseKeys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 200; ++k) keys.push_back(k * 7919 + 3);
  return keys;
}

std::vector<uint64_t> DenseKeys() {  // block indices
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 16; ++k) keys.push_back(k);
  return keys;
}

// A 2-server training cluster (in-process, static map) with both tables;
// Step() makes every row of both the next step and writes a cluster
// checkpoint under a root.
class TrainingCluster {
 public:
  explicit TrainingCluster(const ScratchDir& dir) {
    testing::ReservedPort p0, p1;
    addrs_ = {absl::StrCat("127.0.0.1:", p0.port()),
              absl::StrCat("127.0.0.1:", p1.port())};
    map_ = ClusterMap::FromAddresses(addrs_).value();
    for (int s = 0; s < 2; ++s) {
      stores_.push_back(
          Store::Open({}, dir.Sub(absl::StrCat("train", s))).value());
      ServerOptions options;
      options.port = s == 0 ? p0.port() : p1.port();
      options.cluster = map_;
      options.shard_id = s;
      options.num_threads = 2;
      servers_.push_back(
          PsServer::Start(options, stores_.back().get()).value());
    }
    client_ =
        OpenParameterClient(absl::StrCat("servers:", addrs_[0], ",", addrs_[1]))
            .value();
    EXPECT_OK(client_->CreateTable(Spec("emb", kSparseDim)));
    EXPECT_OK(client_->CreateTable(Spec("dense", kDenseDim)));
  }
  ~TrainingCluster() {
    client_.reset();
    for (auto& server : servers_) server->Shutdown(absl::Seconds(5));
  }

  // Step s: every row of both tables becomes s (pushes at step s), then a
  // cluster checkpoint under `root`; returns its id.
  absl::StatusOr<std::string> Step(const std::string& root) {
    ++step_;
    PushOptions push;
    push.step = step_;
    const std::vector<uint64_t> sparse = SparseKeys(), dense = DenseKeys();
    PSDB_RETURN_IF_ERROR(client_->Push(
        "emb", sparse, std::vector<float>(sparse.size() * kSparseDim, -1.0f),
        push));
    PSDB_RETURN_IF_ERROR(client_->Push(
        "dense", dense, std::vector<float>(dense.size() * kDenseDim, -1.0f),
        push));
    PSDB_ASSIGN_OR_RETURN(ClusterCheckpointInfo info,
                          WriteClusterCheckpoint(map_, root, step_));
    return info.id;
  }

  ParameterClient& client() { return *client_; }
  int64_t step() const { return step_; }

 private:
  std::vector<std::string> addrs_;
  ClusterMap map_ = ClusterMap::Empty(1);
  std::vector<std::unique_ptr<Store>> stores_;
  std::vector<std::unique_ptr<PsServer>> servers_;
  std::unique_ptr<ParameterClient> client_;
  int64_t step_ = 0;
};

// A replica of shard `shard` following `root`, in-process.
struct Replica {
  std::unique_ptr<CheckpointFollower> follower;
  std::unique_ptr<PsServer> server;
};
absl::StatusOr<Replica> StartReplica(const std::string& root, int shard) {
  FollowerOptions follow;
  follow.root = root;
  follow.shard_id = shard;
  // inotify, and a 100 ms poll as the fallback.
  follow.interval = absl::Milliseconds(100);
  follow.store.memory_budget_bytes = 16ull << 20;
  Replica out;
  PSDB_ASSIGN_OR_RETURN(out.follower, CheckpointFollower::Start(follow));
  ServerOptions options;
  options.num_threads = 2;
  PSDB_ASSIGN_OR_RETURN(out.server,
                        PsServer::StartServing(options, out.follower.get()));
  return out;
}

// Whether every float of `rows` is `v`.
bool All(const std::vector<float>& rows, float v) {
  for (float x : rows) {
    if (x != v) return false;
  }
  return true;
}

TEST(ConsistentReadTest, ReadersSeeOneVersionAcrossShardsAndTables) {
  ScratchDir dir;
  TrainingCluster training(dir);
  const std::string root = dir.Sub("ckpt");
  ASSERT_OK(training.Step(root).status());
  const std::vector<uint64_t> sparse = SparseKeys(), dense = DenseKeys();
  // Two replicas of each shard.
  std::vector<Replica> replicas;
  for (int r = 0; r < 4; ++r) {
    ASSERT_OK_AND_ASSIGN(Replica replica, StartReplica(root, r / 2));
    replicas.push_back(std::move(replica));
  }
  const std::string url = absl::StrCat(
      "servers:", replicas[0].server->address(), "|",
      replicas[1].server->address(), ",", replicas[2].server->address(), "|",
      replicas[3].server->address());

  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, failed{0}, mixed{0}, backwards{0};
  absl::Mutex mu;
  std::string first_error;            // guarded by mu
  std::vector<int64_t> newest(4, 0);  // the newest step each reader saw
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      auto client = OpenParameterClient(url);
      if (!client.ok()) {
        failed.fetch_add(1);
        return;
      }
      std::vector<float> emb(sparse.size() * kSparseDim);
      std::vector<float> blocks(dense.size() * kDenseDim);
      const std::vector<TableRead> both = {
          {"emb", sparse, absl::MakeSpan(emb)},
          {"dense", dense, absl::MakeSpan(blocks)}};
      ConsistentReadOptions options;
      options.serving = true;
      uint64_t last_seq = 0;
      while (!stop.load()) {
        absl::StatusOr<ReadVersion> version =
            (*client)->PullConsistent(both, options);
        if (!version.ok()) {
          failed.fetch_add(1);
          absl::MutexLock l(&mu);
          if (first_error.empty()) first_error = version.status().ToString();
          continue;
        }
        reads.fetch_add(1);
        const float want = static_cast<float>(version->step);
        if (version->step == 0 || !All(emb, want) || !All(blocks, want)) {
          mixed.fetch_add(1);
        }
        if (version->seq < last_seq) backwards.fetch_add(1);
        last_seq = version->seq;
        absl::MutexLock l(&mu);
        newest[t] = version->step;
      }
    });
  }

  // The writer: a checkpoint every kCheckpointEvery (a pace, not a wait
  // for anything) for kReadSeconds.
  const absl::Time end = absl::Now() + kReadSeconds;
  absl::Time next = absl::Now();
  while (absl::Now() < end) {
    next += kCheckpointEvery;
    absl::SleepFor(next - absl::Now());
    ASSERT_OK(training.Step(root).status());
  }
  const int64_t last = training.step();
  // Every reader reaches the last checkpoint: the replicas swapped to it
  // and the readers kept up.
  EXPECT_TRUE(WaitFor([&] {
    absl::MutexLock l(&mu);
    for (int64_t s : newest) {
      if (s != last) return false;
    }
    return true;
  }));
  stop = true;
  for (auto& t : readers) t.join();
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(failed.load(), 0) << first_error;
  }
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_EQ(backwards.load(), 0);
  EXPECT_GE(last, 10);  // the writer kept its pace
  EXPECT_GT(reads.load(), 40);
  std::printf("%d consistent reads over %lld checkpoints\n", reads.load(),
              static_cast<long long>(last));
  for (Replica& replica : replicas) replica.server->Shutdown(absl::Seconds(5));
}

// Shard 0's replica follows one root and shard 1's another, so no
// checkpoint is common to both: a consistent read fails at its deadline
// with FAILED_PRECONDITION naming each shard's versions; a plain Pull
// still answers (each shard its newest); a version a shard does not hold
// is NOT_FOUND naming it. A training cluster's consistent read has no
// version, and naming one is FAILED_PRECONDITION.
TEST(ConsistentReadTest, NoCommonVersionFailsNamingEachShardsVersions) {
  ScratchDir dir;
  TrainingCluster training(dir);
  const std::vector<uint64_t> sparse = SparseKeys(), dense = DenseKeys();
  std::vector<float> emb(sparse.size() * kSparseDim);
  std::vector<float> blocks(dense.size() * kDenseDim);
  const std::vector<TableRead> both = {
      {"emb", sparse, absl::MakeSpan(emb)},
      {"dense", dense, absl::MakeSpan(blocks)}};
  ASSERT_OK_AND_ASSIGN(const std::string a, training.Step(dir.Sub("a")));
  ASSERT_OK_AND_ASSIGN(ReadVersion none,
                       training.client().PullConsistent(both, {}));
  EXPECT_EQ(none.checkpoint_id, "");
  EXPECT_TRUE(All(emb, 1.0f));
  EXPECT_TRUE(All(blocks, 1.0f));
  ConsistentReadOptions named;
  named.version = a;
  EXPECT_THAT(training.client().PullConsistent(both, named).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(const std::string b, training.Step(dir.Sub("b")));
  ASSERT_OK_AND_ASSIGN(Replica zero, StartReplica(dir.Sub("a"), 0));
  ASSERT_OK_AND_ASSIGN(Replica one, StartReplica(dir.Sub("b"), 1));

  RemoteClientOptions options;
  ASSERT_OK_AND_ASSIGN(options.cluster, ClusterMap::FromServerList(absl::StrCat(
                                            zero.server->address(), ",",
                                            one.server->address())));
  options.call_timeout = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(auto client, RemoteClient::Open(options));
  const absl::Status split = client->PullConsistent(both, {}).status();
  EXPECT_THAT(split, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(split.message()),
              HasSubstr(absl::StrCat("server 0 (", zero.server->address(),
                                     ") answered ", a, " (holds ", a, ")")));
  EXPECT_THAT(std::string(split.message()),
              HasSubstr(absl::StrCat("server 1 (", one.server->address(),
                                     ") answered ", b, " (holds ", b, ")")));

  ASSERT_OK(client->Pull("emb", sparse, absl::MakeSpan(emb), {}));
  for (size_t i = 0; i < sparse.size(); ++i) {
    const float want = options.cluster.Owner(sparse[i]) == 0 ? 1.0f : 2.0f;
    for (int d = 0; d < kSparseDim; ++d) {
      ASSERT_EQ(emb[i * kSparseDim + d], want) << sparse[i];
    }
  }
  PullOptions at_a;
  at_a.version = a;
  const absl::Status missing =
      client->Pull("emb", sparse, absl::MakeSpan(emb), at_a);
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr(absl::StrCat("version ", a, " is not held")));
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr(absl::StrCat("it holds ", b)));
  zero.server->Shutdown(absl::Seconds(5));
  one.server->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace psdb::rpc
