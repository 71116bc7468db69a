// A live PsServer with metrics on, driven through the raw generated stub
// (so every call is exactly one request) and scraped with curl: counters
// move by exactly the requests sent, per method and status code; the
// keys-per-request histogram by exactly their keys; the store's hits and
// misses by exactly the keys pulled. And ps-server --metrics_port.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "manifest/manifest.h"
#include "psdb/store.h"
#include "rpc/server/server.h"
#include "rpc/wire/convert.h"
#include "rpc/wire/psdb.grpc.pb.h"
#include "tests/testing/child_process.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::MetricLabels;
using ::psdb::testing::MetricSum;
using ::psdb::testing::MetricValue;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScrapeMetrics;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::StartPsServer;
using ::psdb::testing::WaitFor;

constexpr int kDim = 4;

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, Store::Open({}, dir_.Sub("db")));
    ServerOptions options;
    options.num_threads = 2;
    options.metrics_port = 0;
    ASSERT_OK_AND_ASSIGN(server_, PsServer::Start(options, store_.get()));
    ASSERT_GT(server_->metrics_port(), 0);
    stub_ = v1::ParameterService::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
    TableSpec spec;
    spec.name = "emb";
    spec.dim = kDim;
    v1::CreateTableRequest req;
    *req.mutable_spec() = TableSpecToProto(spec);
    v1::CreateTableResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateTable(&ctx, req, &resp).ok());
  }
  void TearDown() override { server_->Shutdown(absl::Seconds(5)); }

  std::string Scrape() {
    auto text = ScrapeMetrics(server_->metrics_address());
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  grpc::Status Pull(const std::string& table, std::vector<uint64_t> keys) {
    v1::PullRequest req;
    req.set_table(table);
    for (uint64_t k : keys) req.add_keys(k);
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    return stub_->Pull(&ctx, req, &resp);
  }

  grpc::Status Push(std::vector<uint64_t> keys) {
    v1::PushRequest req;
    req.set_table("emb");
    for (uint64_t k : keys) req.add_keys(k);
    FloatsToBytes(std::vector<float>(keys.size() * kDim, 0.5f),
                  req.mutable_grads());
    v1::PushResponse resp;
    grpc::ClientContext ctx;
    return stub_->Push(&ctx, req, &resp);
  }

  ScratchDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<PsServer> server_;
  std::unique_ptr<v1::ParameterService::Stub> stub_;
};

double Delta(const std::string& before, const std::string& after,
             absl::string_view name, const MetricLabels& labels) {
  return MetricValue(after, name, labels).value_or(0) -
         MetricValue(before, name, labels).value_or(0);
}

TEST_F(MetricsServerTest, CountersMoveByExactlyTheRequestsSent) {
  const std::string before = Scrape();
  EXPECT_EQ(MetricValue(before, "psdb_server_requests_total",
                        {{"method", "CreateTable"}, {"code", "OK"}}),
            1);

  constexpr int kPulls = 7, kPullKeys = 5, kPushes = 3, kPushKeys = 4;
  uint64_t next = 1000;
  uint64_t pulled = 0;
  for (int i = 0; i < kPulls; ++i) {
    std::vector<uint64_t> keys;
    for (int k = 0; k < kPullKeys; ++k) keys.push_back(next++);
    ASSERT_TRUE(Pull("emb", keys).ok());
    pulled += keys.size();
  }
  for (int i = 0; i < kPushes; ++i) {
    ASSERT_TRUE(Push({1, 2, 3, 4}).ok());
  }
  // One bad request: a table that does not exist.
  const grpc::Status missing = Pull("no_such_table", {1, 2});
  ASSERT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND)
      << missing.error_message();

  const std::string after = Scrape();
  EXPECT_EQ(Delta(before, after, "psdb_server_requests_total",
                  {{"method", "Pull"}, {"code", "OK"}}),
            kPulls);
  EXPECT_EQ(Delta(before, after, "psdb_server_requests_total",
                  {{"method", "Push"}, {"code", "OK"}}),
            kPushes);
  EXPECT_EQ(Delta(before, after, "psdb_server_requests_total",
                  {{"method", "Pull"}, {"code", "NOT_FOUND"}}),
            1);
  // Nothing else was counted: every series of the family moved by the sum.
  EXPECT_EQ(MetricSum(after, "psdb_server_requests_total") -
                MetricSum(before, "psdb_server_requests_total"),
            kPulls + kPushes + 1);

  EXPECT_EQ(Delta(before, after, "psdb_server_request_duration_seconds_count",
                  {{"method", "Pull"}}),
            kPulls + 1);
  EXPECT_EQ(Delta(before, after, "psdb_server_request_duration_seconds_count",
                  {{"method", "Push"}}),
            kPushes);
  EXPECT_GT(Delta(before, after, "psdb_server_request_duration_seconds_sum",
                  {{"method", "Pull"}}),
            0);
  EXPECT_EQ(Delta(before, after, "psdb_server_request_keys_count",
                  {{"method", "Pull"}}),
            kPulls + 1);
  EXPECT_EQ(Delta(before, after, "psdb_server_request_keys_sum",
                  {{"method", "Pull"}}),
            kPulls * kPullKeys + 2);
  EXPECT_EQ(Delta(before, after, "psdb_server_request_keys_count",
                  {{"method", "Push"}}),
            kPushes);
  EXPECT_EQ(Delta(before, after, "psdb_server_request_keys_sum",
                  {{"method", "Push"}}),
            kPushes * kPushKeys);

  // The store looked up every pulled key once in the memory tier (all new:
  // misses, then created).
  EXPECT_EQ(Delta(before, after, "psdb_store_memory_misses_total",
                  {{"table", "emb"}}) +
                Delta(before, after, "psdb_store_memory_hits_total",
                      {{"table", "emb"}}),
            pulled + kPushes * kPushKeys);
  EXPECT_EQ(MetricValue(after, "psdb_store_rows",
                        {{"table", "emb"}, {"tier", "memory"}}),
            pulled + kPushKeys);
}

