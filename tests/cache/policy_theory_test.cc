// The cache's policies against theory on independent-reference Zipf streams
// (fixed seeds), run on the real SlotMap / policy classes:
//  - LRU within 1.5 percentage points of Che's approximation;
//  - LFU at >= 0.97 of the best static hit rate;
//  - lookahead at >= 0.95 of Belady's offline optimum on the same trace,
//    and above LRU and LFU wherever Belady beats them by more than 2 points.
// Sizes are the small end of the benchmark's grid (ps-bench cache runs the
// rest) so the suite stays fast under ASan.
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_format.h"
#include "cache/policy_sim.h"
#include "tests/testing/test_util.h"

namespace psdb::cache {
namespace {

struct Stream {
  double alpha;
  double capacity_fraction;
};

constexpr int64_t kN = 100000;
// Lookahead sees this many batches of kBatch ids ahead.
constexpr int32_t kBatch = 16;

class PolicyTheoryTest : public ::testing::TestWithParam<Stream> {};

TEST_P(PolicyTheoryTest, HitRatesMatchTheory) {
  const Stream s = GetParam();
  const int32_t capacity = static_cast<int32_t>(kN * s.capacity_fraction);
  // Warm up on several capacities' worth of accesses, then count.
  const int64_t warmup = 30 * static_cast<int64_t>(capacity);
  const int64_t counted = 150000;
  const std::vector<double> p = ZipfProbabilities(kN, s.alpha);
  const std::vector<uint64_t> trace = ZipfTrace(
      p, warmup + counted, 1000 + static_cast<uint64_t>(s.alpha * 10));

  SimOptions options;
  options.capacity = capacity;
  options.warmup = warmup;
  options.policy = PolicyKind::kLru;
  ASSERT_OK_AND_ASSIGN(SimResult lru, SimulateHitRate(trace, options));
  options.policy = PolicyKind::kLfu;
  ASSERT_OK_AND_ASSIGN(SimResult lfu, SimulateHitRate(trace, options));
  options.policy = PolicyKind::kLookahead;
  options.batch_size = kBatch;
  options.lookahead_batches = 16 * capacity / kBatch;
  ASSERT_OK_AND_ASSIGN(SimResult ahead, SimulateHitRate(trace, options));

  const double che = CheLruHitRate(p, capacity);
  const double static_opt = StaticOptimumHitRate(p, capacity);
  const double belady = BeladyHitRate(trace, capacity, warmup);
  const std::string line = absl::StrFormat(
      "alpha=%.1f C=%d: lru=%.4f che=%.4f lfu=%.4f static=%.4f "
      "lookahead=%.4f belady=%.4f",
      s.alpha, capacity, lru.hit_rate(), che, lfu.hit_rate(), static_opt,
      ahead.hit_rate(), belady);
  std::printf("%s\n", line.c_str());

  EXPECT_LE(std::abs(lru.hit_rate() - che), 0.015) << line;
  EXPECT_GE(lfu.hit_rate(), 0.97 * static_opt) << line;
  EXPECT_GE(ahead.hit_rate(), 0.95 * belady) << line;
  if (belady - lru.hit_rate() > 0.02) {
    EXPECT_GT(ahead.hit_rate(), lru.hit_rate()) << line;
  }
  if (belady - lfu.hit_rate() > 0.02) {
    EXPECT_GT(ahead.hit_rate(), lfu.hit_rate()) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Zipf, PolicyTheoryTest,
    ::testing::Values(Stream{0.8, 0.01}, Stream{0.8, 0.1}, Stream{1.0, 0.01},
                      Stream{1.0, 0.1}, Stream{1.2, 0.01}, Stream{1.2, 0.1}),
    [](const ::testing::TestParamInfo<Stream>& info) {
      return absl::StrFormat(
          "alpha%02d_cap%dpct", static_cast<int>(info.param.alpha * 10 + 0.5),
          static_cast<int>(info.param.capacity_fraction * 100 + 0.5));
    });

}  // namespace
}  // namespace psdb::cache
