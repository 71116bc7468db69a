// Tests of ps-bench's shared report (tools/bench/report.h), timing
// (tools/bench/timing.h) and process CPU (tools/bench/process_cpu.h): the
// median and its range for ratios and series (and their NaN rule), targets,
// the exact JSON blocks every scenario writes, the text table, timed
// phases, CPU time of this and other processes.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/json_writer.h"
#include "tools/bench/process_cpu.h"
#include "tools/bench/report.h"
#include "tools/bench/timing.h"
#include "tools/common/args.h"

namespace psdb::bench {
namespace {

using ::testing::HasSubstr;

TEST(BenchReportTest, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({7}), 7);
  EXPECT_TRUE(std::isnan(Median({})));
  EXPECT_TRUE(std::isnan(Median({1, NAN, 3})));
}

TEST(BenchReportTest, RatioSummarizesItsRounds) {
  const Ratio r{.name = "x", .rounds = {0.65, 0.38, 1.09, 0.9, 0.7}};
  EXPECT_EQ(r.Median(), 0.7);
  EXPECT_EQ(r.Min(), 0.38);
  EXPECT_EQ(r.Max(), 1.09);
}

TEST(BenchReportTest, TargetsAndVerdicts) {
  EXPECT_EQ(Target::AtLeast(2).Text(), ">= 2");
  EXPECT_EQ(Target::AtLeast(1.5).Text(), ">= 1.5");
  EXPECT_EQ(Target::AtMost(0.1).Text(), "<= 0.1");
  EXPECT_EQ(Target::None().Text(), "");
  EXPECT_TRUE(Target::AtLeast(2).Met(2));
  EXPECT_FALSE(Target::AtLeast(2).Met(1.99));
  EXPECT_TRUE(Target::AtMost(0.1).Met(0.1));
  EXPECT_FALSE(Target::AtMost(0.1).Met(0.2));
  EXPECT_FALSE(Target::AtLeast(0).Met(NAN));
  EXPECT_FALSE(Target::None().Met(1));
}

TEST(BenchReportTest, SeriesSummarizesItsRoundsByTheNanRule) {
  const Series s{.id = "t",
                 .label = "time",
                 .decimals = 3,
                 .rounds = {0.5, 0.125, 2, 0.25}};
  EXPECT_EQ(s.Median(), 0.375);
  EXPECT_EQ(s.Min(), 0.125);
  EXPECT_EQ(s.Max(), 2);
  // A round that measured nothing: no median, min or max (NaN, not the
  // extremes of the other rounds).
  const Series gap{.id = "g", .rounds = {1, NAN, 3}};
  EXPECT_TRUE(std::isnan(gap.Median()));
  EXPECT_TRUE(std::isnan(gap.Min()));
  EXPECT_TRUE(std::isnan(gap.Max()));
  const Series empty{.id = "e"};
  EXPECT_TRUE(std::isnan(empty.Median()));
  EXPECT_TRUE(std::isnan(empty.Min()));
  EXPECT_TRUE(std::isnan(empty.Max()));
  // Ratio follows the same rule.
  const Ratio r{.name = "r", .rounds = {NAN, 2}};
  EXPECT_TRUE(std::isnan(r.Min()));
  EXPECT_TRUE(std::isnan(r.Max()));
  EXPECT_EQ(Min({4, -1, 2}), -1);
  EXPECT_EQ(Max({4, -1, 2}), 4);
}

TEST(BenchReportTest, SeriesJson) {
  EXPECT_EQ(JsonLine(SeriesJson({.id = "t", .rounds = {0.5, 0.125, 2}})),
            "{\"median\":0.5,\"min\":0.125,\"max\":2,"
            "\"rounds\":[0.5,0.125,2]}");
  EXPECT_EQ(JsonLine(SeriesJson({.id = "g", .rounds = {1, NAN}})),
            "{\"median\":null,\"min\":null,\"max\":null,"
            "\"rounds\":[1,null]}");
}

TEST(BenchReportTest, JsonBlocks) {
  const std::vector<Ratio> ratios = {
      {.name = "a", .target = Target::AtLeast(2), .rounds = {1, 3, 2}},
      {.name = "b", .target = Target::AtMost(0.5), .rounds = {0.75}},
      {.name = "c", .rounds = {0.25, 0.5}},
      {.name = "d", .target = Target::AtLeast(1), .rounds = {NAN}},
  };
  // The blocks follow the report's keys so far, in this order.
  Json report = {{"scenario", "x"}};
  AddRatiosJson(ratios, &report);
  EXPECT_EQ(JsonLine(report),
            "{\"scenario\":\"x\","
            "\"ratios\":{\"a\":2,\"b\":0.75,\"c\":0.375,\"d\":null},"
            "\"ratios_min\":{\"a\":1,\"b\":0.75,\"c\":0.25,\"d\":null},"
            "\"ratios_max\":{\"a\":3,\"b\":0.75,\"c\":0.5,\"d\":null},"
            "\"targets\":{\"a\":\">= 2\",\"b\":\"<= 0.5\",\"d\":\">= 1\"},"
            "\"targets_met\":{\"a\":true,\"b\":false,\"d\":null}}");
  Json none = Json::object();
  AddRatiosJson({}, &none);
  EXPECT_EQ(JsonLine(none),
            "{\"ratios\":{},\"ratios_min\":{},\"ratios_max\":{},"
            "\"targets\":{},\"targets_met\":{}}");
}

TEST(BenchReportTest, TextTable) {
  std::ostringstream rounds;
  PrintRatios({{.name = "a", .target = Target::AtLeast(2), .rounds = {1, 3, 2}},
               {.name = "d", .target = Target::AtLeast(1), .rounds = {NAN}}},
              rounds);
  EXPECT_THAT(rounds.str(), HasSubstr("median"));
  EXPECT_THAT(rounds.str(), HasSubstr("2.000 [1.000, 3.000]"));
  EXPECT_THAT(rounds.str(), HasSubstr(">= 2     met"));
  EXPECT_THAT(rounds.str(), HasSubstr("not run"));
  std::ostringstream one;
  PrintRatios({{.name = "b",
                .target = Target::AtMost(0.5),
                .rounds = {0.75},
                .note = "(why)"}},
              one);
  EXPECT_THAT(one.str(), ::testing::Not(HasSubstr("[")));
  EXPECT_THAT(one.str(), HasSubstr("0.750"));
  EXPECT_THAT(one.str(), HasSubstr("<= 0.5   MISSED  (why)"));
}

tools::Args ParseArgs(std::vector<const char*> argv) {
  argv.insert(argv.begin(), "scenario");
  return *tools::Args::Parse(static_cast<int>(argv.size()), argv.data(), 1, {});
}

TEST(BenchTimingTest, ParseRounds) {
  RoundsOptions rounds;
  ASSERT_TRUE(ParseRounds(ParseArgs({}), &rounds).ok());
  EXPECT_EQ(rounds.repeats, 5);
  EXPECT_EQ(rounds.min_seconds, 2);
  ASSERT_TRUE(
      ParseRounds(ParseArgs({"--repeats=3", "--min_seconds=0.5"}), &rounds)
          .ok());
  EXPECT_EQ(rounds.repeats, 3);
  EXPECT_EQ(rounds.min_seconds, 0.5);
  EXPECT_EQ(ParseRounds(ParseArgs({"--repeats=0"}), &rounds).message(),
            "--repeats=0 is out of range [1, 1000]");
  EXPECT_EQ(ParseRounds(ParseArgs({"--min_seconds=-1"}), &rounds).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BenchTimingTest, ZeroSecondsRunsExactlyMinBatchesPerThread) {
  std::vector<std::atomic<int>> calls(3);
  absl::StatusOr<PhaseTiming> t =
      RunTimedPhase(3, 7, 0, [&](int thread, uint64_t i) {
        // Each thread counts 0, 1, 2, ... in order.
        if (static_cast<int>(i) != calls[thread]) {
          return absl::InternalError("out of order");
        }
        ++calls[thread];
        return absl::OkStatus();
      });
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->batches, 21u);
  for (const auto& c : calls) EXPECT_EQ(c, 7);
}

TEST(BenchTimingTest, RunsUntilMinSecondsHavePassed) {
  std::atomic<uint64_t> calls{0};
  absl::StatusOr<PhaseTiming> t = RunTimedPhase(2, 1, 0.02, [&](int, uint64_t) {
    ++calls;
    return absl::OkStatus();
  });
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(t->seconds, 0.02);
  EXPECT_EQ(t->batches, calls.load());
  EXPECT_GE(t->batches, 2u);
}

TEST(BenchTimingTest, FirstErrorStopsEveryThread) {
  // With an hour to run, only the error can end the phase.
  absl::StatusOr<PhaseTiming> t =
      RunTimedPhase(2, 1, 3600, [&](int thread, uint64_t i) {
        if (thread == 1 && i == 5) return absl::DataLossError("boom");
        return absl::OkStatus();
      });
  EXPECT_EQ(t.status(), absl::DataLossError("boom"));
}

TEST(ProcessCpuTest, CountsThisProcessesWorkAndRefusesNoProcess) {
  const absl::StatusOr<double> before = ProcessCpuSeconds();
  ASSERT_TRUE(before.ok()) << before.status();
  // Spin until the process clock has moved by 50 ms of CPU.
  volatile uint64_t sink = 0;
  absl::StatusOr<double> now = before;
  while (now.ok() && *now - *before < 0.05) {
    for (int i = 0; i < 100000; ++i) sink = sink + i;
    now = ProcessCpuSeconds();
  }
  ASSERT_TRUE(now.ok()) << now.status();
  // The same clock read by pid: at least what it read as itself.
  const absl::StatusOr<double> by_pid = ProcessCpuSeconds(getpid());
  ASSERT_TRUE(by_pid.ok()) << by_pid.status();
  EXPECT_GE(*by_pid, *now);
  // A pid above the kernel's limit (pid_max is at most 2^22) is no process.
  const absl::StatusOr<double> none = ProcessCpuSeconds(1 << 23);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
}

}  // namespace
}  // namespace psdb::bench
