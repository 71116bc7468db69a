// Each kernel against values computed by hand from its published formula
// (see optim/kernels_inl.h for the formulas and their sources). Expected
// numbers come from evaluating those formulas in double precision.
#include "optim/optimizer.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace psdb::optim {
namespace {

// One row: value, state and the spec that drives them.
struct Row {
  explicit Row(const OptimizerSpec& s, std::vector<float> v)
      : spec(s),
        value(std::move(v)),
        state(StateSize(s, static_cast<int>(value.size()))) {
    InitState(spec, static_cast<int>(value.size()), absl::MakeSpan(state));
  }
  void Step(std::vector<float> grad, int64_t step) {
    Apply(spec, absl::MakeSpan(value), absl::MakeSpan(state), grad, step);
  }
  OptimizerSpec spec;
  std::vector<float> value;
  std::vector<float> state;
};

OptimizerSpec Spec(OptimizerKind kind, float lr) {
  OptimizerSpec s;
  s.kind = kind;
  s.learning_rate = lr;
  return s;
}

TEST(OptimizerTest, StateSizes) {
  EXPECT_EQ(StateSize(Spec(OptimizerKind::kSgd, 1), 8), 0);
  EXPECT_EQ(StateSize(Spec(OptimizerKind::kMomentum, 1), 8), 8);
  EXPECT_EQ(StateSize(Spec(OptimizerKind::kAdagrad, 1), 8), 8);
  EXPECT_EQ(StateSize(Spec(OptimizerKind::kRowwiseAdagrad, 1), 8), 1);
  EXPECT_EQ(StateSize(Spec(OptimizerKind::kAdam, 1), 8), 17);
  EXPECT_EQ(StateSize(Spec(OptimizerKind::kLazyAdam, 1), 8), 17);
  EXPECT_EQ(StateSize(Spec(OptimizerKind::kFtrl, 1), 8), 16);
}

TEST(OptimizerTest, Sgd) {
  Row r(Spec(OptimizerKind::kSgd, 0.5f), {1.0f, -2.0f});
  r.Step({0.5f, 1.0f}, 1);  // w -= 0.5 g
  EXPECT_FLOAT_EQ(r.value[0], 0.75f);
  EXPECT_FLOAT_EQ(r.value[1], -2.5f);
  r.Step({-1.0f, 0.0f}, 2);
  EXPECT_FLOAT_EQ(r.value[0], 1.25f);
  EXPECT_FLOAT_EQ(r.value[1], -2.5f);
}

TEST(OptimizerTest, SgdWeightDecay) {
  OptimizerSpec s = Spec(OptimizerKind::kSgd, 0.5f);
  s.weight_decay = 0.5f;
  Row r(s, {2.0f});
  r.Step({1.0f}, 1);  // g = 1 + 0.5 * 2 = 2; w = 2 - 1 = 1
  EXPECT_FLOAT_EQ(r.value[0], 1.0f);
}

// weight_decay is L2 applied lazily: only when the row is updated, folded
// into its gradient (g' = g + wd * w) before the kind's own formula, so
// Adagrad's accumulator and Adam's moments see the decayed gradient (as
// PyTorch's Adagrad / Adam weight_decay, and TensorFlow's L2 on the rows
// a sparse update touches). A row not pushed is not decayed at all.
TEST(OptimizerTest, AdagradWeightDecayIsLazyL2) {
  OptimizerSpec s = Spec(OptimizerKind::kAdagrad, 0.1f);
  s.initial_accumulator = 7.0f;
  s.epsilon = 0.0f;
  s.weight_decay = 0.5f;
  Row r(s, {2.0f});
  r.Step({2.0f}, 1);  // g' = 2 + 0.5 * 2 = 3; s = 16; w = 2 - 0.1 * 3 / 4
  EXPECT_FLOAT_EQ(r.value[0], 1.925f);
  // A zero gradient still decays: g' = 0.9625, s = 16.92640625,
  // w = 1.925 - 0.1 * 0.9625 / sqrt(16.92640625) = 1.90160525
  r.Step({0.0f}, 2);
  EXPECT_FLOAT_EQ(r.state[0], 16.92640625f);
  EXPECT_FLOAT_EQ(r.value[0], 1.90160525f);
}

TEST(OptimizerTest, LazyAdamWeightDecayCountsTheRowsOwnSteps) {
  OptimizerSpec s = Spec(OptimizerKind::kLazyAdam, 0.1f);
  s.weight_decay = 0.5f;
  Row r(s, {1.0f});
  // t = 1: g' = 0.5; m = 0.05, v = 0.00025; m^ = 0.5, v^ = 0.25;
  // w = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.9
  r.Step({0.0f}, 1);
  EXPECT_FLOAT_EQ(r.value[0], 0.9f);
  // The row's second update at global step 100: t = 2, not 100.
  // g' = 0.45; m = 0.09, v = 0.00045225; w = 0.9 - 0.1 * (0.09 / 0.19) /
  // (sqrt(0.00045225 / 0.001999) + 1e-8) = 0.80041223
  r.Step({0.0f}, 100);
  EXPECT_FLOAT_EQ(r.state[0], 0.09f);
  EXPECT_NEAR(r.state[1], 0.00045225f, 1e-8);  // float32 (1 - beta2)
  EXPECT_FLOAT_EQ(r.state[2], 2.0f);
  EXPECT_FLOAT_EQ(r.value[0], 0.80041223f);
}

TEST(OptimizerTest, Momentum) {
  OptimizerSpec s = Spec(OptimizerKind::kMomentum, 0.1f);
  s.momentum = 0.9f;
  Row r(s, {1.0f});
  r.Step({1.0f}, 1);  // a = 1, w = 0.9
  EXPECT_FLOAT_EQ(r.value[0], 0.9f);
  r.Step({1.0f}, 2);  // a = 1.9, w = 0.71
  EXPECT_FLOAT_EQ(r.value[0], 0.71f);
  r.Step({0.0f}, 3);  // a = 1.71, w = 0.539
  EXPECT_FLOAT_EQ(r.value[0], 0.539f);
  EXPECT_FLOAT_EQ(r.state[0], 1.71f);
}

TEST(OptimizerTest, NesterovMomentum) {
  OptimizerSpec s = Spec(OptimizerKind::kMomentum, 0.1f);
  s.momentum = 0.9f;
  s.nesterov = true;
  Row r(s, {1.0f});
  r.Step({1.0f}, 1);  // a = 1, w = 1 - 0.1 (1 + 0.9) = 0.81
  EXPECT_FLOAT_EQ(r.value[0], 0.81f);
  r.Step({1.0f}, 2);  // a = 1.9, w = 0.81 - 0.1 (1 + 1.71) = 0.539
  EXPECT_FLOAT_EQ(r.value[0], 0.539f);
}

TEST(OptimizerTest, Adagrad) {
  OptimizerSpec s = Spec(OptimizerKind::kAdagrad, 0.1f);
  s.initial_accumulator = 7.0f;
  s.epsilon = 0.0f;
  Row r(s, {1.0f});
  EXPECT_FLOAT_EQ(r.state[0], 7.0f);
  r.Step({3.0f}, 1);  // s = 16, w = 1 - 0.1 * 3 / 4 = 0.925
  EXPECT_FLOAT_EQ(r.value[0], 0.925f);
  r.Step({-3.0f}, 2);  // s = 25, w = 0.925 + 0.1 * 3 / 5 = 0.985
  EXPECT_FLOAT_EQ(r.value[0], 0.985f);
  r.Step({0.0f}, 3);  // no change
  EXPECT_FLOAT_EQ(r.value[0], 0.985f);
  EXPECT_FLOAT_EQ(r.state[0], 25.0f);
}

TEST(OptimizerTest, RowwiseAdagrad) {
  OptimizerSpec s = Spec(OptimizerKind::kRowwiseAdagrad, 0.1f);
  s.initial_accumulator = 8.0f;
  s.epsilon = 0.0f;
  Row r(s, {1.0f, 1.0f});
  r.Step({3.0f, 5.0f}, 1);  // s = 8 + (9 + 25) / 2 = 25; w -= 0.1 g / 5
  EXPECT_FLOAT_EQ(r.value[0], 0.94f);
  EXPECT_FLOAT_EQ(r.value[1], 0.9f);
  r.Step({1.0f, 7.0f}, 2);  // s = 25 + 25 = 50; w -= 0.1 g / sqrt(50)
  EXPECT_FLOAT_EQ(r.state[0], 50.0f);
  EXPECT_NEAR(r.value[0], 0.925857864, 1e-6);
  EXPECT_NEAR(r.value[1], 0.801005051, 1e-6);
}

TEST(OptimizerTest, AdamThreeSteps) {
  OptimizerSpec s = Spec(OptimizerKind::kAdam, 0.1f);
  Row r(s, {1.0f});
  // A constant gradient makes the bias-corrected step exactly lr.
  r.Step({2.0f}, 1);
  EXPECT_NEAR(r.value[0], 0.9, 1e-6);
  r.Step({2.0f}, 2);
  EXPECT_NEAR(r.value[0], 0.8, 1e-6);
  r.Step({0.0f}, 3);  // m = 0.342, v = 0.007988004, t = 3
  EXPECT_NEAR(r.value[0], 0.722699712, 1e-6);
  EXPECT_NEAR(r.state[0], 0.342, 1e-7);
  // 1 - 0.999f is 0.00099998713 in float32, hence the looser bound on v.
  EXPECT_NEAR(r.state[1], 0.007988004, 2e-7);
  EXPECT_EQ(r.state[2], 3.0f);
}

TEST(OptimizerTest, AdamUsesGlobalStepLazyAdamUsesRowCount) {
  // A row first updated at global step 3.
  Row adam(Spec(OptimizerKind::kAdam, 0.1f), {1.0f});
  adam.Step({2.0f}, 3);  // c1 = 0.271, c2 = 0.002997001
  EXPECT_NEAR(adam.value[0], 0.936118641, 1e-6);
  Row lazy(Spec(OptimizerKind::kLazyAdam, 0.1f), {1.0f});
  lazy.Step({2.0f}, 3);  // the row's own t = 1: a full lr step
  EXPECT_NEAR(lazy.value[0], 0.9, 1e-6);
  EXPECT_EQ(lazy.state[2], 1.0f);
  lazy.Step({2.0f}, 9);
  EXPECT_NEAR(lazy.value[0], 0.8, 1e-6);
  EXPECT_EQ(lazy.state[2], 2.0f);
}

TEST(OptimizerTest, FtrlNoRegularization) {
  OptimizerSpec s = Spec(OptimizerKind::kFtrl, 0.1f);
  Row r(s, {0.0f});
  EXPECT_FLOAT_EQ(r.state[1], 0.1f);  // n starts at initial_accumulator
  const float g[] = {1.0f, -0.5f, 2.0f};
  const double w[] = {-0.0953462589, -0.0523131106, -0.138780651};
  const double z[] = {1.0, 0.607823419, 3.21000575};
  const double n[] = {1.1, 1.35, 5.35};
  for (int i = 0; i < 3; ++i) {
    r.Step({g[i]}, i + 1);
    EXPECT_NEAR(r.value[0], w[i], 1e-6) << "step " << i + 1;
    EXPECT_NEAR(r.state[0], z[i], 1e-5) << "step " << i + 1;
    EXPECT_NEAR(r.state[1], n[i], 1e-6) << "step " << i + 1;
  }
}

TEST(OptimizerTest, FtrlL1L2) {
  OptimizerSpec s = Spec(OptimizerKind::kFtrl, 0.1f);
  s.l1 = 0.5f;
  s.l2 = 0.1f;
  Row r(s, {0.0f});
  const float g[] = {1.0f, -0.5f, 2.0f};
  const double w[] = {-0.0467810498, -0.0044761075, -0.0902023936};
  for (int i = 0; i < 3; ++i) {
    r.Step({g[i]}, i + 1);
    EXPECT_NEAR(r.value[0], w[i], 1e-6) << "step " << i + 1;
  }
}

TEST(OptimizerTest, FtrlL1MakesWeightsExactlyZero) {
  OptimizerSpec s = Spec(OptimizerKind::kFtrl, 0.1f);
  s.l1 = 1.5f;
  Row r(s, {0.0f, 0.0f});
  r.Step({1.0f, 1.0f}, 1);  // |z| = 1 <= l1
  EXPECT_EQ(r.value[0], 0.0f);
  r.Step({-0.5f, -0.5f}, 2);  // |z| = 0.5 <= l1
  EXPECT_EQ(r.value[0], 0.0f);
  EXPECT_EQ(r.value[1], 0.0f);
  r.Step({2.0f, 2.0f}, 3);  // z = 2.5 > l1: w = (1.5 - 2.5) / (sqrt(5.35)/0.1)
  EXPECT_NEAR(r.value[0], -0.0432337701, 1e-6);
}

TEST(OptimizerTest, FtrlGeneralLearningRatePower) {
  OptimizerSpec s = Spec(OptimizerKind::kFtrl, 0.1f);
  s.lr_power = -0.7f;
  Row r(s, {0.0f});
  r.Step({1.0f}, 1);
  EXPECT_NEAR(r.value[0], -0.0935459781, 1e-6);
  r.Step({2.0f}, 2);
  EXPECT_NEAR(r.value[0], -0.15747983, 1e-6);
}

// accumulator_decay d: n' = d n + g^2 at each update, the rest as FTRL
// (with l1 = l2 = 0, w' = w - lr g / sqrt(n')). Reference in double.
TEST(OptimizerTest, FtrlAccumulatorDecay) {
  OptimizerSpec s = Spec(OptimizerKind::kFtrl, 0.1f);
  s.accumulator_decay = 0.5f;
  Row r(s, {0.0f});
  const float g[] = {1.0f, -0.5f, 2.0f};
  const double w[] = {-0.0975900073, -0.0407938239, -0.136275807};
  const double z[] = {1.0, 0.359124693, 2.85448212};
  const double n[] = {1.05, 0.775, 4.3875};
  for (int i = 0; i < 3; ++i) {
    r.Step({g[i]}, i + 1);
    EXPECT_NEAR(r.value[0], w[i], 1e-6) << "step " << i + 1;
    EXPECT_NEAR(r.state[0], z[i], 1e-5) << "step " << i + 1;
    EXPECT_NEAR(r.state[1], n[i], 1e-6) << "step " << i + 1;
  }
  s.accumulator_decay = 0.0f;
  EXPECT_THAT(Validate(s), StatusIs(absl::StatusCode::kInvalidArgument));
  s.accumulator_decay = 1.5f;
  EXPECT_THAT(Validate(s), StatusIs(absl::StatusCode::kInvalidArgument));
  s.accumulator_decay = 1.0f;
  EXPECT_TRUE(Validate(s).ok());
}

// lr_power -1: w = -lr z / n, a per-coordinate Newton step w' = w - lr g / n'.
TEST(OptimizerTest, FtrlLearningRatePowerMinusOne) {
  OptimizerSpec s = Spec(OptimizerKind::kFtrl, 0.5f);
  s.lr_power = -1.0f;
  s.initial_accumulator = 1.0f;
  Row r(s, {0.0f});
  r.Step({2.0f}, 1);  // n = 5
  EXPECT_NEAR(r.value[0], -0.2, 1e-7);
  r.Step({-1.0f}, 2);  // n = 6: -0.2 + 0.5 / 6
  EXPECT_NEAR(r.value[0], -0.116666667, 1e-7);
  EXPECT_NEAR(r.state[0], 1.4, 1e-6);
}

// Dense parameters are tables whose rows are blocks of a tensor: for every
// element-wise optimizer, updating a tensor block by block is the same as
// updating it whole, bit for bit.
TEST(OptimizerTest, DenseTensorAsBlocksEqualsWholeTensor) {
  const int n = 10, block = 4;  // 3 blocks, the last one padded
  for (OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdagrad,
        OptimizerKind::kAdam, OptimizerKind::kLazyAdam, OptimizerKind::kFtrl}) {
    OptimizerSpec s = Spec(kind, 0.05f);
    std::vector<float> init(n), grads(n);
    for (int i = 0; i < n; ++i) {
      init[i] = 0.1f * static_cast<float>(i) - 0.3f;
      grads[i] = 0.25f * static_cast<float>((i * 7) % 5) - 0.5f;
    }
    Row whole(s, init);
    std::vector<Row> blocks;
    for (int b = 0; b * block < n; ++b) {
      std::vector<float> v(block, 0.0f);
      for (int j = 0; j < block && b * block + j < n; ++j) {
        v[j] = init[b * block + j];
      }
      blocks.emplace_back(s, v);
    }
    for (int step = 1; step <= 3; ++step) {
      whole.Step(grads, step);
      for (size_t b = 0; b < blocks.size(); ++b) {
        std::vector<float> g(block, 0.0f);
        for (int j = 0; j < block && b * block + j < n; ++j) {
          g[j] = grads[b * block + j];
        }
        blocks[b].Step(g, step);
      }
    }
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(blocks[i / block].value[i % block], whole.value[i])
          << KindName(kind) << " element " << i;
    }
  }
}

