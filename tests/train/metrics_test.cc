#include "train/metrics.h"

#include <cmath>
#include <vector>

#include "tests/testing/test_util.h"

namespace psdb::train {
namespace {

TEST(AucTest, PerfectAndInvertedRanking) {
  std::vector<float> labels = {0, 0, 1, 1};
  ASSERT_OK_AND_ASSIGN(double auc, Auc({0.1f, 0.2f, 0.8f, 0.9f}, labels));
  EXPECT_DOUBLE_EQ(auc, 1.0);
  ASSERT_OK_AND_ASSIGN(auc, Auc({0.9f, 0.8f, 0.2f, 0.1f}, labels));
  EXPECT_DOUBLE_EQ(auc, 0.0);
}

TEST(AucTest, HandExampleWithoutTies) {
  // Positives at 0.35 and 0.8; negatives at 0.1, 0.4, 0.7.
  // Pairs won: 0.35 beats 0.1 (1); 0.8 beats all three (3) -> 4 / 6.
  ASSERT_OK_AND_ASSIGN(double auc,
                       Auc({0.1f, 0.35f, 0.4f, 0.7f, 0.8f}, {0, 1, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(auc, 4.0 / 6.0);
}

TEST(AucTest, TiesCountOneHalf) {
  // All scores equal: every pair is a tie -> 0.5.
  ASSERT_OK_AND_ASSIGN(double auc, Auc({0.5f, 0.5f, 0.5f}, {1, 0, 0}));
  EXPECT_DOUBLE_EQ(auc, 0.5);
  // Positives {0.3, 0.6}, negatives {0.3, 0.1}: 0.3+ vs 0.3- tie (1/2),
  // 0.3+ vs 0.1 (1), 0.6 vs both (2) -> 3.5 / 4.
  ASSERT_OK_AND_ASSIGN(auc, Auc({0.3f, 0.3f, 0.1f, 0.6f}, {1, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(auc, 3.5 / 4.0);
}

TEST(AucTest, NeedsBothClassesAndMatchingSizes) {
  EXPECT_THAT(Auc({0.1f, 0.2f}, {1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Auc({0.1f}, {1, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(LogLossTest, HandValues) {
  ASSERT_OK_AND_ASSIGN(double ll, LogLoss({0.5f, 0.5f}, {0, 1}));
  EXPECT_NEAR(ll, std::log(2.0), 1e-12);
  ASSERT_OK_AND_ASSIGN(ll, LogLoss({0.8f, 0.25f}, {1, 0}));
  EXPECT_NEAR(ll, -(std::log(0.8f) + std::log(0.75)) / 2, 1e-7);
  // Clipped, not infinite.
  ASSERT_OK_AND_ASSIGN(ll, LogLoss({0.0f}, {1}));
  EXPECT_NEAR(ll, -std::log(1e-7), 1e-6);
  EXPECT_THAT(LogLoss({}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ExpectedAucTest, HandValues) {
  // p = {0.2, 0.8}: numerator = p2 (1 - p1) = 0.64 (0.8 beats 0.2);
  // denominator = p1 (1 - p2) + p2 (1 - p1) = 0.04 + 0.64.
  ASSERT_OK_AND_ASSIGN(double auc, ExpectedAuc({0.2f, 0.8f}));
  EXPECT_NEAR(auc, 0.64 / 0.68, 1e-7);
  // Equal probabilities: 0.5.
  ASSERT_OK_AND_ASSIGN(auc, ExpectedAuc({0.3f, 0.3f, 0.3f}));
  EXPECT_NEAR(auc, 0.5, 1e-12);
}

TEST(ExpectedAucTest, MatchesBruteForce) {
  std::vector<float> p = {0.1f, 0.7f, 0.3f, 0.3f, 0.9f, 0.05f, 0.5f};
  double num = 0, den = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    for (size_t j = 0; j < p.size(); ++j) {
      if (i == j) continue;
      const double w = static_cast<double>(p[i]) * (1 - p[j]);
      den += w;
      num += p[i] > p[j] ? w : (p[i] == p[j] ? w / 2 : 0);
    }
  }
  ASSERT_OK_AND_ASSIGN(double auc, ExpectedAuc(p));
  EXPECT_NEAR(auc, num / den, 1e-9);
}

}  // namespace
}  // namespace psdb::train
