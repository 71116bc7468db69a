#include "train/wide_deep.h"

#include <algorithm>
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
    in.dropout = dropout;
    return in;
  }
  MlpDropout dropout;  // none unless a test sets it

  double Loss() const {
    std::vector<float> probs;
    return ForwardBackward(shape, Inputs(), &probs, nullptr).loss;
  }

  // Example i's logits computed here, in double, straight from the
  // definitions in wide_deep.h (not through ForwardBackward or Mlp):
  // wide = bias + sum of its 26 wide embeddings + linear . dense,
  // deep = the MLP (w_l row-major [in x out], ReLU between layers) on
  // [its deep embeddings | dense].
  double WideLogit(int i) const {
    double z = linear[kNumIntFeatures];
    for (int f = 0; f < kNumCatFeatures; ++f)
      z += wide[i * kNumCatFeatures + f];
    for (int j = 0; j < kNumIntFeatures; ++j) {
      z += static_cast<double>(linear[j]) * dense[i * kNumIntFeatures + j];
    }
    return z;
  }
  double DeepLogit(int i) const {
    const int d = shape.deep_dim;
    std::vector<double> a(deep.begin() + i * kNumCatFeatures * d,
                          deep.begin() + (i + 1) * kNumCatFeatures * d);
    a.insert(a.end(), dense.begin() + i * kNumIntFeatures,
             dense.begin() + (i + 1) * kNumIntFeatures);
    const std::vector<int>& sizes = shape.mlp.sizes();
    for (size_t l = 0; l + 1 < sizes.size(); ++l) {
      const std::vector<float>& w = mlp[2 * l];
      const std::vector<float>& b = mlp[2 * l + 1];
      std::vector<double> next(sizes[l + 1]);
      for (int o = 0; o < sizes[l + 1]; ++o) {
        double z = b[o];
        for (int k = 0; k < sizes[l]; ++k) z += a[k] * w[k * sizes[l + 1] + o];
        next[o] = l + 2 < sizes.size() ? std::max(z, 0.0) : z;
      }
      a = std::move(next);
    }
    return a[0];
  }
};

// -[y log sigmoid(z) + (1 - y) log(1 - sigmoid(z))], the textbook form.
double LogLoss(double z, double y) {
  const double p = 1.0 / (1.0 + std::exp(-z));
  return -(y * std::log(p) + (1 - y) * std::log(1 - p));
}

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
  const WideDeepLoss loss = ForwardBackward(p.shape, p.Inputs(), &probs, &g);
  EXPECT_NEAR(loss.loss, std::log(2.0), 1e-9);
  EXPECT_NEAR(loss.wide_loss, std::log(2.0), 1e-9);
  EXPECT_NEAR(loss.deep_loss, std::log(2.0), 1e-9);
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

// With dropout the loss is still a smooth function of the parameters once
// the mask is fixed (the same seed gives the same mask), and Backward uses
// Forward's mask and scale.
TEST(WideDeepMathTest, GradientsMatchFiniteDifferencesWithAFixedDropoutMask) {
  Problem p(7);
  p.dropout = {0.4f, 12345};
  std::vector<float> probs, plain_probs;
  WideDeepGrads g;
  ForwardBackward(p.shape, p.Inputs(), &probs, &g);
  Problem plain(7);
  ForwardBackward(plain.shape, plain.Inputs(), &plain_probs, nullptr);
  EXPECT_NE(probs, plain_probs);  // the mask changed something
  CheckGradient(&p, &p.deep, g.deep, "deep");
  for (size_t t = 0; t < p.mlp.size(); ++t) {
    CheckGradient(&p, &p.mlp[t], g.mlp[t],
                  t % 2 == 0 ? "mlp weight" : "mlp bias");
  }
}

