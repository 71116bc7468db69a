// ServerMetrics against a real Store, scraped over HTTP with curl: request
// figures move by exactly what was recorded; store figures are the store's
// own (Stats()), read at scrape time; a serving replica's are its
// checkpoint's, with its step, lag and swaps.
#include "rpc/server/server_metrics.h"

#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "psdb/store.h"
#include "rpc/server/checkpoint_follower.h"
#include "rpc/wire/metrics_http.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::MetricSum;
using ::psdb::testing::MetricValue;
using ::psdb::testing::ScrapeMetrics;
using ::psdb::testing::ScratchDir;

class ServerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, Store::Open({}, dir_.Sub("db")));
    TableSpec spec;
    spec.name = "emb";
    spec.dim = 4;
    ASSERT_OK(store_->CreateTable(spec));
    metrics_ = std::make_unique<ServerMetrics>(store_.get());
    ASSERT_OK_AND_ASSIGN(http_, MetricsHttpServer::Start("127.0.0.1", 0));
    http_->Register(metrics_->requests());
    http_->Register(metrics_->store_collector());
  }
  void TearDown() override {
    http_.reset();  // no scrape may outlive the store
    metrics_.reset();
  }

  std::string Scrape() {
    auto text = ScrapeMetrics(http_->address());
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  ScratchDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<MetricsHttpServer> http_;
};

TEST_F(ServerMetricsTest, RequestsByMethodAndCode) {
  const std::string before = Scrape();
  // Every method's OK series exists from the start, at 0.
  EXPECT_EQ(MetricValue(before, "psdb_server_requests_total",
                        {{"method", "Pull"}, {"code", "OK"}}),
            0);
  EXPECT_EQ(MetricValue(before, "psdb_server_requests_total",
                        {{"method", "Stats"}, {"code", "OK"}}),
            0);
  EXPECT_EQ(MetricValue(before, "psdb_server_requests_total",
                        {{"method", "Pull"}, {"code", "NOT_FOUND"}}),
            std::nullopt);

  for (int i = 0; i < 3; ++i) {
    metrics_->RecordRequest(RpcMethod::kPull, absl::StatusCode::kOk,
                            absl::Microseconds(300), 10);
  }
  metrics_->RecordRequest(RpcMethod::kPush, absl::StatusCode::kOk,
                          absl::Milliseconds(2), 7);
  metrics_->RecordRequest(RpcMethod::kPull, absl::StatusCode::kNotFound,
                          absl::Microseconds(80), 5);
  metrics_->RecordRequest(RpcMethod::kListTables, absl::StatusCode::kOk,
                          absl::Microseconds(20), std::nullopt);

  const std::string after = Scrape();
  EXPECT_EQ(MetricValue(after, "psdb_server_requests_total",
                        {{"method", "Pull"}, {"code", "OK"}}),
            3);
  EXPECT_EQ(MetricValue(after, "psdb_server_requests_total",
                        {{"method", "Pull"}, {"code", "NOT_FOUND"}}),
            1);
  EXPECT_EQ(MetricValue(after, "psdb_server_requests_total",
                        {{"method", "Push"}, {"code", "OK"}}),
            1);
  EXPECT_EQ(MetricValue(after, "psdb_server_request_duration_seconds_count",
                        {{"method", "Pull"}}),
            4);
  EXPECT_NEAR(*MetricValue(after, "psdb_server_request_duration_seconds_sum",
                           {{"method", "Pull"}}),
              3 * 300e-6 + 80e-6, 1e-9);
  // 3 x 300 us and 80 us: one in the 100 us bucket, all four by 500 us.
  EXPECT_EQ(MetricValue(after, "psdb_server_request_duration_seconds_bucket",
                        {{"method", "Pull"}, {"le", "0.0001"}}),
            1);
  EXPECT_EQ(MetricValue(after, "psdb_server_request_duration_seconds_bucket",
                        {{"method", "Pull"}, {"le", "0.0005"}}),
            4);
  // Keys per request: the failed pull's keys count too (they arrived).
  EXPECT_EQ(MetricValue(after, "psdb_server_request_keys_count",
                        {{"method", "Pull"}}),
            4);
  EXPECT_EQ(
      MetricValue(after, "psdb_server_request_keys_sum", {{"method", "Pull"}}),
      35);
  EXPECT_EQ(
      MetricValue(after, "psdb_server_request_keys_sum", {{"method", "Push"}}),
      7);
  // ListTables carries no keys: no keys histogram for it.
  EXPECT_EQ(MetricValue(after, "psdb_server_request_keys_count",
                        {{"method", "ListTables"}}),
            std::nullopt);
}

