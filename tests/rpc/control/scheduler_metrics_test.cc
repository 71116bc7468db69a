// The scheduler's Prometheus metrics, scraped with curl: live and dead
// nodes by role are exactly the registrations (in-process SchedulerServer
// over loopback gRPC), and ps-scheduler serves them with --metrics_port.
#include "rpc/control/scheduler_metrics.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "rpc/control/scheduler.h"
#include "rpc/control/scheduler_client.h"
#include "tests/testing/child_process.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::ChildProcess;
using ::psdb::testing::MetricValue;
using ::psdb::testing::ReservedPort;
using ::psdb::testing::ScrapeMetrics;
using ::testing::HasSubstr;

v1::RegisterRequest Req(const std::string& id, v1::NodeRole role,
                        const std::string& address = "") {
  v1::RegisterRequest r;
  r.set_node_id(id);
  r.set_role(role);
  r.set_address(address);
  return r;
}

TEST(SchedulerMetricsTest, LiveNodesByRoleAreTheRegistrations) {
  SchedulerOptions options;
  options.server_num = 2;
  options.worker_num = 1;
  options.heartbeat_interval = absl::Milliseconds(100);
  options.heartbeat_timeout = absl::Seconds(30);
  options.metrics_port = 0;
  options.log = [](absl::string_view) {};
  ASSERT_OK_AND_ASSIGN(auto sched, SchedulerServer::Start(options));
  ASSERT_GT(sched->metrics_port(), 0);
  EXPECT_EQ(sched->metrics_address(),
            absl::StrCat("127.0.0.1:", sched->metrics_port()));

  ASSERT_OK_AND_ASSIGN(std::string text,
                       ScrapeMetrics(sched->metrics_address()));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 0);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_expected_nodes", {{"role", "server"}}),
      2);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_expected_nodes", {{"role", "worker"}}),
      1);
  EXPECT_EQ(MetricValue(text, "psdb_scheduler_cluster_ready"), 0);

  SchedulerClientOptions client_options;
  client_options.address = sched->address();
  ASSERT_OK_AND_ASSIGN(auto client, SchedulerClient::Open(client_options));
  ASSERT_OK(client->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:1"))
                .status());
  ASSERT_OK_AND_ASSIGN(text, ScrapeMetrics(sched->metrics_address()));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 1);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "worker"}}), 0);

  ASSERT_OK_AND_ASSIGN(auto client2, SchedulerClient::Open(client_options));
  ASSERT_OK_AND_ASSIGN(auto client3, SchedulerClient::Open(client_options));
  ASSERT_OK(client2->Register(Req("s1", v1::NODE_ROLE_SERVER, "127.0.0.1:2"))
                .status());
  ASSERT_OK(client3->Register(Req("w0", v1::NODE_ROLE_WORKER)).status());
  ASSERT_OK_AND_ASSIGN(text, ScrapeMetrics(sched->metrics_address()));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 2);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "worker"}}), 1);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_dead_nodes", {{"role", "server"}}), 0);
  EXPECT_EQ(MetricValue(text, "psdb_scheduler_cluster_ready"), 1);
  EXPECT_EQ(MetricValue(text, "psdb_scheduler_cluster_epoch"), 1);

  // Silence past the timeout: every node is dead, none live.
  sched->backend()->Tick(absl::Now() + absl::Minutes(5));
  ASSERT_OK_AND_ASSIGN(text, ScrapeMetrics(sched->metrics_address()));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 0);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_dead_nodes", {{"role", "server"}}), 2);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_dead_nodes", {{"role", "worker"}}), 1);
  sched->Shutdown();
}