// Inverted dropout: a hidden activation is either 0 or its undropped value
// times 1 / (1 - rate), about `rate` of them are 0, the mask is a function
// of the seed, and rate 0 is exactly no dropout.
TEST(MlpDropoutTest, MaskIsSeededInvertedAndAboutTheRate) {
  const Mlp mlp({3, 4000, 1});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> params;
  for (size_t size : mlp.TensorSizes()) {
    params.emplace_back(size);
    for (float& x : params.back()) x = u(rng);
  }
  std::vector<absl::Span<const float>> views(params.begin(), params.end());
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 1.0f, 0.25f, -0.5f};
  auto run = [&](MlpDropout d, Mlp::Workspace* ws) {
    std::vector<float> out(2);
    mlp.Forward(views, x, 2, ws, absl::MakeSpan(out), d);
    return out;
  };
  Mlp::Workspace none, zero, a, a2, b;
  const std::vector<float> out_none = run({}, &none);
  EXPECT_EQ(run({0.0f, 9}, &zero), out_none);
  EXPECT_TRUE(zero.masks.empty());
  const std::vector<float> out_a = run({0.3f, 1}, &a);
  EXPECT_EQ(run({0.3f, 1}, &a2), out_a);
  EXPECT_EQ(a2.masks, a.masks);
  run({0.3f, 2}, &b);
  EXPECT_NE(b.masks[1], a.masks[1]);
  int dropped = 0;
  const std::vector<float>& mask = a.masks[1];
  ASSERT_EQ(mask.size(), 8000u);
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] == 0.0f) {
      ++dropped;
    } else {
      EXPECT_EQ(mask[i], 1.0f / 0.7f);
    }
    EXPECT_EQ(a.acts[1][i], none.acts[1][i] * mask[i]) << i;
  }
  // Binomial(8000, 0.3): mean 2400, sd 41; 5 sd either way.
  EXPECT_GT(dropped, 2195);
  EXPECT_LT(dropped, 2605);
}

// The three losses against a computation by hand of each example's logits.
// Tolerances: the hand computation is in double; ForwardBackward rounds each
// linear-weight product to float (13 products of magnitude <= 0.2, each off
// by <= 0.2 * 2^-24 = 1.2e-8, so the wide logit is off by <= 1.6e-7) and
// runs the MLP in float (Eigen; dot products of <= 67 terms of magnitude
// <= 0.4, three layers: well under 1e-5 on the logit). The log-loss's slope
// in z is p - y, at most 1 in magnitude, so the losses are off by no more
// than their logits.
TEST(WideDeepMathTest, PartLossesAreEachPartsOwnLogLoss) {
  for (uint32_t seed : {3u, 11u, 29u}) {
    Problem p(seed);
    double want_loss = 0, want_wide = 0, want_deep = 0;
    for (int i = 0; i < p.n; ++i) {
      const double wide = p.WideLogit(i);
      const double deep = p.DeepLogit(i);
      want_loss += LogLoss(wide + deep, p.labels[i]) / p.n;
      want_wide += LogLoss(wide, p.labels[i]) / p.n;
      want_deep += LogLoss(deep, p.labels[i]) / p.n;
    }
    std::vector<float> probs;
    WideDeepGrads g;
    const WideDeepLoss got = ForwardBackward(p.shape, p.Inputs(), &probs, &g);
    EXPECT_NEAR(got.wide_loss, want_wide, 2e-7) << "seed " << seed;
    EXPECT_NEAR(got.deep_loss, want_deep, 1e-5) << "seed " << seed;
    EXPECT_NEAR(got.loss, want_loss, 1e-5) << "seed " << seed;
    // The parts differ from each other and from the joint loss: each is its
    // own quantity, not a copy.
    EXPECT_GT(std::abs(got.wide_loss - got.deep_loss), 1e-3);
    EXPECT_GT(std::abs(got.wide_loss - got.loss), 1e-3);
    // Without gradients, the same forward pass gives the same three.
    const WideDeepLoss forward_only =
        ForwardBackward(p.shape, p.Inputs(), &probs, nullptr);
    EXPECT_EQ(forward_only.loss, got.loss);
    EXPECT_EQ(forward_only.wide_loss, got.wide_loss);
    EXPECT_EQ(forward_only.deep_loss, got.deep_loss);
  }
}

// With one part at zero the model is the other part, bit for bit: the joint
// logit sums the same terms as that part's own.
TEST(WideDeepMathTest, PartLossIsTheLossWhenTheOtherPartIsZero) {
  std::vector<float> probs;
  Problem deep_off(5);
  for (auto& t : deep_off.mlp) std::fill(t.begin(), t.end(), 0.0f);
  const WideDeepLoss a =
      ForwardBackward(deep_off.shape, deep_off.Inputs(), &probs, nullptr);
  EXPECT_EQ(a.loss, a.wide_loss);
  EXPECT_DOUBLE_EQ(a.deep_loss, std::log(2.0));
  EXPECT_NE(a.wide_loss, a.deep_loss);

  Problem wide_off(5);
  for (auto* v : {&wide_off.wide, &wide_off.linear})
    std::fill(v->begin(), v->end(), 0.0f);
  const WideDeepLoss b =
      ForwardBackward(wide_off.shape, wide_off.Inputs(), &probs, nullptr);
  EXPECT_EQ(b.loss, b.deep_loss);
  EXPECT_DOUBLE_EQ(b.wide_loss, std::log(2.0));
  EXPECT_NE(b.wide_loss, b.deep_loss);
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
