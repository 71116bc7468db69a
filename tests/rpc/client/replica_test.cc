// Read-only replicas through a "servers:A|B" URL, against real ps-server
// processes holding the same rows: reads alternate between the replicas,
// pulls keep succeeding with exact values while one replica is SIGKILLed
// or frozen, and every write is refused before anything is sent.
#include <signal.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "psdb/client_url.h"
#include "psdb/table_spec.h"
#include "rpc/client/remote_client.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildProcess;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::StartPsServer;
using ::psdb::testing::WaitFor;

constexpr int kDim = 4;
// Keys 0..kRows-1 hold the rows below on both replicas.
constexpr uint64_t kRows = 200;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "emb";
  spec.dim = kDim;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.seed = 11;
  return spec;
}

// The value j of key k's row (exact in float for the keys used).
float Value(uint64_t key, int j) {
  return static_cast<float>(key) + 0.125f * static_cast<float>(j);
}

// What a serving pull of `key` returns: its row, or the table's initial
// value for a key no replica holds.
std::vector<float> Expected(uint64_t key) {
  std::vector<float> row(kDim);
  if (key < kRows) {
    for (int j = 0; j < kDim; ++j) row[j] = Value(key, j);
  } else {
    DefaultRow(Spec(), key, absl::MakeSpan(row));
  }
  return row;
}

uint64_t TableHits(ParameterClient& client) {
  absl::StatusOr<StoreStats> stats = client.Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  if (!stats.ok() || stats->tables.size() != 1) return 0;
  return stats->tables[0].hits;
}

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) StartFilledServer();
    url_ = absl::StrCat("servers:", servers_[0]->ready_value(), "|",
                        servers_[1]->ready_value());
  }

  // Starts one more ps-server (alone: it owns every key) and fills it
  // through a client of its own with the rows of Value().
  void StartFilledServer() {
    const size_t i = servers_.size();
    ASSERT_OK_AND_ASSIGN(
        auto server,
        StartPsServer(
            {absl::StrCat("--data_dir=", dir_.Sub(absl::StrCat("replica", i))),
             "--port=0", "--threads=2"}));
    servers_.push_back(std::move(server));
    std::unique_ptr<RemoteClient> direct = Direct(i);
    ASSERT_NE(direct, nullptr);
    ASSERT_OK(direct->CreateTable(Spec()));
    std::vector<uint64_t> keys(kRows);
    RowBatch rows;
    rows.Resize(kDim, kDim, kRows);
    for (uint64_t k = 0; k < kRows; ++k) {
      keys[k] = k;
      for (int j = 0; j < kDim; ++j) {
        rows.values[k * kDim + j] = Value(k, j);
        rows.state[k * kDim + j] = 2.0f * Value(k, j);
      }
    }
    ASSERT_OK(direct->PutRows("emb", keys, rows));
  }

  // A client of replica `i` alone (a map without replicas: it may write).
  std::unique_ptr<RemoteClient> Direct(size_t i) {
    RemoteClientOptions options;
    options.cluster =
        ClusterMap::FromAddresses({servers_[i]->ready_value()}).value();
    options.call_timeout = absl::Seconds(20);
    auto client = RemoteClient::Open(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::unique_ptr<ParameterClient> Replicated(
      const RemoteClientOptions& options) {
    return Open(url_, options);
  }
  static std::unique_ptr<ParameterClient> Open(
      const std::string& url, const RemoteClientOptions& options) {
    auto client = OpenParameterClient(url, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  ScratchDir dir_;
  std::vector<std::unique_ptr<ChildProcess>> servers_;
  std::string url_;
};

// Pulls `keys` (serving) and checks every value; returns the status.
absl::Status PullAndCheck(ParameterClient& client,
                          absl::Span<const uint64_t> keys, bool* exact) {
  std::vector<float> out(keys.size() * kDim);
  PullOptions serving;
  serving.serving = true;
  absl::Status status = client.Pull("emb", keys, absl::MakeSpan(out), serving);
  *exact = true;
  if (!status.ok()) return status;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::vector<float> want = Expected(keys[i]);
    if (std::memcmp(out.data() + i * kDim, want.data(), kDim * 4) != 0) {
      *exact = false;
    }
  }
  return status;
}

TEST_F(ReplicaTest, PullsSurviveAReplicaKilledMidRun) {
  RemoteClientOptions options;
  options.call_timeout = absl::Seconds(20);
  std::unique_ptr<ParameterClient> client = Replicated(options);
  ASSERT_NE(client, nullptr);
  std::unique_ptr<RemoteClient> direct0 = Direct(0), direct1 = Direct(1);
  ASSERT_NE(direct0, nullptr);
  ASSERT_NE(direct1, nullptr);

  // Stats and ListTables count the one server once, not once per replica.
  ASSERT_OK_AND_ASSIGN(StoreStats stats, client->Stats());
  ASSERT_EQ(stats.tables.size(), 1u);
  EXPECT_EQ(stats.tables[0].memory_rows, kRows);
  ASSERT_OK_AND_ASSIGN(std::vector<TableSpec> tables, client->ListTables());
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0], Spec());

  // Reads alternate between the replicas: 10 pulls of 20 rows, one thread,
  // are 5 pulls (100 hits) on each.
  const uint64_t hits0 = TableHits(*direct0), hits1 = TableHits(*direct1);
  std::vector<uint64_t> batch(20);
  for (uint64_t k = 0; k < 20; ++k) batch[k] = k * 7;
  for (int i = 0; i < 10; ++i) {
    bool exact = false;
    ASSERT_OK(PullAndCheck(*client, batch, &exact));
    ASSERT_TRUE(exact) << "pull " << i;
  }
  EXPECT_EQ(TableHits(*direct0) - hits0, 100u);
  EXPECT_EQ(TableHits(*direct1) - hits1, 100u);

  // Four threads pull in a loop; replica 0 is SIGKILLed once they have made
  // 40 pulls, and they go on for 200 more.
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::atomic<int> wrong{0};
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      while (!stop.load()) {
        // 48 keys with duplicates, a few held by no replica.
        std::vector<uint64_t> keys(48);
        for (uint64_t& k : keys) k = rng() % (kRows + 10);
        bool exact = false;
        absl::Status status = PullAndCheck(*client, keys, &exact);
        if (!status.ok()) {
          failed.fetch_add(1);
          absl::MutexLock lock(&mu);
          if (first_error.empty()) first_error = status.ToString();
        } else if (!exact) {
          wrong.fetch_add(1);
        }
        done.fetch_add(1);
      }
    });
  }
  const bool warmed = WaitFor([&] { return done.load() >= 40; });
  int at_kill = done.load();
  if (warmed) {
    servers_[0]->Signal(SIGKILL);
    EXPECT_OK(servers_[0]->Wait().status());
    at_kill = done.load();
  }
  const bool went_on = WaitFor([&] { return done.load() >= at_kill + 200; });
  stop.store(true);
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(warmed) << "40 pulls did not finish";
  EXPECT_TRUE(went_on) << "only " << done.load() - at_kill
                       << " pulls after the kill";
  EXPECT_EQ(failed.load(), 0) << first_error;
  EXPECT_EQ(wrong.load(), 0);

  // Later calls of every kind that reads go to the live replica.
  ASSERT_OK_AND_ASSIGN(stats, client->Stats());
  ASSERT_EQ(stats.tables.size(), 1u);
  EXPECT_EQ(stats.tables[0].memory_rows, kRows);
  RowBatch rows;
  ASSERT_OK(client->PullRows("emb", {3, 199}, &rows));
  EXPECT_EQ(rows.values, (std::vector<float>{3, 3.125, 3.25, 3.375, 199,
                                             199.125, 199.25, 199.375}));
  EXPECT_EQ(rows.state[0], 6.0f);
}

