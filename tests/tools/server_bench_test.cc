// ps-bench server smoke test: at toy size the scenario starts a ps-server and
// a redis-server, measures all three systems in alternating rounds, stops
// them and prints one JSON object with every ratio in report.h's blocks.
// Speed is not asserted here (benchmarks measure speed; tests never do);
// what is computable is exact: the keys each phase ran and each ratio's
// median, min and max over the rounds' rates.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tests/tools/bench_json.h"

namespace psdb::testing {
namespace {

using ::testing::HasSubstr;

class ServerBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::RunShell("command -v redis-server", /*merge_stderr=*/false)
            .exit_code != 0) {
      GTEST_SKIP() << "redis-server is not installed (dev.sh deps installs it)";
    }
  }

  // Runs the scenario at toy size with `flags`; returns its stdout.
  std::string RunServerScenario(const std::string& flags) {
    // The subshell keeps the progress lines on stderr out of the output.
    auto [code, out] = testing::RunShell(
        absl::StrCat("(", BuiltBinary("tools/ps-bench"),
                     " server --rows=4096 --batch_keys=256 --batches=3 "
                     "--warmup_batches=1 "
                     "--json --dir=",
                     dir_.path(), " ", flags, " 2>/dev/null)"),
        /*merge_stderr=*/false);
    EXPECT_EQ(code, 0) << out;
    EXPECT_THAT(out, ::testing::StartsWith("{"));
    EXPECT_THAT(out, HasSubstr("\"scenario\":\"server\""));
    return out;
  }

  ScratchDir dir_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2]
                           : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

TEST_F(ServerBenchTest, RatiosAreMediansOverAlternatingRounds) {
  // --min_seconds=0: each phase is exactly one pass over the batches.
  const std::string out = RunServerScenario("--repeats=3 --min_seconds=0");
  ExpectRatioBlocks(out, {"psdb_vs_redis_pull", "psdb_vs_redis_push",
                          "psdb_vs_tcp_limit_pull"});
  EXPECT_THAT(out, HasSubstr("\"repeats\":3,\"min_seconds\":0"));
  // 3 rounds x 2 threads x 3 batches x 256 keys, per phase kind.
  constexpr double kKeys = 3 * 2 * 3 * 256;
  const std::string systems = JsonObject(out, "systems");
  const std::string psdb = JsonObject(systems, "psdb");
  const std::string redis = JsonObject(systems, "redis");
  const std::string limit = JsonObject(systems, "tcp_limit");
  for (const std::string* s : {&psdb, &redis, &limit}) {
    EXPECT_EQ(JsonNumber(*s, "keys"), kKeys) << *s;
    EXPECT_EQ(JsonNumbers(*s, "pull_keys_per_s_rounds").size(), 3u) << *s;
  }
  EXPECT_EQ(JsonNumber(psdb, "push_keys"), kKeys);
  EXPECT_EQ(JsonNumber(redis, "push_keys"), kKeys);
  EXPECT_TRUE(std::isnan(JsonNumber(limit, "push_keys")));  // pulls only

  // Each round's ratio is psdb's rate over the peer's in that round; the
  // report gives their median, min and max.
  auto expect_ratio = [&](const char* name, const std::string& a,
                          const std::string& b, const char* rates) {
    const std::vector<double> x = JsonNumbers(a, rates);
    const std::vector<double> y = JsonNumbers(b, rates);
    ASSERT_EQ(x.size(), 3u);
    ASSERT_EQ(y.size(), 3u);
    std::vector<double> r;
    for (size_t i = 0; i < x.size(); ++i) r.push_back(x[i] / y[i]);
    EXPECT_EQ(JsonNumber(JsonObject(out, "ratios"), name), Median(r)) << name;
    EXPECT_EQ(JsonNumber(JsonObject(out, "ratios_min"), name),
              *std::min_element(r.begin(), r.end()))
        << name;
    EXPECT_EQ(JsonNumber(JsonObject(out, "ratios_max"), name),
              *std::max_element(r.begin(), r.end()))
        << name;
  };
  expect_ratio("psdb_vs_redis_pull", psdb, redis, "pull_keys_per_s_rounds");
  expect_ratio("psdb_vs_redis_push", psdb, redis, "push_keys_per_s_rounds");
  expect_ratio("psdb_vs_tcp_limit_pull", psdb, limit, "pull_keys_per_s_rounds");
  EXPECT_EQ(JsonObject(out, "targets"),
            "{\"psdb_vs_redis_pull\":\">= 2\",\"psdb_vs_redis_push\":\">= "
            "1.5\",\"psdb_vs_tcp_limit_pull\":\">= 0.5\","
            "\"psdb_peak_rss_vs_budget_bound\":\"<= 1\"}");
}

TEST_F(ServerBenchTest, EachPhaseRunsAtLeastMinSeconds) {
  const std::string out = RunServerScenario("--repeats=1 --min_seconds=0.05");
  ExpectRatioBlocks(out, {"psdb_vs_redis_pull", "psdb_vs_redis_push",
                          "psdb_vs_tcp_limit_pull"});
  const std::string systems = JsonObject(out, "systems");
  for (const char* id : {"psdb", "redis", "tcp_limit"}) {
    const std::string s = JsonObject(systems, id);
    EXPECT_GE(JsonNumber(s, "pull_s"), 0.05) << s;
    // Whole batches, at least one pass.
    const double keys = JsonNumber(s, "keys");
    EXPECT_GE(keys, 2 * 3 * 256) << s;
    EXPECT_EQ(std::fmod(keys, 256), 0) << s;
  }
  EXPECT_GE(JsonNumber(JsonObject(systems, "psdb"), "push_s"), 0.05);
  // One round: median, min and max are the one value.
  for (const char* name : {"psdb_vs_redis_pull", "psdb_vs_tcp_limit_pull"}) {
    EXPECT_EQ(JsonNumber(JsonObject(out, "ratios_min"), name),
              JsonNumber(JsonObject(out, "ratios"), name));
  }
}

}  // namespace
}  // namespace psdb::testing
