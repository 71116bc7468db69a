// ps-bench serve smoke test: at toy size the scenario writes a checkpoint,
// starts two serving replicas (ps-server --serve_from) and a redis-server,
// measures them at peak and at a fixed load, swaps the full-memory replica
// to a newer checkpoint and prints one JSON object with every ratio in
// report.h's blocks. Speed is not asserted here (benchmarks measure speed;
// tests never do); what is asserted is what a swap promises — no failed
// request — and what is computable: the rounds, and every system serving.
#include <cmath>
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

TEST(ServeBenchTest, JsonHasEveryRatioAndTheSwapFailsNoRequest) {
  if (RunShell("command -v redis-server", /*merge_stderr=*/false).exit_code !=
      0) {
    GTEST_SKIP() << "redis-server is not installed (dev.sh deps installs it)";
  }
  ScratchDir dir;
  // The subshell keeps the progress lines on stderr out of the output.
  auto [code, out] =
      RunShell(absl::StrCat("(", BuiltBinary("tools/ps-bench"),
                            " serve --rows=20000 --threads=2 --batch_keys=64 "
                            "--batches=8 --repeats=2 --min_seconds=0.3 "
                            "--swap_tail_s=0.3 --json --dir=",
                            dir.path(), " 2>/dev/null)"),
               /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, ::testing::StartsWith("{\"scenario\":\"serve\""));
  EXPECT_THAT(out, HasSubstr("\"rows\":20000"));

  ExpectRatioBlocks(out, {"serve_vs_redis_rows", "serve_vs_redis_p99",
                          "serve_tiered_vs_redis_rows",
                          "serve_tiered_vs_redis_p99", "swap_p99_vs_steady"});
  // A count, not a ratio: zero in every round.
  for (const char* block : {"ratios", "ratios_min", "ratios_max"}) {
    EXPECT_EQ(JsonNumber(JsonObject(out, block), "swap_failed_requests"), 0)
        << block << "\n"
        << out;
  }
  EXPECT_EQ(JsonObject(out, "targets"),
            "{\"serve_vs_redis_rows\":\">= 2\",\"serve_vs_redis_p99\":\"<= "
            "1\",\"serve_tiered_vs_redis_rows\":\">= 1\","
            "\"swap_p99_vs_steady\":\"<= 1.5\",\"swap_failed_requests\":\"<= "
            "0\"}");

  const double offered = JsonNumber(out, "offered_rows_per_s");
  EXPECT_GT(offered, 0);
  const std::string systems = JsonObject(out, "systems");
  for (const char* id : {"serve", "serve_tiered", "redis"}) {
    const std::string s = JsonObject(systems, id);
    ASSERT_FALSE(s.empty()) << id << "\n" << out;
    EXPECT_GT(JsonNumber(s, "peak_rows_per_s"), 0) << s;
    EXPECT_EQ(JsonNumbers(s, "peak_rows_per_s_rounds").size(), 2u) << s;
    // The fixed load is half of the slowest peak, so no system's peak is
    // below twice it.
    EXPECT_GE(JsonNumber(s, "peak_rows_per_s"), 2 * offered * (1 - 1e-9)) << s;
    const std::string fixed = JsonObject(s, "fixed_load");
    EXPECT_GT(JsonNumber(fixed, "rows_per_s"), 0) << fixed;
    EXPECT_EQ(JsonNumber(fixed, "failed"), 0) << fixed;
    for (const char* p : {"p50_ms", "p99_ms", "p999_ms"}) {
      EXPECT_TRUE(std::isfinite(JsonNumber(fixed, p))) << p << " " << fixed;
    }
    EXPECT_LE(JsonNumber(fixed, "p50_ms"), JsonNumber(fixed, "p99_ms"));
    EXPECT_LE(JsonNumber(fixed, "p99_ms"), JsonNumber(fixed, "p999_ms"));
  }
  // The whole table fits the full replica's budget; a tenth of it the
  // tiered one's.
  EXPECT_GT(
      JsonNumber(JsonObject(systems, "serve"), "memory_budget_mb"),
      JsonNumber(JsonObject(systems, "serve_tiered"), "memory_budget_mb"));
  // Two swaps, to steps 1 and 2, each window with requests and no failure.
  EXPECT_THAT(out, HasSubstr("\"swaps\":[{\"step\":1,"));
  EXPECT_THAT(out, HasSubstr("},{\"step\":2,"));
  const std::string swaps = out.substr(out.find("\"swaps\":["));
  EXPECT_GT(JsonNumber(swaps, "swap_requests"), 0) << swaps;
  EXPECT_EQ(JsonNumber(swaps, "swap_failed"), 0) << swaps;
}

}  // namespace
}  // namespace psdb::testing
