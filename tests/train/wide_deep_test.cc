#include "train/wide_deep.h"

#include <cmath>
#include <random>
#include <vector>

#include "tests/testing/test_util.h"

namespace psdb::train {
namespace {

// A small Wide&Deep with every parameter as a mutable vector.
struct Problem {
  WideDeepShape shape;
  int n = 3;
  std::vector<float> wide, deep, dense, labels, linear;
  std::vector<std::vector<float>> mlp;

  explicit Problem(uint32_t seed) {
    WideDeepConfig c;
    c.deep_dim = 2;
    c.hidden = {5, 3};
    shape = ShapeOf(c);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto fill = [&](std::vector<float>* v, size_t size, float scale) {
      v->resize(size);
      for (float& x : *v) x = scale * u(rng);
    };
    fill(&wide, n * kNumCatFeatures, 0.1f);
    fill(&deep, n * kNumCatFeatures * 2, 0.5f);
    fill(&dense, n * kNumIntFeatures, 1.0f);
    fill(&linear, kNumIntFeatures + 1, 0.2f);
    labels = {1, 0, 1};
    for (size_t s : shape.mlp.TensorSizes()) {
      mlp.emplace_back();
      fill(&mlp.back(), s, 0.4f);
    }
  }

  WideDeepInputs Inputs() const {
    WideDeepInputs in;
    in.n = n;
    in.wide = wide;
    in.deep = deep;
    in.dense = dense;
    in.labels = labels;
    in.linear = linear;
    for (const auto& t : mlp) in.mlp.push_back(t);
    return in;
  }

  double Loss() const {
    std::vector<float> probs;
    return ForwardBackward(shape, Inputs(), &probs, nullptr);
  }
};

// Central differences of the loss in every coordinate of *v against the
// analytic gradient g.
void CheckGradient(Problem* p, std::vector<float>* v,
                   const std::vector<float>& g, const char* what) {
  ASSERT_EQ(v->size(), g.size()) << what;
  constexpr float kEps = 1e-3f;
  for (size_t i = 0; i < v->size(); ++i) {
    const float saved = (*v)[i];
    (*v)[i] = saved + kEps;
    const double up = p->Loss();
    (*v)[i] = saved - kEps;
    const double down = p->Loss();
    (*v)[i] = saved;
    const double numeric = (up - down) / (2 * kEps);
    EXPECT_NEAR(g[i], numeric, 2e-3 + 0.02 * std::abs(numeric))
        << what << "[" << i << "]";
  }
}

TEST(WideDeepMathTest, ZeroParametersGiveHalfAndLog2) {
  Problem p(1);
  for (auto* v : {&p.wide, &p.deep, &p.linear})
    std::fill(v->begin(), v->end(), 0.0f);
  for (auto& t : p.mlp) std::fill(t.begin(), t.end(), 0.0f);
  std::vector<float> probs;
  WideDeepGrads g;
  const double loss = ForwardBackward(p.shape, p.Inputs(), &probs, &g);
  EXPECT_NEAR(loss, std::log(2.0), 1e-9);
  EXPECT_EQ(probs, (std::vector<float>{0.5f, 0.5f, 0.5f}));
  // d loss / d wide = (p - y) / n for each of the example's 26 positions.
  EXPECT_FLOAT_EQ(g.wide[0], -0.5f / 3);
  EXPECT_FLOAT_EQ(g.wide[kNumCatFeatures], 0.5f / 3);
  EXPECT_FLOAT_EQ(g.linear[kNumIntFeatures], -0.5f / 3);  // bias
}

TEST(WideDeepMathTest, GradientsMatchFiniteDifferences) {
  Problem p(7);
  std::vector<float> probs;
  WideDeepGrads g;
  ForwardBackward(p.shape, p.Inputs(), &probs, &g);
  CheckGradient(&p, &p.wide, g.wide, "wide");
  CheckGradient(&p, &p.deep, g.deep, "deep");
  CheckGradient(&p, &p.linear, g.linear, "linear");
  for (size_t t = 0; t < p.mlp.size(); ++t) {
    CheckGradient(&p, &p.mlp[t], g.mlp[t],
                  t % 2 == 0 ? "mlp weight" : "mlp bias");
  }
}

TEST(WideDeepMathTest, DefaultShapeIs429To256To128To1) {
  const WideDeepShape shape = ShapeOf(WideDeepConfig{});
  EXPECT_EQ(shape.mlp.sizes(), (std::vector<int>{429, 256, 128, 1}));
  EXPECT_EQ(shape.mlp.TensorSizes(),
            (std::vector<size_t>{429 * 256, 256, 256 * 128, 128, 128, 1}));
}

TEST(NormalizeIntFeaturesTest, SignedLog1pAndZeroForMissing) {
  CriteoBatch b;
  b.ints.assign(kNumIntFeatures, 0);
  b.int_present.assign(kNumIntFeatures, 1);
  b.ints[0] = 0;
  b.ints[1] = 9;
  b.ints[2] = -3;
  b.ints[3] = 5;
  b.int_present[3] = 0;
  std::vector<float> out;
  NormalizeIntFeatures(b, &out);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], std::log(10.0f));
  EXPECT_FLOAT_EQ(out[2], -std::log(4.0f));
  EXPECT_FLOAT_EQ(out[3], 0.0f);
}

}  // namespace
}  // namespace psdb::train