TEST_F(ServerMetricsTest, LastCheckpointTimestampOnlyAfterASuccess) {
  EXPECT_EQ(Scrape().find("psdb_server_last_checkpoint_timestamp_seconds "),
            std::string::npos);
  metrics_->RecordRequest(RpcMethod::kCheckpoint,
                          absl::StatusCode::kInvalidArgument,
                          absl::Milliseconds(1), std::nullopt);
  EXPECT_EQ(Scrape().find("psdb_server_last_checkpoint_timestamp_seconds "),
            std::string::npos);
  metrics_->RecordRequest(RpcMethod::kCheckpoint, absl::StatusCode::kOk,
                          absl::Milliseconds(1), std::nullopt,
                          absl::FromUnixSeconds(1700000000));
  EXPECT_EQ(
      MetricValue(Scrape(), "psdb_server_last_checkpoint_timestamp_seconds"),
      1700000000);
}

TEST_F(ServerMetricsTest, StoreFiguresAreTheStoresOwn) {
  std::vector<uint64_t> keys = {1, 2, 3, 4, 5};
  std::vector<float> out(keys.size() * 4);
  ASSERT_OK(store_->Pull("emb", keys, absl::MakeSpan(out), {}));
  ASSERT_OK(store_->Pull("emb", keys, absl::MakeSpan(out), {}));

  const std::string text = Scrape();
  const StoreStats stats = store_->Stats();
  ASSERT_EQ(stats.tables.size(), 1u);
  const TableStats& t = stats.tables[0];
  EXPECT_EQ(
      MetricValue(text, "psdb_store_memory_hits_total", {{"table", "emb"}}),
      t.hits);
  EXPECT_EQ(
      MetricValue(text, "psdb_store_memory_misses_total", {{"table", "emb"}}),
      t.misses);
  // Two pulls of five distinct keys: ten lookups.
  EXPECT_EQ(t.hits + t.misses, 10u);
  EXPECT_EQ(
      MetricValue(text, "psdb_store_rows_created_total", {{"table", "emb"}}),
      5);
  EXPECT_EQ(MetricValue(text, "psdb_store_rows",
                        {{"table", "emb"}, {"tier", "memory"}}),
            5);
  EXPECT_EQ(MetricValue(text, "psdb_store_bytes",
                        {{"table", "emb"}, {"tier", "memory"}}),
            t.memory_bytes);
  EXPECT_EQ(MetricValue(text, "psdb_store_memory_budget_bytes"),
            stats.memory_budget_bytes);
  EXPECT_EQ(MetricValue(text, "psdb_store_checkpoint_duration_seconds_count"),
            0);

  ASSERT_OK(store_->Checkpoint(dir_.Sub("ckpt"), {}).status());
  EXPECT_EQ(
      MetricValue(Scrape(), "psdb_store_checkpoint_duration_seconds_count"), 1);
  EXPECT_NE(Scrape().find("# TYPE psdb_store_memory_hits_total counter"),
            std::string::npos);
  EXPECT_NE(Scrape().find("# TYPE psdb_store_rows gauge"), std::string::npos);
}