// Two servers of two replicas each: every server's replicas take turns,
// whatever the other server's requests do.
TEST_F(ReplicaTest, EveryServerSpreadsItsReadsOverItsReplicas) {
  for (int i = 0; i < 2; ++i) StartFilledServer();
  ASSERT_EQ(servers_.size(), 4u);
  const std::string url = absl::StrCat(
      "servers:", servers_[0]->ready_value(), "|", servers_[1]->ready_value(),
      ",", servers_[2]->ready_value(), "|", servers_[3]->ready_value());
  std::unique_ptr<ParameterClient> client = Open(url, {});
  ASSERT_NE(client, nullptr);
  ASSERT_OK_AND_ASSIGN(std::vector<TableSpec> tables, client->ListTables());
  ASSERT_EQ(tables.size(), 1u);
  ASSERT_OK_AND_ASSIGN(ClusterMap map, ClusterMap::FromServerList(url));
  std::vector<uint64_t> keys(kRows);
  std::vector<uint64_t> owned(2, 0);  // keys per server
  for (uint64_t k = 0; k < kRows; ++k) {
    keys[k] = k;
    ++owned[map.Owner(k)];
  }
  ASSERT_GT(owned[0], 0u);
  ASSERT_GT(owned[1], 0u);
  std::vector<std::unique_ptr<RemoteClient>> direct;
  std::vector<uint64_t> before;
  for (size_t i = 0; i < 4; ++i) {
    direct.push_back(Direct(i));
    ASSERT_NE(direct.back(), nullptr);
    before.push_back(TableHits(*direct.back()));
  }
  for (int i = 0; i < 10; ++i) {
    bool exact = false;
    ASSERT_OK(PullAndCheck(*client, keys, &exact));
    ASSERT_TRUE(exact) << "pull " << i;
  }
  // Replicas 0 and 1 serve server 0, 2 and 3 server 1: 5 pulls each.
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(TableHits(*direct[i]) - before[i], 5 * owned[i / 2])
        << "replica " << i;
  }
}

