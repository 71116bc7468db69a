// ps-bench `migrate` smoke test: one round at toy size on real ps-scheduler
// and ps-server processes, and one JSON object with every figure and every
// ratio in report.h's blocks. Speed is not asserted (benchmarks measure
// speed; tests never do); what is asserted is what can be computed: the
// rows each add-server moves are the keys that the ring with the new server
// gives it (the ring is placed by server ids, so a static list of as many
// servers computes it), and every figure is finite and positive. (The help
// and usage-error prologue every scenario shares is tested in
// ps_bench_test.cc.)
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shard/cluster_map.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tests/tools/bench_json.h"

namespace psdb::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kRows = 3000;

// How many of the keys 0..kRows-1 server `servers - 1` owns on the ring of
// `servers` servers.
double KeysOfLast(int servers) {
  std::vector<std::string> addresses;
  for (int i = 0; i < servers; ++i) {
    addresses.push_back(absl::StrCat("127.0.0.1:", 1000 + i));
  }
  absl::StatusOr<ClusterMap> map = ClusterMap::FromAddresses(addresses);
  EXPECT_TRUE(map.ok()) << map.status();
  double n = 0;
  for (uint64_t k = 0; k < kRows; ++k) {
    if (map->Owner(k) == servers - 1) ++n;
  }
  return n;
}

// a == b up to the digits JSON keeps.
void ExpectClose(double a, double b) { EXPECT_NEAR(a, b, 1e-9 * std::abs(b)); }

TEST(MigrateBenchTest, JsonHasEveryFigureAndTheRowsTheRingMoves) {
  ScratchDir dir;
  // The subshell keeps the progress lines on stderr out of the output.
  auto [code, out] =
      RunShell(absl::StrCat("(", BuiltBinary("tools/ps-bench"),
                            " migrate --rows=", kRows,
                            " --batch_rows=100 --workers=2 --train_batch=32 "
                            "--window_s=0.3 --repeats=1 --json --dir=",
                            dir.path(), " 2>/dev/null)"),
               /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, ::testing::StartsWith("{\"scenario\":\"migrate\""));
  EXPECT_THAT(out, HasSubstr("\"rows\":3000,\"dim\":64,\"servers\":3,"
                             "\"batch_rows\":100,"));

  const std::string figures = JsonObject(out, "figures");
  for (const char* id :
       {"rows_moved", "migrate_rows_per_s", "migrate_s", "migrate_prepare_s",
        "migrate_copy_rows_per_s", "migrate_copy_s", "migrate_cpu_s",
        "pullrows_putrows_rows_per_s", "pullrows_putrows_s",
        "pullrows_putrows_cpu_s", "train_before_samples_per_s",
        "train_during_samples_per_s", "train_after_samples_per_s",
        "dip_migrate_s", "dip_rows_moved", "dip_rows_sent"}) {
    const std::string f = JsonObject(figures, id);
    ASSERT_FALSE(f.empty()) << id << "\n" << out;
    const double median = JsonNumber(f, "median");
    EXPECT_TRUE(std::isfinite(median) && median > 0) << id << " " << f;
    // One round: median == min == max == the round.
    EXPECT_EQ(JsonNumber(f, "min"), median) << f;
    EXPECT_EQ(JsonNumber(f, "max"), median) << f;
    EXPECT_EQ(JsonNumbers(f, "rounds"), std::vector<double>{median}) << f;
  }
  auto median = [&](const char* id) {
    return JsonNumber(JsonObject(figures, id), "median");
  };
  // The first add moves to the 4th server, the second to the 5th.
  EXPECT_EQ(median("rows_moved"), KeysOfLast(4));
  EXPECT_EQ(median("dip_rows_moved"), KeysOfLast(5));
  // The status of the second add also counts the rows HANDOFF sent again
  // (those training touched while it ran).
  EXPECT_GE(median("dip_rows_sent"), median("dip_rows_moved"));
  ExpectClose(median("migrate_rows_per_s"),
              median("rows_moved") / median("migrate_s"));
  ExpectClose(median("pullrows_putrows_rows_per_s"),
              median("rows_moved") / median("pullrows_putrows_s"));
  // The phases are parts of the whole add. (HANDOFF and COMMIT may go by
  // between two polls at this size: null.)
  EXPECT_LE(median("migrate_prepare_s") + median("migrate_copy_s"),
            median("migrate_s"));
  EXPECT_FALSE(JsonObject(figures, "migrate_handoff_s").empty());
  EXPECT_FALSE(JsonObject(figures, "migrate_commit_s").empty());
  EXPECT_THAT(out, HasSubstr("\"checkpoint_first\":false"));

  ExpectRatioBlocks(
      out, {"migrate_vs_pullrows_putrows", "migrate_copy_vs_pullrows_putrows",
            "migrate_cpu_vs_pullrows_putrows", "train_during_vs_before",
            "train_after_vs_before"});
  EXPECT_EQ(JsonObject(out, "targets"),
            "{\"migrate_vs_pullrows_putrows\":\">= 2\"}");
  const std::string ratios = JsonObject(out, "ratios");
  ExpectClose(
      JsonNumber(ratios, "migrate_vs_pullrows_putrows"),
      median("migrate_rows_per_s") / median("pullrows_putrows_rows_per_s"));
  ExpectClose(JsonNumber(ratios, "migrate_cpu_vs_pullrows_putrows"),
              median("pullrows_putrows_cpu_s") / median("migrate_cpu_s"));
  ExpectClose(JsonNumber(ratios, "train_during_vs_before"),
              median("train_during_samples_per_s") /
                  median("train_before_samples_per_s"));
}

}  // namespace
}  // namespace psdb::testing
