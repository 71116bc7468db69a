// ps-bench `control` smoke test: one round with a 2 s lease on a real local
// etcd and real ps-scheduler / ps-server processes, and one JSON object with
// every measured time and every ratio in report.h's blocks. Speed is not
// asserted (benchmarks measure speed; tests never do); what is asserted is
// what the protocol bounds: a killed server's lease ends no sooner than the
// TTL after its last heartbeat, so no worker can see it dead before TTL - a
// heartbeat interval, and neither can the in-process scheduler, whose
// timeout is the same TTL. (The help and usage-error prologue every
// scenario shares is tested in ps_bench_test.cc.)
#include <unistd.h>

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tests/tools/bench_json.h"

namespace psdb::testing {
namespace {

using ::testing::HasSubstr;

constexpr double kTtlS = 2;
constexpr double kBeatS = 0.2;

TEST(ControlBenchTest, JsonHasEveryTimeAndTheKillTakesAtLeastTheLease) {
  if (access("/usr/bin/etcd", X_OK) != 0) {
    GTEST_SKIP() << "/usr/bin/etcd is not installed";
  }
  ScratchDir dir;
  // The subshell keeps the progress lines on stderr out of the output.
  auto [code, out] =
      RunShell(absl::StrCat("(", BuiltBinary("tools/ps-bench"),
                            " control --repeats=1 --lease_ttl_s=2 "
                            "--heartbeat_interval_ms=200 --json --dir=",
                            dir.path(), " 2>/dev/null)"),
               /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, ::testing::StartsWith("{\"scenario\":\"control\""));
  EXPECT_THAT(out, HasSubstr("\"lease_ttl_s\":2,"));
  EXPECT_THAT(out, HasSubstr("\"heartbeat_timeout_ms\":2000,"));

  const std::string times = JsonObject(out, "times_s");
  for (const char* id : {"formation_etcd", "formation_memory", "takeover",
                         "kill_to_map_etcd", "kill_to_map_memory"}) {
    const std::string t = JsonObject(times, id);
    ASSERT_FALSE(t.empty()) << id << "\n" << out;
    const double median = JsonNumber(t, "median");
    EXPECT_TRUE(std::isfinite(median) && median > 0) << id << " " << t;
    // One round: median == min == max == the round.
    EXPECT_EQ(JsonNumber(t, "min"), median) << t;
    EXPECT_EQ(JsonNumber(t, "max"), median) << t;
    EXPECT_EQ(JsonNumbers(t, "rounds"), std::vector<double>{median}) << t;
  }
  for (const char* id : {"kill_to_map_etcd", "kill_to_map_memory"}) {
    EXPECT_GE(JsonNumber(JsonObject(times, id), "median"), kTtlS - kBeatS)
        << id << "\n"
        << out;
  }
  EXPECT_NEAR(
      JsonNumber(JsonObject(times, "kill_to_map_etcd_minus_ttl"), "median"),
      JsonNumber(JsonObject(times, "kill_to_map_etcd"), "median") - kTtlS,
      1e-9);
  EXPECT_NEAR(
      JsonNumber(JsonObject(times, "kill_to_map_memory_minus_timeout"),
                 "median"),
      JsonNumber(JsonObject(times, "kill_to_map_memory"), "median") - kTtlS,
      1e-9);

  ExpectRatioBlocks(
      out, {"formation_etcd_vs_memory", "takeover_vs_ttl",
            "kill_to_map_etcd_vs_ttl", "kill_to_map_memory_vs_timeout"});
  EXPECT_EQ(JsonObject(out, "targets"), "{}");
  EXPECT_NEAR(JsonNumber(JsonObject(out, "ratios"), "takeover_vs_ttl"),
              JsonNumber(JsonObject(times, "takeover"), "median") / kTtlS,
              1e-9);
}

}  // namespace
}  // namespace psdb::testing