TEST_F(ReplicaTest, AFrozenReplicaCostsOneAttemptTimeoutNotOnePerPull) {
  RemoteClientOptions options;
  options.call_timeout = absl::Seconds(30);
  options.replica_attempt_timeout = absl::Seconds(1);
  options.replica_avoid_time = absl::Minutes(10);
  std::unique_ptr<ParameterClient> client = Replicated(options);
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> keys = {1, 2, 3, 205};
  bool exact = false;
  ASSERT_OK(PullAndCheck(*client, keys, &exact));  // connects to both
  ASSERT_OK(PullAndCheck(*client, keys, &exact));
  ASSERT_TRUE(exact);

  // Frozen, not dead: its connection stays open and answers nothing.
  servers_[1]->Signal(SIGSTOP);
  const absl::Time start = absl::Now();
  for (int i = 0; i < 30; ++i) {
    SCOPED_TRACE(absl::StrCat("pull ", i));
    ASSERT_OK(PullAndCheck(*client, keys, &exact));
    ASSERT_TRUE(exact) << "pull " << i;
  }
  // One pull waits out the attempt timeout (1 s), then every pull avoids
  // the frozen replica: far below the 30 s of one timeout per pull
  // (or 15 s, every other pull).
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  servers_[1]->Signal(SIGCONT);
}

TEST_F(ReplicaTest, WritesAreRefusedBeforeAnythingIsSent) {
  std::unique_ptr<ParameterClient> client = Replicated({});
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> keys = {1, 2};
  std::vector<float> grads(keys.size() * kDim, 1.0f);
  RowBatch rows;
  rows.Resize(kDim, kDim, keys.size());
  std::fill(rows.values.begin(), rows.values.end(), -1.0f);
  TableSpec other = Spec();
  other.name = "other";
  const std::string root = dir_.Sub("ckpt");

  const std::vector<std::pair<std::string, absl::Status>> writes = {
      {"Push", client->Push("emb", keys, grads, {})},
      {"PutRows", client->PutRows("emb", keys, rows)},
      {"CreateTable", client->CreateTable(other)},
      {"DropTable", client->DropTable("emb")},
      {"Checkpoint", client->Checkpoint(root, {}).status()},
  };
  for (const auto& [op, status] : writes) {
    SCOPED_TRACE(op);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_EQ(status.message(),
              absl::StrCat(op, " refused: server 0 has 2 replicas (",
                           servers_[0]->ready_value(), "|",
                           servers_[1]->ready_value(),
                           ") and replicas are read-only; nothing was sent. "
                           "Write through a client whose map names one "
                           "address per server"));
  }

  // Nothing reached either replica: same tables, rows, step; no checkpoint.
  EXPECT_FALSE(std::filesystem::exists(root));
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(absl::StrCat("replica ", i));
    std::unique_ptr<RemoteClient> direct = Direct(i);
    ASSERT_NE(direct, nullptr);
    ASSERT_OK_AND_ASSIGN(std::vector<TableSpec> tables, direct->ListTables());
    ASSERT_EQ(tables.size(), 1u);
    EXPECT_EQ(tables[0], Spec());
    RowBatch back;
    ASSERT_OK(direct->PullRows("emb", keys, &back));
    EXPECT_EQ(back.values, (std::vector<float>{1, 1.125, 1.25, 1.375, 2, 2.125,
                                               2.25, 2.375}));
    EXPECT_EQ(back.state,
              (std::vector<float>{2, 2.25, 2.5, 2.75, 4, 4.25, 4.5, 4.75}));
    ASSERT_OK_AND_ASSIGN(StoreStats stats, direct->Stats());
    ASSERT_EQ(stats.tables.size(), 1u);
    EXPECT_EQ(stats.tables[0].step, 0);
    EXPECT_EQ(stats.checkpoints, 0u);
  }
  // Reads through the same client still work.
  bool exact = false;
  ASSERT_OK(PullAndCheck(*client, keys, &exact));
  EXPECT_TRUE(exact);
}

}  // namespace
}  // namespace psdb::rpc
