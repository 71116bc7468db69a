// Real ps-server processes on loopback: RemoteClient against 3 servers gives
// bit-identical rows to LocalClient (Adagrad, Adam, FTRL); a killed server
// fails calls within their deadline; a restarted server serves its
// checkpointed rows; SIGTERM shuts down cleanly.
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "psdb/client_url.h"
#include "psdb/local_client.h"
#include "rpc/client/remote_client.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::BuiltBinary;
using ::psdb::testing::ChildProcess;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::StartPsServer;
using ::psdb::testing::WaitFor;

TableSpec Table(const std::string& name, optim::OptimizerKind kind, int dim) {
  TableSpec spec;
  spec.name = name;
  spec.dim = dim;
  spec.optimizer.kind = kind;
  spec.optimizer.learning_rate = 0.05f;
  spec.optimizer.l1 = kind == optim::OptimizerKind::kFtrl ? 0.001f : 0.0f;
  spec.optimizer.l2 = kind == optim::OptimizerKind::kFtrl ? 0.01f : 0.0f;
  spec.seed = 7;
  return spec;
}

// Three servers with a static list, started once for the suite.
class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    std::vector<std::unique_ptr<ReservedPort>> ports;
    std::vector<std::string> addresses;
    for (int i = 0; i < 3; ++i) {
      ports.push_back(std::make_unique<ReservedPort>());
      addresses.push_back(absl::StrCat("127.0.0.1:", ports.back()->port()));
    }
    servers_list_ = new std::string(absl::StrJoin(addresses, ","));
    servers_ = new std::vector<std::unique_ptr<ChildProcess>>();
    for (int i = 0; i < 3; ++i) {
      auto p = StartPsServer(
          {absl::StrCat("--data_dir=", dir_->Sub(absl::StrCat("s", i))),
           absl::StrCat("--port=", ports[i]->port()),
           absl::StrCat("--servers=", *servers_list_),
           absl::StrCat("--shard_id=", i), "--threads=2"});
      ASSERT_TRUE(p.ok()) << p.status();
      servers_->push_back(*std::move(p));
    }
  }
  static void TearDownTestSuite() {
    delete servers_;
    delete servers_list_;
    delete dir_;
  }

  static std::unique_ptr<ParameterClient> Remote() {
    auto client = OpenParameterClient(absl::StrCat("servers:", *servers_list_));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  static ScratchDir* dir_;
  static std::string* servers_list_;
  static std::vector<std::unique_ptr<ChildProcess>>* servers_;
};
ScratchDir* ClusterTest::dir_ = nullptr;
std::string* ClusterTest::servers_list_ = nullptr;
std::vector<std::unique_ptr<ChildProcess>>* ClusterTest::servers_ = nullptr;

void ExpectBitIdentical(absl::Span<const float> a, absl::Span<const float> b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
      << what;
}