// A joining server counts as joining (not dead); after add-server's
// publish it is live and the expected servers follow, likewise after a
// drain.
TEST(SchedulerMetricsTest, JoiningServersAndMembershipChanges) {
  SchedulerOptions options;
  options.server_num = 2;
  options.worker_num = 0;
  options.heartbeat_interval = absl::Milliseconds(100);
  options.heartbeat_timeout = absl::Seconds(30);
  options.metrics_port = 0;
  options.log = [](absl::string_view) {};
  ASSERT_OK_AND_ASSIGN(auto sched, SchedulerServer::Start(options));
  SchedulerBackend* backend = sched->backend();
  ASSERT_OK(backend->Register(Req("s0", v1::NODE_ROLE_SERVER, "127.0.0.1:1"),
                              absl::Now()));
  ASSERT_OK(backend->Register(Req("s1", v1::NODE_ROLE_SERVER, "127.0.0.1:2"),
                              absl::Now()));
  v1::RegisterRequest join = Req("s2", v1::NODE_ROLE_SERVER, "127.0.0.1:3");
  join.set_join(true);
  ASSERT_OK(backend->Register(join, absl::Now()));
  ASSERT_OK_AND_ASSIGN(std::string text,
                       ScrapeMetrics(sched->metrics_address()));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 2);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_joining_nodes", {{"role", "server"}}),
      1);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_dead_nodes", {{"role", "server"}}), 0);

  ASSERT_OK(backend->PublishMembershipChange(
      {MembershipChange::Kind::kAdd, "s2"}, 1));
  ASSERT_OK_AND_ASSIGN(text, ScrapeMetrics(sched->metrics_address()));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 3);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_joining_nodes", {{"role", "server"}}),
      0);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_expected_nodes", {{"role", "server"}}),
      3);
  EXPECT_EQ(MetricValue(text, "psdb_scheduler_cluster_epoch"), 2);

  ASSERT_OK(backend->PublishMembershipChange(
      {MembershipChange::Kind::kDrain, "s0"}, 2));
  ASSERT_OK_AND_ASSIGN(text, ScrapeMetrics(sched->metrics_address()));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 2);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_expected_nodes", {{"role", "server"}}),
      2);
  EXPECT_EQ(MetricValue(text, "psdb_scheduler_cluster_epoch"), 3);
  sched->Shutdown();
}

TEST(SchedulerMetricsTest, OffByDefaultAndPortValidated) {
  SchedulerOptions options;
  options.log = [](absl::string_view) {};
  ASSERT_OK_AND_ASSIGN(auto sched, SchedulerServer::Start(options));
  EXPECT_EQ(sched->metrics_port(), -1);
  EXPECT_EQ(sched->metrics_address(), "");
  options.metrics_port = 70000;
  EXPECT_THAT(SchedulerServer::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options.metrics_port = -2;
  EXPECT_THAT(SchedulerServer::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SchedulerMetricsTest, PsSchedulerServesMetricsOnTheFlagPort) {
  const ReservedPort held[3];  // metrics, and two schedulers'
  const int metrics_port = held[0].port();
  auto options = ::psdb::testing::PsSchedulerOptions(held[1].port(), 3, 0);
  options.args.push_back(absl::StrCat("--metrics_port=", metrics_port));
  // It prints "metrics on HOST:PORT" after "scheduler listening on ...".
  options.ready_prefix = "metrics on ";
  ASSERT_OK_AND_ASSIGN(auto sched, ChildProcess::Start(options));
  const std::string address = absl::StrCat("127.0.0.1:", metrics_port);
  EXPECT_EQ(sched->ready_value(), address);
  ASSERT_OK_AND_ASSIGN(std::string text, ScrapeMetrics(address));
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_expected_nodes", {{"role", "server"}}),
      3);
  EXPECT_EQ(
      MetricValue(text, "psdb_scheduler_live_nodes", {{"role", "server"}}), 0);
  ASSERT_OK(sched->Stop());

  // A metrics port in use: exit 1 at start, saying so.
  ASSERT_OK_AND_ASSIGN(auto first, ChildProcess::Start(options));
  auto second = ::psdb::testing::PsSchedulerOptions(held[2].port(), 3, 0);
  second.args.push_back(absl::StrCat("--metrics_port=", metrics_port));
  auto failed = ChildProcess::Start(second);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("cannot serve metrics on 127.0.0.1:"));
  ASSERT_OK(first->Stop());
}

}  // namespace
}  // namespace psdb::rpc