TEST_F(ServerMetricsTest, ServingReplicaReportsItsCheckpoint) {
  // Training writes two checkpoints; a replica follows the root.
  const std::string root = dir_.Sub("ckpt");
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> grads(keys.size() * 4, 0.5f);
  PushOptions push;
  push.step = 42;
  ASSERT_OK(store_->Push("emb", keys, grads, push));
  const absl::Time before = absl::Now();
  ASSERT_OK(store_->Checkpoint(root).status());

  FollowerOptions follow;
  follow.root = root;
  follow.interval = absl::ZeroDuration();  // the test calls Poll
  ASSERT_OK_AND_ASSIGN(auto follower, CheckpointFollower::Start(follow));
  ServerMetrics serving(follower.get());
  ASSERT_OK_AND_ASSIGN(auto http, MetricsHttpServer::Start("127.0.0.1", 0));
  http->Register(serving.requests());
  http->Register(serving.store_collector());

  ASSERT_OK_AND_ASSIGN(std::string text, ScrapeMetrics(http->address()));
  const absl::Time scraped = absl::Now();
  EXPECT_EQ(MetricValue(text, "psdb_serving_step"), 42);
  EXPECT_EQ(MetricValue(text, "psdb_serving_swaps_total"), 0);
  const double created =
      *MetricValue(text, "psdb_serving_checkpoint_timestamp_seconds");
  EXPECT_GE(created, absl::ToDoubleSeconds(before - absl::UnixEpoch()) - 1);
  // Computed at scrape time: the checkpoint was created after `before` and
  // the scrape was answered before `scraped`.
  const double lag = *MetricValue(text, "psdb_serving_lag_seconds");
  EXPECT_GE(lag, 0);
  EXPECT_LE(lag, absl::ToDoubleSeconds(scraped - before));
  EXPECT_EQ(MetricValue(text, "psdb_serving_checkpoint_age_seconds"),
            std::nullopt);  // the old name of the same figure
  // The first open is not a swap: both swap histograms are empty.
  EXPECT_EQ(MetricValue(text, "psdb_serving_swap_seconds_count"), 0);
  EXPECT_EQ(MetricValue(text, "psdb_serving_swap_bytes_read_count"), 0);
  // The store figures are the served checkpoint's: its three rows on disk.
  EXPECT_EQ(MetricValue(text, "psdb_store_rows",
                        {{"table", "emb"}, {"tier", "disk"}}),
            3);

  push.step = 50;
  ASSERT_OK(store_->Push("emb", keys, grads, push));
  ASSERT_OK(store_->Checkpoint(root).status());
  ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
  ASSERT_TRUE(swapped);
  ASSERT_OK_AND_ASSIGN(text, ScrapeMetrics(http->address()));
  EXPECT_EQ(MetricValue(text, "psdb_serving_step"), 50);
  EXPECT_EQ(MetricValue(text, "psdb_serving_swaps_total"), 1);
  EXPECT_EQ(MetricValue(text, "psdb_serving_refused_total"), 0);
  // One swap observed, which took some time; its bytes are counted
  // (the values are the follower's, SwapReport::bytes_read).
  EXPECT_EQ(MetricValue(text, "psdb_serving_swap_seconds_count"), 1);
  EXPECT_GT(*MetricValue(text, "psdb_serving_swap_seconds_sum"), 0);
  EXPECT_EQ(
      MetricValue(text, "psdb_serving_swap_seconds_bucket", {{"le", "+Inf"}}),
      1);
  EXPECT_EQ(MetricValue(text, "psdb_serving_swap_bytes_read_count"), 1);
  http.reset();  // before the follower goes
}

TEST_F(ServerMetricsTest, AServingMetricsGoneLeavesTheFollowerSwapping) {
  const std::string root = dir_.Sub("ckpt");
  ASSERT_OK(store_->Checkpoint(root).status());
  FollowerOptions follow;
  follow.root = root;
  follow.interval = absl::ZeroDuration();
  ASSERT_OK_AND_ASSIGN(auto follower, CheckpointFollower::Start(follow));
  // Metrics built and dropped (a server shut down): the follower's observer
  // is cleared with them, so a later swap touches nothing freed (ASan).
  std::make_unique<ServerMetrics>(follower.get()).reset();
  ASSERT_OK(store_->Checkpoint(root).status());
  ASSERT_OK_AND_ASSIGN(bool swapped, follower->Poll());
  EXPECT_TRUE(swapped);
}

TEST_F(ServerMetricsTest, TrainingServerHasNoServingMetrics) {
  EXPECT_EQ(Scrape().find("psdb_serving_"), std::string::npos);
}

}  // namespace
}  // namespace psdb::rpc