TEST_F(MetricsServerTest, CheckpointSetsTheLastCheckpointTime) {
  EXPECT_EQ(
      MetricValue(Scrape(), "psdb_server_last_checkpoint_timestamp_seconds"),
      std::nullopt);
  const absl::Time before = absl::Now();
  v1::CheckpointRequest req;
  req.set_root_dir(dir_.Sub("ckpt"));
  v1::CheckpointResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Checkpoint(&ctx, req, &resp).ok());
  const std::string text = Scrape();
  const double at =
      *MetricValue(text, "psdb_server_last_checkpoint_timestamp_seconds");
  EXPECT_GE(at, absl::ToDoubleSeconds(before - absl::UnixEpoch()) - 1e-3);
  EXPECT_LE(at, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  EXPECT_EQ(MetricValue(text, "psdb_store_checkpoint_duration_seconds_count"),
            1);
}

TEST_F(MetricsServerTest, ShutdownStopsTheEndpoint) {
  const std::string address = server_->metrics_address();
  server_->Shutdown(absl::Seconds(5));
  EXPECT_EQ(server_->metrics_port(), -1);
  EXPECT_FALSE(ScrapeMetrics(address).ok());
}

TEST(MetricsServerOptionsTest, OffByDefaultAndPortValidated) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("db")));
  ServerOptions options;
  ASSERT_OK_AND_ASSIGN(auto server, PsServer::Start(options, store.get()));
  EXPECT_EQ(server->metrics_port(), -1);
  EXPECT_EQ(server->metrics_address(), "");
  server->Shutdown(absl::Seconds(1));
  options.metrics_port = 65536;
  EXPECT_THAT(PsServer::Start(options, store.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MetricsServerProcessTest, PsServerServesMetricsOnTheFlagPort) {
  ScratchDir dir;
  const ReservedPort metrics_port;
  ASSERT_OK_AND_ASSIGN(
      auto server,
      StartPsServer({absl::StrCat("--data_dir=", dir.Sub("db")), "--threads=2",
                     absl::StrCat("--metrics_port=", metrics_port.port())}));
  ASSERT_OK_AND_ASSIGN(
      std::string text,
      ScrapeMetrics(absl::StrCat("127.0.0.1:", metrics_port.port())));
  EXPECT_EQ(MetricValue(text, "psdb_server_requests_total",
                        {{"method", "Pull"}, {"code", "OK"}}),
            0);
  EXPECT_NE(text.find("# TYPE psdb_server_request_duration_seconds histogram"),
            std::string::npos);
  ASSERT_OK(server->Stop());
}

TEST(MetricsServerProcessTest, ServingReplicaReportsStepLagAndSwaps) {
  ScratchDir dir;
  const std::string root = dir.Sub("ckpt");
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({}, dir.Sub("train")));
  TableSpec spec;
  spec.name = "emb";
  spec.dim = kDim;
  ASSERT_OK(store->CreateTable(spec));
  std::vector<uint64_t> keys = {7, 8};
  std::vector<float> grads(keys.size() * kDim, 1.0f);
  PushOptions push;
  push.step = 1200;
  ASSERT_OK(store->Push("emb", keys, grads, push));
  ASSERT_OK(store->Checkpoint(root).status());
  const ReservedPort metrics_port;
  ASSERT_OK_AND_ASSIGN(
      auto replica,
      StartPsServer({absl::StrCat("--serve_from=", root), "--threads=2",
                     absl::StrCat("--metrics_port=", metrics_port.port())}));
  ASSERT_OK_AND_ASSIGN(
      std::string text,
      ScrapeMetrics(absl::StrCat("127.0.0.1:", metrics_port.port())));
  EXPECT_EQ(MetricValue(text, "psdb_serving_step"), 1200);
  EXPECT_LT(*MetricValue(text, "psdb_serving_lag_seconds"), 600);
  EXPECT_EQ(MetricValue(text, "psdb_store_rows",
                        {{"table", "emb"}, {"tier", "disk"}}),
            2);
  EXPECT_EQ(MetricValue(text, "psdb_serving_swap_seconds_count"), 0);

  // The next checkpoint is taken up (at once through the root's inotify
  // watch, at the latest after the 10 s follow interval) and its swap is
  // observed.
  push.step = 1300;
  ASSERT_OK(store->Push("emb", keys, grads, push));
  ASSERT_OK(store->Checkpoint(root).status());
  EXPECT_TRUE(WaitFor([&] {
    absl::StatusOr<std::string> now =
        ScrapeMetrics(absl::StrCat("127.0.0.1:", metrics_port.port()));
    return now.ok() &&
           MetricValue(*now, "psdb_serving_swap_seconds_count") == 1 &&
           MetricValue(*now, "psdb_serving_step") == 1300;
  }));
  ASSERT_OK(replica->Stop());
}

}  // namespace
}  // namespace psdb::rpc