TEST(OptimizerTest, ValidateRejectsBadHyperParameters) {
  EXPECT_OK(Validate(Spec(OptimizerKind::kAdam, 0.001f)));
  EXPECT_THAT(Validate(Spec(OptimizerKind::kSgd, 0.0f)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Validate(Spec(OptimizerKind::kSgd, NAN)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  OptimizerSpec adam = Spec(OptimizerKind::kAdam, 0.1f);
  adam.beta1 = 1.0f;
  EXPECT_THAT(Validate(adam), StatusIs(absl::StatusCode::kInvalidArgument));
  OptimizerSpec ftrl = Spec(OptimizerKind::kFtrl, 0.1f);
  ftrl.lr_power = 0.5f;
  EXPECT_THAT(Validate(ftrl), StatusIs(absl::StatusCode::kInvalidArgument));
  ftrl.lr_power = -0.5f;
  ftrl.initial_accumulator = 0.0f;
  EXPECT_THAT(Validate(ftrl), StatusIs(absl::StatusCode::kInvalidArgument));
  OptimizerSpec bad = Spec(static_cast<OptimizerKind>(42), 0.1f);
  EXPECT_THAT(Validate(bad), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(OptimizerTest, NamesRoundTrip) {
  for (int k = 0; k <= static_cast<int>(OptimizerKind::kFtrl); ++k) {
    const auto kind = static_cast<OptimizerKind>(k);
    ASSERT_OK_AND_ASSIGN(OptimizerKind parsed, ParseKind(KindName(kind)));
    EXPECT_EQ(parsed, kind);
  }
  EXPECT_THAT(ParseKind("adamw"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::optim
