// MetricsHttpServer: a real HTTP client (curl) reads what is registered, in
// the Prometheus text format; a port in use is a Status, not an exception.
#include "rpc/wire/metrics_http.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/test_util.h"

namespace psdb::rpc {
namespace {

using ::psdb::testing::MetricValue;
using ::psdb::testing::ScrapeMetrics;

TEST(MetricsHttpServerTest, ServesRegisteredMetricsOnAPickedPort) {
  ASSERT_OK_AND_ASSIGN(auto http, MetricsHttpServer::Start("127.0.0.1", 0));
  EXPECT_GT(http->port(), 0);
  EXPECT_EQ(http->address(), absl::StrCat("127.0.0.1:", http->port()));

  auto registry = std::make_shared<prometheus::Registry>();
  auto& family = prometheus::BuildCounter()
                     .Name("psdb_test_events_total")
                     .Help("Events seen by the test.")
                     .Register(*registry);
  family.Add({{"kind", "a"}}).Increment(3);
  http->Register(registry);

  ASSERT_OK_AND_ASSIGN(std::string text, ScrapeMetrics(http->address()));
  EXPECT_EQ(MetricValue(text, "psdb_test_events_total", {{"kind", "a"}}), 3);
  EXPECT_NE(text.find("# TYPE psdb_test_events_total counter"),
            std::string::npos)
      << text;

  family.Add({{"kind", "a"}}).Increment();
  ASSERT_OK_AND_ASSIGN(text, ScrapeMetrics(http->address()));
  EXPECT_EQ(MetricValue(text, "psdb_test_events_total", {{"kind", "a"}}), 4);
}

TEST(MetricsHttpServerTest, CollectableThatIsGoneIsSkipped) {
  ASSERT_OK_AND_ASSIGN(auto http, MetricsHttpServer::Start("127.0.0.1", 0));
  {
    auto registry = std::make_shared<prometheus::Registry>();
    prometheus::BuildCounter().Name("psdb_gone_total").Register(*registry);
    http->Register(registry);
  }
  ASSERT_OK_AND_ASSIGN(std::string text, ScrapeMetrics(http->address()));
  EXPECT_EQ(text.find("psdb_gone_total"), std::string::npos) << text;
}

TEST(MetricsHttpServerTest, PortInUseIsUnavailable) {
  ASSERT_OK_AND_ASSIGN(auto first, MetricsHttpServer::Start("127.0.0.1", 0));
  EXPECT_THAT(MetricsHttpServer::Start("127.0.0.1", first->port()),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(MetricsHttpServerTest, BadArgumentsAreInvalid) {
  EXPECT_THAT(MetricsHttpServer::Start("127.0.0.1", 65536),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsHttpServer::Start("127.0.0.1", -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsHttpServer::Start("", 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::rpc
