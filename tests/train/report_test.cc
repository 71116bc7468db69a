#include "train/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/testing/test_util.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ScratchDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A training row (with the per-part losses) and an evaluation row.
std::vector<MetricsRow> TwoRows() {
  MetricsRow train;
  train.step = 20;
  train.epoch = 1;
  train.samples = 2000;
  train.train_loss = 0.5;
  train.train_auc = 0.75;
  train.wide_loss = 0.6873926;
  train.deep_loss = 0.8878349;
  MetricsRow eval;
  eval.step = 40;
  eval.epoch = 1;
  eval.samples = 4000;
  eval.eval_auc = 0.8;
  eval.eval_logloss = 0.45;
  MetricsRow valid;
  valid.step = 40;
  valid.epoch = 1;
  valid.samples = 4000;
  valid.valid_auc = 0.7;
  valid.valid_logloss = 0.5;
  return {train, eval, valid};
}

TEST(MetricsCsvTest, PerPartLossesAreTheLastColumns) {
  ScratchDir dir;
  const std::string csv = dir.Sub("metrics.csv");
  ASSERT_OK(WriteMetricsCsv(csv, TwoRows()));
  EXPECT_EQ(ReadAll(csv),
            "step,epoch,samples,train_loss,train_auc,eval_auc,eval_logloss,"
            "wide_loss,deep_loss,valid_auc,valid_logloss\n"
            "20,1,2000,0.500000,0.750000,,,0.687393,0.887835,,\n"
            "40,1,4000,,,0.800000,0.450000,,,,\n"
            "40,1,4000,,,,,,,0.700000,0.500000\n");
}

// The plot names its columns by the CSV header: each one it reads is there,
// the per-part losses among them.
TEST(MetricsPlotTest, ScriptPlotsEveryLossByItsColumnName) {
  const std::string script =
      MetricsPlotScript("/d/metrics.csv", "/d/metrics.png", 0.83);
  ScratchDir dir;
  const std::string csv = dir.Sub("metrics.csv");
  ASSERT_OK(WriteMetricsCsv(csv, TwoRows()));
  const std::string header = ReadAll(csv).substr(0, ReadAll(csv).find('\n'));
  const std::vector<std::string> columns = absl::StrSplit(header, ',');
  std::vector<std::string> used;
  for (absl::string_view rest = script;;) {
    const size_t at = rest.find("using '");
    if (at == absl::string_view::npos) break;
    rest.remove_prefix(at + 7);
    // using 'x':'y'
    const std::vector<std::string> xy =
        absl::StrSplit(rest.substr(0, rest.find(' ')), "':'");
    ASSERT_EQ(xy.size(), 2u) << rest;
    used.push_back(xy[0]);
    used.push_back(std::string(absl::StripSuffix(xy[1], "'")));
  }
  for (const std::string& c : used) {
    EXPECT_NE(std::find(columns.begin(), columns.end(), c), columns.end())
        << c << " is not a metrics.csv column";
  }
  for (const char* c :
       {"train_loss", "wide_loss", "deep_loss", "eval_logloss", "train_auc",
        "eval_auc", "valid_logloss", "valid_auc"}) {
    EXPECT_NE(std::find(used.begin(), used.end(), c), used.end()) << c;
  }
  EXPECT_THAT(script, ::testing::HasSubstr("0.83 with lines"));
  EXPECT_THAT(MetricsPlotScript("a.csv", "a.png", std::nullopt),
              ::testing::Not(::testing::HasSubstr("Bayes")));
}

// With gnuplot installed, the plot renders a PNG from a real metrics.csv;
// without it, the status says so and nothing is written.
TEST(MetricsPlotTest, RendersAPngOrSaysGnuplotIsMissing) {
  ScratchDir dir;
  const std::string csv = dir.Sub("metrics.csv");
  const std::string png = dir.Sub("metrics.png");
  ASSERT_OK(WriteMetricsCsv(csv, TwoRows()));
  const absl::Status s = PlotMetrics(csv, png, 0.83);
  if (!FindOnPath("gnuplot").has_value()) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_FALSE(std::filesystem::exists(png));
    return;
  }
  ASSERT_OK(s);
  EXPECT_EQ(ReadAll(png).substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_FALSE(std::filesystem::exists(png + ".gp"));
}

}  // namespace
}  // namespace psdb::train