TEST_F(ClusterTest, RemoteMatchesLocalBitForBit) {
  ScratchDir local_dir;
  ASSERT_OK_AND_ASSIGN(auto local, OpenParameterClient(absl::StrCat(
                                       "local:", local_dir.Sub("db"))));
  std::unique_ptr<ParameterClient> remote = Remote();
  ASSERT_NE(remote, nullptr);
  const int dim = 8;
  for (auto kind : {optim::OptimizerKind::kAdagrad, optim::OptimizerKind::kAdam,
                    optim::OptimizerKind::kFtrl}) {
    const std::string name(optim::KindName(kind));
    SCOPED_TRACE(name);
    const TableSpec spec = Table(name, kind, dim);
    ASSERT_OK(local->CreateTable(spec));
    ASSERT_OK(remote->CreateTable(spec));
    ASSERT_OK(remote->CreateTable(spec));  // idempotent
    std::mt19937_64 rng(99);
    for (int step = 0; step < 12; ++step) {
      // 96 keys from [0, 300): duplicates within a batch, keys on all three
      // servers, some servers with few keys.
      std::vector<uint64_t> keys(96);
      for (uint64_t& k : keys) k = rng() % 300;
      std::vector<float> a(keys.size() * dim), b(keys.size() * dim);
      ASSERT_OK(local->Pull(name, keys, absl::MakeSpan(a), {}));
      ASSERT_OK(remote->Pull(name, keys, absl::MakeSpan(b), {}));
      ExpectBitIdentical(a, b, absl::StrCat("pull at step ", step));
      std::vector<float> grads(keys.size() * dim);
      for (size_t i = 0; i < grads.size(); ++i) {
        grads[i] =
            static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) /
            1000.0f;
      }
      ASSERT_OK(local->Push(name, keys, grads, {}));
      ASSERT_OK(remote->Push(name, keys, grads, {}));
    }
    // Values and optimizer state of every row touched.
    std::vector<uint64_t> all(300);
    for (uint64_t k = 0; k < 300; ++k) all[k] = k;
    RowBatch a, b;
    ASSERT_OK(local->PullRows(name, all, &a));
    ASSERT_OK(remote->PullRows(name, all, &b));
    ExpectBitIdentical(a.values, b.values, "final values");
    ExpectBitIdentical(a.state, b.state, "final state");
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(a.headers[i].update_count, b.headers[i].update_count) << i;
      EXPECT_EQ(a.headers[i].last_update_step, b.headers[i].last_update_step)
          << i;
    }
  }
  // Tables and stats merged across the three servers.
  ASSERT_OK_AND_ASSIGN(std::vector<TableSpec> tables, remote->ListTables());
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].name, "adagrad");
  EXPECT_EQ(tables[0], Table("adagrad", optim::OptimizerKind::kAdagrad, dim));
  ASSERT_OK_AND_ASSIGN(StoreStats stats, remote->Stats());
  for (const TableStats& t : stats.tables) {
    EXPECT_EQ(t.step, 12) << t.name;
    EXPECT_EQ(t.created, 300u) << t.name;
  }
  for (const TableSpec& spec : tables) ASSERT_OK(remote->DropTable(spec.name));
  ASSERT_OK_AND_ASSIGN(tables, remote->ListTables());
  EXPECT_TRUE(tables.empty());
  EXPECT_THAT(remote->DropTable("adagrad"),
              StatusIs(absl::StatusCode::kNotFound));
  // A table one server dropped already (an interrupted drop) is dropped on
  // the others; NotFound once no server has it.
  ASSERT_OK(
      remote->CreateTable(Table("partial", optim::OptimizerKind::kSgd, 2)));
  const std::string first(
      absl::string_view(*servers_list_).substr(0, servers_list_->find(',')));
  ASSERT_OK_AND_ASSIGN(auto one, OpenParameterClient("servers:" + first));
  ASSERT_OK(one->DropTable("partial"));
  EXPECT_THAT(one->DropTable("partial"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(remote->DropTable("partial"));
  EXPECT_THAT(remote->DropTable("partial"),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(tables, remote->ListTables());
  EXPECT_TRUE(tables.empty());
}

TEST_F(ClusterTest, PutRowsAndServingPullsRoundTrip) {
  std::unique_ptr<ParameterClient> remote = Remote();
  ASSERT_NE(remote, nullptr);
  const TableSpec spec = Table("rows", optim::OptimizerKind::kAdagrad, 2);
  ASSERT_OK(remote->CreateTable(spec));
  std::vector<uint64_t> keys = {10, 11, 12, 10};
  RowBatch rows;
  rows.Resize(2, 2, 4);
  for (size_t i = 0; i < 8; ++i) {
    rows.values[i] = static_cast<float>(i);
    rows.state[i] = static_cast<float>(i) + 0.5f;
  }
  ASSERT_OK(remote->PutRows("rows", keys, rows));
  RowBatch back;
  ASSERT_OK(remote->PullRows("rows", {12, 10, 11}, &back));
  // Key 10 appears twice: the last one (row 3) wins.
  EXPECT_EQ(back.values, (std::vector<float>{4, 5, 6, 7, 2, 3}));
  EXPECT_EQ(back.state, (std::vector<float>{4.5, 5.5, 6.5, 7.5, 2.5, 3.5}));
  std::vector<float> served(4);
  PullOptions serving;
  serving.serving = true;
  ASSERT_OK(remote->Pull("rows", {11, 999}, absl::MakeSpan(served), serving));
  std::vector<float> init(2);
  InitializeRow(spec, 999, absl::MakeSpan(init));
  EXPECT_EQ(served, (std::vector<float>{2, 3, init[0], init[1]}));
  EXPECT_THAT(remote->Pull("rows", {1}, absl::MakeSpan(served), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(remote->Pull("missing", {1}, absl::MakeSpan(served), {}),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(remote->DropTable("rows"));
}

// True once every thread of `pid` is in the stopped state ('T' in
// /proc/<pid>/task/*/stat): kill(SIGSTOP) returns before the stop happens.
bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(
           absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    // The state follows the parenthesized command name: "pid (comm) S ...".
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() ||
        stat[paren + 2] != 'T') {
      return false;
    }
    ++threads;
  }
  return !ec && threads > 0;
}

// One server of its own for the fault tests (they kill it).
class FaultTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<ChildProcess>> StartServer(int port) {
    return StartPsServer({absl::StrCat("--data_dir=", dir_.Sub("data")),
                          absl::StrCat("--port=", port), "--threads=2"});
  }
  std::unique_ptr<RemoteClient> Client(const std::string& address,
                                       absl::Duration timeout) {
    RemoteClientOptions options;
    options.cluster = ClusterMap::FromAddresses({address}).value();
    options.call_timeout = timeout;
    options.max_attempts = 3;
    auto client = RemoteClient::Open(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  ScratchDir dir_;
};

TEST_F(FaultTest, KilledServerFailsCallsWithinTheirDeadline) {
  ASSERT_OK_AND_ASSIGN(auto server, StartServer(0));
  auto client = Client(server->ready_value(), absl::Seconds(3));
  ASSERT_OK(client->CreateTable(Table("t", optim::OptimizerKind::kSgd, 4)));
  std::vector<float> out(4);
  ASSERT_OK(client->Pull("t", {1}, absl::MakeSpan(out), {}));

  // A frozen server: the call is in flight and gets no answer; it ends at
  // its deadline instead of hanging.
  server->Signal(SIGSTOP);
  ASSERT_TRUE(WaitFor([&] { return AllThreadsStopped(server->pid()); }))
      << "ps-server did not stop";
  absl::Time start = absl::Now();
  absl::Status status = client->Pull("t", {2}, absl::MakeSpan(out), {});
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3) + absl::Seconds(2));

  // Killed while a request is in flight: UNAVAILABLE (after retries) or
  // DEADLINE_EXCEEDED, within the deadline.
  absl::Status in_flight;
  start = absl::Now();
  std::thread caller(
      [&] { in_flight = client->Pull("t", {3}, absl::MakeSpan(out), {}); });
  server->Signal(SIGKILL);
  ASSERT_OK(server->Wait().status());
  caller.join();
  EXPECT_TRUE(absl::IsUnavailable(in_flight) ||
              absl::IsDeadlineExceeded(in_flight))
      << in_flight;
  EXPECT_LT(absl::Now() - start, absl::Seconds(3) + absl::Seconds(2));
  // And a call to the dead server fails fast too.
  EXPECT_THAT(client->Pull("t", {4}, absl::MakeSpan(out), {}),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(FaultTest, RestartedServerServesCheckpointedRows) {
  ReservedPort port;
  ASSERT_OK_AND_ASSIGN(auto server, StartServer(port.port()));
  auto client = Client(server->ready_value(), absl::Seconds(20));
  const TableSpec spec = Table("t", optim::OptimizerKind::kAdagrad, 4);
  ASSERT_OK(client->CreateTable(spec));
  std::vector<uint64_t> keys = {1, 2, 3, 4, 5};
  std::vector<float> grads(keys.size() * 4, 0.25f);
  ASSERT_OK(client->Push("t", keys, grads, {}));
  ASSERT_OK(client->Push("t", keys, grads, {}));
  std::vector<float> before(keys.size() * 4);
  ASSERT_OK(client->Pull("t", keys, absl::MakeSpan(before), {}));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo info,
                       client->Checkpoint(dir_.Sub("ckpt"), {}));
  EXPECT_EQ(info.step, 2);

  server->Signal(SIGKILL);
  ASSERT_OK(server->Wait().status());
  ASSERT_OK_AND_ASSIGN(server, StartServer(port.port()));
  // The same client reconnects to the restarted server.
  std::vector<float> after(keys.size() * 4);
  ASSERT_OK(client->Pull("t", keys, absl::MakeSpan(after), {}));
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(),
                           before.size() * sizeof(float)));
  // The step counter continues from the servers' step: next push is step 3.
  auto fresh = Client(server->ready_value(), absl::Seconds(20));
  ASSERT_OK(fresh->Push("t", keys, grads, {}));
  ASSERT_OK_AND_ASSIGN(StoreStats stats, fresh->Stats());
  ASSERT_EQ(stats.tables.size(), 1u);
  EXPECT_EQ(stats.tables[0].step, 3);

  // SIGTERM: graceful, exit status 0.
  server->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int wait_status, server->Wait());
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)
      << wait_status << " " << server->Stderr();
  EXPECT_NE(server->Stderr().find("stopped cleanly"), std::string::npos);
}

}  // namespace
}  // namespace psdb::rpc
