// Tests of ps-bench's open-loop latency (tools/bench/latency.h): exact
// nearest-rank percentiles, windows and failure counts, the send schedule,
// and that a stall is charged to the requests queued behind it.
#include "tools/bench/latency.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace psdb::bench {
namespace {

TEST(LatencyTest, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  EXPECT_EQ(NearestRank(v, 0.5), 500);
  EXPECT_EQ(NearestRank(v, 0.99), 990);
  EXPECT_EQ(NearestRank(v, 0.999), 999);
  EXPECT_EQ(NearestRank(v, 1), 1000);
  EXPECT_EQ(NearestRank(v, 0.0001), 1);
  // Fewer samples than 1/(1-q): the largest.
  EXPECT_EQ(NearestRank(std::vector<double>{1, 2, 3}, 0.99), 3);
  EXPECT_EQ(NearestRank(std::vector<double>{7}, 0.5), 7);
  EXPECT_TRUE(std::isnan(NearestRank({}, 0.5)));
}

TEST(LatencyTest, SummarizeCountsFailuresAndKeepsThemOutOfPercentiles) {
  std::vector<LatencySample> samples;
  for (int i = 0; i < 100; ++i) {
    samples.push_back({.intended_s = i * 0.01, .latency_s = (i + 1) * 1e-3});
  }
  samples[10].ok = false;  // intended 0.10
  samples[60].ok = false;  // intended 0.60
  const LatencySummary all = Summarize(samples);
  EXPECT_EQ(all.requests, 100u);
  EXPECT_EQ(all.failed, 2u);
  EXPECT_DOUBLE_EQ(all.max_s, 0.1);
  // 98 successful latencies: 1..100 ms without 11 and 61; rank 49 is 50 ms.
  EXPECT_DOUBLE_EQ(all.p50_s, 0.05);

  // [0.5, 0.7): intended 0.50..0.69, i = 50..69, one failed.
  const LatencySummary window = Summarize(samples, 0.5 - 1e-9, 0.7 - 1e-9);
  EXPECT_EQ(window.requests, 20u);
  EXPECT_EQ(window.failed, 1u);
  EXPECT_DOUBLE_EQ(window.p50_s, 0.060);  // 10th of 51..70 ms without 61
  EXPECT_DOUBLE_EQ(window.max_s, 0.070);

  const LatencySummary empty = Summarize(samples, 5, 6);
  EXPECT_EQ(empty.requests, 0u);
  EXPECT_TRUE(std::isnan(empty.p99_s));
}

TEST(LatencyTest, OpenLoopSendsOnScheduleAcrossThreads) {
  // 2000 requests/s for 0.05 s: requests at k / 2000 s, k = 0..99, thread
  // k % 4 sending the (k / 4)-th of its own.
  std::atomic<int> calls{0};
  std::vector<std::vector<uint64_t>> seen(4);
  const OpenLoopResult run =
      RunOpenLoop(4, 2000, 0.05, nullptr, [&](int t, uint64_t i) {
        seen[t].push_back(i);
        ++calls;
        return i == 3 && t == 1 ? absl::UnavailableError("down")
                                : absl::OkStatus();
      });
  ASSERT_EQ(run.samples.size(), 100u);
  EXPECT_EQ(calls.load(), 100);
  for (size_t k = 0; k < run.samples.size(); ++k) {
    EXPECT_DOUBLE_EQ(run.samples[k].intended_s, k / 2000.0) << k;
    EXPECT_GE(run.samples[k].latency_s, 0);
    EXPECT_EQ(run.samples[k].ok, k != 3 * 4 + 1) << k;
  }
  for (int t = 0; t < 4; ++t) {
    ASSERT_EQ(seen[t].size(), 25u);
    for (uint64_t i = 0; i < 25; ++i) EXPECT_EQ(seen[t][i], i);
  }
  EXPECT_EQ(run.first_error, absl::UnavailableError("down"));
  EXPECT_GE(run.seconds, 99 / 2000.0);
}

TEST(LatencyTest, AStallIsChargedToTheRequestsQueuedBehindIt) {
  // One thread, a request every 1 ms; the first takes 50 ms. The requests
  // meant for 1..49 ms cannot start before it ends, so each one's latency,
  // counted from its intended send time, is at least 50 ms minus that time
  // (a closed loop would have reported them as fast).
  const OpenLoopResult run =
      RunOpenLoop(1, 1000, 0.1, nullptr, [](int, uint64_t i) {
        if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return absl::OkStatus();
      });
  ASSERT_EQ(run.samples.size(), 100u);
  EXPECT_GE(run.samples[0].latency_s, 0.05);
  for (int k = 1; k < 50; ++k) {
    EXPECT_GE(run.samples[k].latency_s, 0.05 - k / 1000.0) << k;
  }
}

TEST(LatencyTest, StopEndsTheRun) {
  std::atomic<bool> stop{true};
  const OpenLoopResult run = RunOpenLoop(
      2, 1000, 10, &stop, [](int, uint64_t) { return absl::OkStatus(); });
  EXPECT_TRUE(run.samples.empty());
}

}  // namespace
}  // namespace psdb::bench
