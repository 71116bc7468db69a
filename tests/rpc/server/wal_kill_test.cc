// Issue 16's write-ahead log test against the real binary: a ps-server with
// --durability=wal and a 1 MiB memory budget (rows are evicted to RocksDB
// all the time) is SIGKILLed under concurrent pushes at 20 random moments
// and restarted on the same data directory each time. Client threads push
// counting gradients (SGD, learning rate 1, zeros: each push adds exactly 1
// to each of the thread's own keys) and record which pushes were
// acknowledged. After every restart each thread's keys all hold the same
// count (a push is present whole or not at all), equal to its acknowledged
// pushes, or one more if a push was in flight at the kill (present once).
#include <signal.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "manifest/manifest.h"
#include "psdb/table_spec.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildProcess;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::StartPsServer;

constexpr int kDim = 16;
constexpr int kThreads = 4;
constexpr int kOwnKeys = 16;    // per thread: the counted keys
constexpr int kNoiseKeys = 48;  // per push: random keys, gradient 0
constexpr int kKills = 20;

uint64_t OwnKey(int thread, int j) { return 1000 + thread * 100 + j; }

class WalKillTest : public ::testing::Test {
 protected:
  void Start() {
    ASSERT_OK_AND_ASSIGN(
        server_, StartPsServer({absl::StrCat("--data_dir=", dir_.Sub("data")),
                                "--port=0", "--threads=4",
                                "--memory_budget_mb=1", "--durability=wal"}));
    stub_ = v1::ParameterService::NewStub(grpc::CreateChannel(
        server_->ready_value(), grpc::InsecureChannelCredentials()));
    TableSpec spec;
    spec.name = "c";
    spec.dim = kDim;
    spec.initializer.kind = InitKind::kZeros;
    spec.optimizer.kind = optim::OptimizerKind::kSgd;
    spec.optimizer.learning_rate = 1.0f;
    v1::CreateTableRequest req;
    *req.mutable_spec() = TableSpecToProto(spec);
    v1::CreateTableResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    const grpc::Status s = stub_->CreateTable(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // The counts of thread t's keys.
  std::vector<float> Counts(int t) {
    v1::PullRequest req;
    req.set_table("c");
    for (int j = 0; j < kOwnKeys; ++j) req.add_keys(OwnKey(t, j));
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    const grpc::Status s = stub_->Pull(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<float> values(kOwnKeys * kDim);
    if (s.ok()) {
      EXPECT_OK(BytesToFloats(resp.values(), absl::MakeSpan(values), "values"));
    }
    std::vector<float> counts;
    for (int j = 0; j < kOwnKeys; ++j) counts.push_back(values[j * kDim]);
    return counts;
  }

  ScratchDir dir_;
  std::unique_ptr<ChildProcess> server_;
  std::unique_ptr<v1::ParameterService::Stub> stub_;
};

TEST_F(WalKillTest, EveryAcknowledgedPushSurvivesTwentySigkills) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<int64_t> acked(kThreads, 0);  // pushes known present
  uint64_t in_flight_rounds = 0, total_acked = 0;
  ASSERT_NO_FATAL_FAILURE(Start());
  for (int round = 0; round < kKills; ++round) {
    SCOPED_TRACE(absl::StrCat("kill ", round + 1));
    std::atomic<int64_t> round_acks{0};
    std::vector<int64_t> ok(kThreads, 0);
    std::vector<uint8_t> in_flight(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 r(rng() + t);
        while (true) {  // until the kill fails a push
          v1::PushRequest req;
          req.set_table("c");
          std::vector<float> grads;
          for (int j = 0; j < kOwnKeys; ++j) {
            req.add_keys(OwnKey(t, j));
            grads.insert(grads.end(), kDim, -1.0f);
          }
          for (int j = 0; j < kNoiseKeys; ++j) {
            req.add_keys(1000000 + r() % 200000);
            grads.insert(grads.end(), kDim, 0.0f);
          }
          FloatsToBytes(grads, req.mutable_grads());
          v1::PushResponse resp;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(30));
          if (!stub_->Push(&ctx, req, &resp).ok()) {
            in_flight[t] = 1;  // the kill: applied or not, unknown
            return;
          }
          ++ok[t];
          ++round_acks;
        }
      });
    }
    // A random moment: after 5..150 more acknowledged pushes.
    const int64_t target = 5 + static_cast<int64_t>(rng() % 146);
    ASSERT_TRUE(psdb::testing::WaitFor(
        [&] { return round_acks.load() >= target; }, absl::Seconds(120)))
        << server_->Stderr();
    server_->Signal(SIGKILL);
    ASSERT_OK(server_->Wait().status());
    for (auto& th : threads) th.join();

    ASSERT_NO_FATAL_FAILURE(Start());
    for (int t = 0; t < kThreads; ++t) {
      const std::vector<float> counts = Counts(t);
      ASSERT_EQ(counts.size(), size_t{kOwnKeys});
      for (int j = 1; j < kOwnKeys; ++j) {
        ASSERT_EQ(counts[j], counts[0])
            << "thread " << t << ": a push is present on some keys only";
      }
      const int64_t want = acked[t] + ok[t];
      const int64_t got = static_cast<int64_t>(counts[0]);
      ASSERT_EQ(static_cast<float>(got), counts[0]);
      if (in_flight[t] && got == want + 1) {
        ++in_flight_rounds;  // the push in flight at the kill made it
      } else {
        ASSERT_EQ(got, want) << "thread " << t << ": " << ok[t]
                             << " pushes acknowledged this round";
      }
      acked[t] = got;
      total_acked += ok[t];
    }
  }
  std::printf(
      "%d kills, %llu acknowledged pushes all present once; %llu pushes in "
      "flight at a kill were present\n",
      kKills, static_cast<unsigned long long>(total_acked),
      static_cast<unsigned long long>(in_flight_rounds));
  server_->Signal(SIGTERM);
  EXPECT_OK(server_->WaitForSuccess(absl::Seconds(60)));
}

}  // namespace
}  // namespace psdb::rpc
