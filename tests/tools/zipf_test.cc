#include "tools/bench/zipf.h"

#include <cmath>
#include <set>
#include <vector>

#include "tests/testing/test_util.h"

namespace psdb::bench {
namespace {

// Empirical frequencies match P(k) = k^-alpha / H(n, alpha) within 5 sigma
// of a binomial proportion, for a small n and several alphas.
TEST(ZipfTest, MatchesTheDistribution) {
  constexpr uint64_t kN = 20;
  constexpr int kSamples = 400000;
  for (double alpha : {0.5, 1.0, 1.05, 2.0}) {
    ZipfSampler zipf(kN, alpha);
    SplitMix rng(7);
    std::vector<int> counts(kN + 1, 0);
    for (int i = 0; i < kSamples; ++i) {
      const uint64_t k = zipf.Sample(rng);
      ASSERT_GE(k, 1u);
      ASSERT_LE(k, kN);
      ++counts[k];
    }
    double h = 0;
    for (uint64_t k = 1; k <= kN; ++k) h += std::pow(double(k), -alpha);
    for (uint64_t k = 1; k <= kN; ++k) {
      const double p = std::pow(double(k), -alpha) / h;
      const double sigma = std::sqrt(p * (1 - p) / kSamples);
      EXPECT_NEAR(counts[k] / double(kSamples), p, 5 * sigma)
          << "alpha=" << alpha << " k=" << k;
    }
  }
}

TEST(ZipfTest, HugeRangeStaysInBounds) {
  ZipfSampler zipf(1ull << 40, 1.05);
  SplitMix rng(1);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t k = zipf.Sample(rng);
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, 1ull << 40);
  }
}

TEST(ZipfTest, ScrambleIsABijectionThatSpreadsHotKeys) {
  std::set<uint64_t> keys;
  for (uint64_t r = 0; r < 10000; ++r) keys.insert(ScrambleKey(r, 1));
  EXPECT_EQ(keys.size(), 10000u);
  // Ranks 0 and 1 are not numerically adjacent.
  const uint64_t a = ScrambleKey(0, 1), b = ScrambleKey(1, 1);
  EXPECT_GT(a > b ? a - b : b - a, 1ull << 32);
}

TEST(ZipfTest, StreamIsDeterministic) {
  const std::vector<uint64_t> s1 = ZipfKeyStream(1000, 1.05, 3, 16, 5);
  const std::vector<uint64_t> s2 = ZipfKeyStream(1000, 1.05, 3, 16, 5);
  ASSERT_EQ(s1.size(), 48u);
  EXPECT_EQ(s1, s2);
  EXPECT_NE(s1, ZipfKeyStream(1000, 1.05, 3, 16, 6));
}

}  // namespace
}  // namespace psdb::bench
