// ps-bench `train` smoke test: at toy size the scenario generates data, runs
// ps-train embedded and on a real local cluster (ps-scheduler, 2 ps-servers,
// 2 ps-train workers) with prefetch on and off and with dense AllReduce,
// then embedded on the other generator kinds, stops every process, and
// prints one JSON object with every run (its kind, test AUC and the data's
// Bayes AUC) and every ratio, finite and positive, in report.h's blocks.
// Speed is not asserted (benchmarks measure speed; tests never do).
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/child_process.h"
#include "tests/testing/test_util.h"
#include "tests/tools/bench_json.h"

namespace psdb::bench {
namespace {

using ::testing::HasSubstr;

// The number after "\"name\":" at or after `from`.
double Field(const std::string& json, const std::string& name, size_t from) {
  const std::string field = "\"" + name + "\":";
  const size_t at = json.find(field, from);
  if (at == std::string::npos) return NAN;
  const size_t begin = at + field.size();
  const size_t end = json.find_first_of(",}", begin);
  double v = NAN;
  if (!absl::SimpleAtod(json.substr(begin, end - begin), &v)) return NAN;
  return v;
}

// --cache_staleness reaches the cluster's workers: their push-through
// cache serves rows across steps (without it, a row any step pushed is
// read again); it needs a cluster of 2+ workers.
TEST(PsBenchTrainTest, CacheStalenessReachesTheClusterWorkers) {
  testing::ScratchDir dir;
  const std::string bench = absl::StrCat(
      testing::BuiltBinary("tools/ps-bench"),
      " train --train_rows=256 --test_rows=400 --batch_size=32 --deep_dim=4 "
      "--hidden=8 --max_vocab=200 --kinds=additive --models=lr --json");
  auto hit_rate = [&](int staleness) {
    auto [code, out] = testing::RunShell(
        absl::StrCat(bench, " --cache_staleness=", staleness,
                     " --dir=", dir.Sub(absl::StrCat("s", staleness)), " 2>&1"),
        /*merge_stderr=*/false);
    EXPECT_EQ(code, 0) << out;
    EXPECT_THAT(
        out, HasSubstr(absl::StrCat("\"cache_staleness\":", staleness, ",")));
    return Field(out, "cache_hit_rate", out.find("\"cluster_on\":{"));
  };
  const double fresh = hit_rate(0);
  const double stale = hit_rate(3);
  EXPECT_GT(stale, fresh + 0.05) << fresh;
  auto [code, out] = testing::RunShell(
      absl::StrCat(bench, " --workers=1 --cache_staleness=1"));
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("--cache_staleness is for the cluster"));
}

TEST(PsBenchTrainTest, JsonHasEveryRunAndRatio) {
  testing::ScratchDir dir;
  const std::string bin = testing::BuiltBinary("tools/ps-bench");
  auto [code, out] =
      testing::RunShell(absl::StrCat(bin,
                                     " train --train_rows=256 --test_rows=400 "
                                     "--batch_size=32 --deep_dim=4 "
                                     "--hidden=8 --max_vocab=200 --json --dir=",
                                     dir.Sub("bench"), " 2>&1"),
                        /*merge_stderr=*/false);
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out.front(), '{') << out;
  ASSERT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, HasSubstr("\"scenario\":\"train\""));
  EXPECT_THAT(out, HasSubstr("\"train_rows\":256"));
  EXPECT_THAT(out,
              HasSubstr("\"kinds\":[\"additive\",\"pairs\",\"longtail\"]"));
  for (const auto& [run, kind] :
       std::vector<std::pair<std::string, std::string>>{
           {"embedded", "additive"},
           {"cluster_on", "additive"},
           {"cluster_off", "additive"},
           {"cluster_allreduce", "additive"},
           {"embedded_pairs", "pairs"},
           {"embedded_longtail", "longtail"}}) {
    const size_t at = out.find(absl::StrCat("\"", run, "\":{"));
    ASSERT_NE(at, std::string::npos) << run << "\n" << out;
    // Every example of the data set is trained once per run.
    EXPECT_EQ(Field(out, "samples", at), 256) << run << "\n" << out;
    const double rate = Field(out, "samples_per_s", at);
    EXPECT_TRUE(std::isfinite(rate) && rate > 0) << run << "\n" << out;
    const double hit = Field(out, "cache_hit_rate", at);
    EXPECT_TRUE(hit >= 0 && hit <= 1) << run << "\n" << out;
    const std::string kind_field = absl::StrCat("\"kind\":\"", kind, "\",");
    EXPECT_EQ(out.substr(out.find("\"kind\":", at), kind_field.size()),
              kind_field)
        << run;
    // A test AUC, the data's Bayes AUC above chance, their difference.
    const double auc = Field(out, "auc", at);
    const double bayes = Field(out, "bayes_auc", at);
    EXPECT_TRUE(auc > 0 && auc < 1) << run << "\n" << out;
    EXPECT_TRUE(bayes > 0.6 && bayes < 1) << run << "\n" << out;
    EXPECT_NEAR(Field(out, "auc_gap", at), bayes - auc, 1e-9) << run;
  }
  testing::ExpectRatioBlocks(
      out, {"prefetch_on_vs_off", "cluster_vs_embedded", "allreduce_vs_ps"});
  // No targets: the ratios describe, they do not judge.
  EXPECT_EQ(testing::JsonObject(out, "targets"), "{}");
}

}  // namespace
}  // namespace psdb::bench
