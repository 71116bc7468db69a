#include "psdb/table_spec.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

TableSpec Spec(InitKind kind, float a, float b, uint64_t seed = 7) {
  TableSpec s;
  s.name = "emb";
  s.dim = 16;
  s.initializer = {kind, a, b};
  s.seed = seed;
  return s;
}

TEST(TableNameTest, AcceptsAndRejects) {
  EXPECT_OK(ValidateTableName("a"));
  EXPECT_OK(ValidateTableName("user_id.v2-emb"));
  EXPECT_OK(ValidateTableName(std::string(128, 'x')));
  EXPECT_THAT(ValidateTableName(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTableName(std::string(129, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTableName("."),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTableName("default"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTableName(".."),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTableName("a/b"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTableName("a b"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::Status s = ValidateTableName("bad name!");
  EXPECT_NE(std::string(s.message()).find("bad name!"), std::string::npos);
}

TEST(TableSpecTest, Validation) {
  EXPECT_OK(ValidateTableSpec(Spec(InitKind::kUniform, -1, 1)));
  TableSpec s = Spec(InitKind::kUniform, 1, 1);
  EXPECT_THAT(ValidateTableSpec(s),
              StatusIs(absl::StatusCode::kInvalidArgument));
  s = Spec(InitKind::kNormal, 0, 0);
  EXPECT_THAT(ValidateTableSpec(s),
              StatusIs(absl::StatusCode::kInvalidArgument));
  s = Spec(InitKind::kZeros, 0, 0);
  EXPECT_OK(ValidateTableSpec(s));
  s.dim = 0;
  EXPECT_THAT(ValidateTableSpec(s),
              StatusIs(absl::StatusCode::kInvalidArgument));
  s.dim = 65537;
  EXPECT_THAT(ValidateTableSpec(s),
              StatusIs(absl::StatusCode::kInvalidArgument));
  s.dim = 65536;
  EXPECT_OK(ValidateTableSpec(s));
  s.ttl_steps = -1;
  EXPECT_THAT(ValidateTableSpec(s),
              StatusIs(absl::StatusCode::kInvalidArgument));
  s.ttl_steps = 0;
  s.optimizer.learning_rate = -1;
  EXPECT_THAT(ValidateTableSpec(s),
              StatusIs(absl::StatusCode::kInvalidArgument));
  s.optimizer.learning_rate = 0.1f;
  s.initializer.a = NAN;
  EXPECT_THAT(ValidateTableSpec(s),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TableSpecTest, Equality) {
  TableSpec a = Spec(InitKind::kUniform, -1, 1);
  TableSpec b = a;
  EXPECT_TRUE(a == b);
  b.optimizer.beta2 = 0.5f;
  EXPECT_FALSE(a == b);
  b = a;
  b.ttl_steps = 3;
  EXPECT_FALSE(a == b);
}

TEST(InitTest, ZerosAndConstant) {
  std::vector<float> v(16, 9.0f);
  InitializeRow(Spec(InitKind::kZeros, 0, 0), 5, absl::MakeSpan(v));
  for (float x : v) EXPECT_EQ(x, 0.0f);
  InitializeRow(Spec(InitKind::kConstant, 0.25f, 0), 5, absl::MakeSpan(v));
  for (float x : v) EXPECT_EQ(x, 0.25f);
}

TEST(InitTest, DeterministicPerSeedAndKey) {
  const TableSpec s = Spec(InitKind::kUniform, -0.5f, 0.5f, 11);
  std::vector<float> a(16), b(16), c(16), d(16);
  InitializeRow(s, 42, absl::MakeSpan(a));
  InitializeRow(s, 42, absl::MakeSpan(b));
  EXPECT_EQ(a, b);
  InitializeRow(s, 43, absl::MakeSpan(c));
  EXPECT_NE(a, c);
  InitializeRow(Spec(InitKind::kUniform, -0.5f, 0.5f, 12), 42,
                absl::MakeSpan(d));
  EXPECT_NE(a, d);
  // Elements of one row differ from each other.
  EXPECT_NE(a[0], a[1]);
  // A prefix of a wider row equals the narrower row (element j depends only
  // on j), so the stream is counter-based.
  std::vector<float> wide(32);
  TableSpec ws = s;
  ws.dim = 32;
  InitializeRow(ws, 42, absl::MakeSpan(wide));
  for (int j = 0; j < 16; ++j) EXPECT_EQ(wide[j], a[j]);
}

TEST(InitTest, UniformInRangeWithRightMean) {
  const TableSpec s = Spec(InitKind::kUniform, -2.0f, 6.0f);
  std::vector<float> v(16);
  double sum = 0;
  int n = 0;
  float lo = 100, hi = -100;
  for (uint64_t k = 0; k < 4000; ++k) {
    InitializeRow(s, k, absl::MakeSpan(v));
    for (float x : v) {
      EXPECT_GE(x, -2.0f);
      EXPECT_LE(x, 6.0f);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
      ++n;
    }
  }
  EXPECT_NEAR(sum / n, 2.0, 0.05);  // mean (a+b)/2, std of mean ~ 0.009
  EXPECT_LT(lo, -1.99f);
  EXPECT_GT(hi, 5.99f);
}

TEST(InitTest, NormalMeanAndStd) {
  const TableSpec s = Spec(InitKind::kNormal, 1.0f, 0.5f);
  std::vector<float> v(16);
  double sum = 0, sq = 0;
  int n = 0;
  for (uint64_t k = 0; k < 5000; ++k) {
    InitializeRow(s, k, absl::MakeSpan(v));
    for (float x : v) {
      sum += x;
      sq += double{x} * x;
      ++n;
    }
  }
  const double mean = sum / n;
  const double sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(sd, 0.5, 0.01);
}

TEST(InitTest, TruncatedNormalWithinTwoStd) {
  const TableSpec s = Spec(InitKind::kTruncatedNormal, 0.0f, 1.0f);
  std::vector<float> v(16);
  double sum = 0, sq = 0;
  int n = 0;
  for (uint64_t k = 0; k < 5000; ++k) {
    InitializeRow(s, k, absl::MakeSpan(v));
    for (float x : v) {
      ASSERT_LE(std::fabs(x), 2.0f);
      sum += x;
      sq += double{x} * x;
      ++n;
    }
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  // Std of N(0,1) truncated to [-2, 2] is 0.8796.
  EXPECT_NEAR(std::sqrt(sq / n), 0.8796, 0.01);
}

TEST(InitTest, DefaultRow) {
  TableSpec s = Spec(InitKind::kUniform, -1, 1);
  std::vector<float> init(16), def(16);
  InitializeRow(s, 3, absl::MakeSpan(init));
  DefaultRow(s, 3, absl::MakeSpan(def));
  EXPECT_EQ(init, def);
  s.serving_default = MissingRowValue::kZeros;
  DefaultRow(s, 3, absl::MakeSpan(def));
  for (float x : def) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace psdb
