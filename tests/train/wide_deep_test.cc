#include "train/wide_deep.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tests/testing/test_util.h"
#include "train/cross_net.h"
#include "train/fm.h"

namespace psdb::train {
namespace {

// A small model of `kind` with every parameter as a mutable vector.
struct Problem {
  WideDeepShape shape;
  int n = 3;
  std::vector<float> wide, deep, dense, labels, linear;
  std::vector<float> wide_scale;  // 26 with wide_field_scale, else empty
  std::vector<std::vector<float>> mlp, cross;

  explicit Problem(uint32_t seed, ModelKind kind = ModelKind::kWideDeep,
                   bool wide_field_scale = false) {
    WideDeepConfig c;
    c.kind = kind;
    c.deep_dim = 2;
    c.hidden = {5, 3};
    c.wide_field_scale = wide_field_scale;
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
    if (wide_field_scale) {
      // Around 1, both signs of the change: scales in [0.5, 1.5].
      fill(&wide_scale, kNumCatFeatures, 0.5f);
      for (float& s : wide_scale) s += 1.0f;
    }
    labels = {1, 0, 1};
    for (size_t s : shape.mlp.TensorSizes()) {
      mlp.emplace_back();
      fill(&mlp.back(), s, 0.4f);
    }
    if (kind == ModelKind::kDcn) {
      for (size_t s : shape.cross.TensorSizes()) {
        cross.emplace_back();
        fill(&cross.back(), s, 0.1f);
      }
    }
    if (kind == ModelKind::kDeepFwFm) {
      // The pair weights, in `cross` too: the model's extra part.
      cross.emplace_back();
      fill(&cross.back(), FwFmPairs(kNumCatFeatures), 1.0f);
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
    in.wide_scale = wide_scale;
    for (const auto& t : mlp) in.mlp.push_back(t);
    for (const auto& t : cross) in.part.push_back(t);
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
  // wide = bias + sum of its 26 wide embeddings (each times its field's
  // scale with wide_field_scale) + linear . dense,
  // deep = the MLP (w_l row-major [in x out], ReLU between layers) on
  // [its deep embeddings | dense].
  double WideLogit(int i) const {
    double z = linear[kNumIntFeatures];
    for (int f = 0; f < kNumCatFeatures; ++f) {
      z += static_cast<double>(wide[i * kNumCatFeatures + f]) *
           (wide_scale.empty() ? 1.0 : wide_scale[f]);
    }
    for (int j = 0; j < kNumIntFeatures; ++j) {
      z += static_cast<double>(linear[j]) * dense[i * kNumIntFeatures + j];
    }
    return z;
  }
  // Per kind: wide_deep the MLP; deepfm + sum over field pairs f < g of
  // <v_f, v_g>; dcn + the cross layers' readout; deepfwfm + sum over
  // field pairs of r_fg <v_f, v_g>; lr 0.
  double DeepLogit(int i) const {
    if (shape.kind == ModelKind::kLr) return 0;
    const double mlp_out = MlpLogit(i);
    if (shape.kind == ModelKind::kDeepFm) return mlp_out + PairwiseSum(i);
    if (shape.kind == ModelKind::kDcn) return mlp_out + CrossLogit(i);
    if (shape.kind == ModelKind::kDeepFwFm) {
      return mlp_out + PairwiseSum(i, &cross[0]);
    }
    return mlp_out;
  }
  std::vector<double> DeepInput(int i) const {
    const int d = shape.deep_dim;
    std::vector<double> a(deep.begin() + i * kNumCatFeatures * d,
                          deep.begin() + (i + 1) * kNumCatFeatures * d);
    a.insert(a.end(), dense.begin() + i * kNumIntFeatures,
             dense.begin() + (i + 1) * kNumIntFeatures);
    return a;
  }
  // Weighted by r[pair] (pairs in (0,1), (0,2), ... order) if r is given.
  double PairwiseSum(int i, const std::vector<float>* r = nullptr) const {
    const int d = shape.deep_dim;
    const float* v = deep.data() + i * kNumCatFeatures * d;
    double sum = 0;
    int pair = 0;
    for (int f = 0; f < kNumCatFeatures; ++f) {
      for (int g = f + 1; g < kNumCatFeatures; ++g, ++pair) {
        double dot = 0;
        for (int k = 0; k < d; ++k) {
          dot += static_cast<double>(v[f * d + k]) * v[g * d + k];
        }
        sum += (r == nullptr ? 1.0 : (*r)[pair]) * dot;
      }
    }
    return sum;
  }
  // x_{l+1}[j] = x0[j] * (sum_k x_l[k] W_l[k][j] + b_l[j]) + x_l[j].
  double CrossLogit(int i) const {
    const std::vector<double> x0 = DeepInput(i);
    const int w = static_cast<int>(x0.size());
    std::vector<double> x = x0;
    for (int l = 0; l < shape.cross.layers(); ++l) {
      std::vector<double> next(w);
      for (int j = 0; j < w; ++j) {
        double u = cross[2 * l + 1][j];
        for (int k = 0; k < w; ++k) u += x[k] * cross[2 * l][k * w + j];
        next[j] = x0[j] * u + x[j];
      }
      x = std::move(next);
    }
    double out = 0;
    for (int j = 0; j < w; ++j) out += x[j] * cross.back()[j];
    return out;
  }
  double MlpLogit(int i) const {
    std::vector<double> a = DeepInput(i);
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

// Central differences of the loss in every `stride`-th coordinate of *v
// against the analytic gradient g.
void CheckGradient(Problem* p, std::vector<float>* v,
                   const std::vector<float>& g, const char* what,
                   size_t stride = 1) {
  ASSERT_EQ(v->size(), g.size()) << what;
  constexpr float kEps = 1e-3f;
  for (size_t i = 0; i < v->size(); i += stride) {
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
  EXPECT_TRUE(g.part.empty());
}

// Every parameter of every model against central differences of its loss.
class ModelMathTest : public ::testing::TestWithParam<ModelKind> {};

TEST_P(ModelMathTest, GradientsMatchFiniteDifferences) {
  for (uint32_t seed : {7u, 13u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Problem p(seed, GetParam());
    std::vector<float> probs;
    WideDeepGrads g;
    ForwardBackward(p.shape, p.Inputs(), &probs, &g);
    CheckGradient(&p, &p.wide, g.wide, "wide");
    CheckGradient(&p, &p.linear, g.linear, "linear");
    if (GetParam() == ModelKind::kLr) {
      // No deep part: nothing else is trained.
      EXPECT_TRUE(g.deep.empty());
      EXPECT_TRUE(g.mlp.empty());
      EXPECT_TRUE(g.part.empty());
      continue;
    }
    CheckGradient(&p, &p.deep, g.deep, "deep");
    for (size_t t = 0; t < p.mlp.size(); ++t) {
      CheckGradient(&p, &p.mlp[t], g.mlp[t],
                    t % 2 == 0 ? "mlp weight" : "mlp bias");
    }
    ASSERT_EQ(g.part.size(), p.cross.size());
    for (size_t t = 0; t < p.cross.size(); ++t) {
      // A cross weight has 65 x 65 coordinates: every 31st (stride prime
      // to 65, so every row and column is visited) keeps the test short.
      if (GetParam() == ModelKind::kDeepFwFm) {
        CheckGradient(&p, &p.cross[t], g.part[t], "fwfm pair weight");
        continue;
      }
      const bool weight = t + 1 < p.cross.size() && t % 2 == 0;
      CheckGradient(&p, &p.cross[t], g.part[t],
                    t + 1 == p.cross.size() ? "cross readout"
                    : weight                ? "cross weight"
                                            : "cross bias",
                    weight ? 31 : 1);
    }
  }
}

// The three losses of each model against its logits computed by hand
// (tolerances as in PartLossesAreEachPartsOwnLogLoss; the FM and cross
// terms run in float too, over magnitudes <= 0.5: under 1e-5 on the logit).
TEST_P(ModelMathTest, LossesMatchTheHandComputedLogits) {
  for (uint32_t seed : {3u, 11u}) {
    Problem p(seed, GetParam());
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
    if (GetParam() == ModelKind::kLr) {
      // The deep logit is 0: deep_loss is log 2, the loss is the wide part's
      // bit for bit.
      EXPECT_EQ(got.deep_loss, std::log(2.0));
      EXPECT_EQ(got.loss, got.wide_loss);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, ModelMathTest,
                         ::testing::Values(ModelKind::kWideDeep,
                                           ModelKind::kDeepFm, ModelKind::kDcn,
                                           ModelKind::kLr,
                                           ModelKind::kDeepFwFm),
                         [](const ::testing::TestParamInfo<ModelKind>& info) {
                           return std::string(ModelKindName(info.param));
                         });

// With per-field wide scales: the scales' and the scaled embeddings'
// gradients against central differences, and the losses against the
// hand-computed logits, for every model (lr included).
TEST_P(ModelMathTest, WideFieldScaleGradientsAndLossesMatch) {
  for (uint32_t seed : {7u, 13u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Problem p(seed, GetParam(), /*wide_field_scale=*/true);
    std::vector<float> probs;
    WideDeepGrads g;
    const WideDeepLoss got = ForwardBackward(p.shape, p.Inputs(), &probs, &g);
    ASSERT_EQ(g.wide_scale.size(), static_cast<size_t>(kNumCatFeatures));
    CheckGradient(&p, &p.wide_scale, g.wide_scale, "wide scale");
    CheckGradient(&p, &p.wide, g.wide, "wide");
    CheckGradient(&p, &p.linear, g.linear, "linear");
    if (GetParam() != ModelKind::kLr) {
      CheckGradient(&p, &p.deep, g.deep, "deep");
      CheckGradient(&p, &p.mlp[0], g.mlp[0], "mlp weight");
    }
    double want_loss = 0, want_wide = 0;
    for (int i = 0; i < p.n; ++i) {
      want_loss += LogLoss(p.WideLogit(i) + p.DeepLogit(i), p.labels[i]) / p.n;
      want_wide += LogLoss(p.WideLogit(i), p.labels[i]) / p.n;
    }
    EXPECT_NEAR(got.wide_loss, want_wide, 1e-6);
    EXPECT_NEAR(got.loss, want_loss, 1e-5);
  }
  // Without the option the gradients have no scale entries.
  Problem plain(7, GetParam());
  std::vector<float> probs;
  WideDeepGrads g;
  ForwardBackward(plain.shape, plain.Inputs(), &probs, &g);
  EXPECT_TRUE(g.wide_scale.empty());
}

// The extra part is really in the logit: the same parameters give another
// loss with it than the MLP alone does.
TEST(ModelMathTest, DeepFmAndDcnAddTheirTermToTheDeepLogit) {
  std::vector<float> probs;
  const double plain =
      ForwardBackward(Problem(5).shape, Problem(5).Inputs(), &probs, nullptr)
          .deep_loss;
  for (ModelKind kind :
       {ModelKind::kDeepFm, ModelKind::kDcn, ModelKind::kDeepFwFm}) {
    Problem p(5, kind);
    const WideDeepLoss got =
        ForwardBackward(p.shape, p.Inputs(), &probs, nullptr);
    EXPECT_GT(std::abs(got.deep_loss - plain), 1e-4) << ModelKindName(kind);
  }
}

// FM on one example of 3 fields, dim 2: v1 = (1, 2), v2 = (3, -1),
// v3 = (0.5, 0). Pairs: <v1,v2> = 1, <v1,v3> = 0.5, <v2,v3> = 1.5; fm = 3.
// d fm / d v_f = sum of the others: v1 -> (3.5, -1), v2 -> (1.5, 2),
// v3 -> (4, 1); times dout = 2, added to what dv held (1 everywhere).
TEST(FmTest, ExactValuesOnAHandComputedCase) {
  const std::vector<float> v = {1, 2, 3, -1, 0.5f, 0};
  std::vector<float> out(1);
  FmForward(v, 1, 3, 2, absl::MakeSpan(out));
  EXPECT_EQ(out[0], 3.0f);
  std::vector<float> dv(6, 1.0f);
  const std::vector<float> dout = {2.0f};
  FmBackward(v, 1, 3, 2, dout, absl::MakeSpan(dv));
  EXPECT_EQ(dv, (std::vector<float>{8, -1, 4, 5, 9, 3}));
}

// FwFM on the same 3 fields with r = (r12, r13, r23) = (2, -1, 0.5):
// fwfm = 2 * 1 - 1 * 0.5 + 0.5 * 1.5 = 2.25.
// d / d v1 = 2 v2 - v3 = (5.5, -2); d / d v2 = 2 v1 + 0.5 v3 = (2.25, 4);
// d / d v3 = -v1 + 0.5 v2 = (0.5, -2.5); d / d r = the dots (1, 0.5, 1.5).
// Times dout = 2, dv added to 1 everywhere; dr overwritten.
TEST(FwFmTest, ExactValuesOnAHandComputedCase) {
  EXPECT_EQ(FwFmPairs(3), 3);
  EXPECT_EQ(FwFmPairs(26), 325);
  const std::vector<float> v = {1, 2, 3, -1, 0.5f, 0};
  const std::vector<float> r = {2, -1, 0.5f};
  std::vector<float> out(1);
  FwFmForward(v, r, 1, 3, 2, absl::MakeSpan(out));
  EXPECT_EQ(out[0], 2.25f);
  std::vector<float> dv(6, 1.0f), dr(3, 7.0f);
  const std::vector<float> dout = {2.0f};
  FwFmBackward(v, r, 1, 3, 2, dout, absl::MakeSpan(dv), absl::MakeSpan(dr));
  EXPECT_EQ(dv, (std::vector<float>{12, -3, 5.5f, 9, 2, -4}));
  EXPECT_EQ(dr, (std::vector<float>{2, 1, 3}));
}

// One cross layer of width 2: x0 = (1, 2), W = [[0.5, -1], [2, 0]] (row =
// input feature), b = (0.1, 0.2), w_out = (1, -1).
//   u  = x0 W + b = (0.5 + 4 + 0.1, -1 + 0 + 0.2) = (4.6, -0.8)
//   x1 = x0 * u + x0 = (4.6 + 1, -1.6 + 2) = (5.6, 0.4);  out = 5.2.
// Backward with dout = 1: g1 = w_out = (1, -1); h = g1 * x0 = (1, -2);
//   dW = x0^T h = [[1, -2], [2, -4]]; db = h; d w_out = x1;
//   dx0 = g1 * u + g1 + h W^T = (4.6, 0.8) + (1, -1) + (2.5, 2) = (8.1, 1.8).
TEST(CrossNetTest, ExactValuesOnAHandComputedCase) {
  const CrossNet net(2, 1);
  EXPECT_EQ(net.TensorSizes(), (std::vector<size_t>{4, 2, 2}));
  const std::vector<float> w = {0.5f, -1, 2, 0}, b = {0.1f, 0.2f},
                           w_out = {1, -1};
  const std::vector<absl::Span<const float>> params = {w, b, w_out};
  const std::vector<float> x0 = {1, 2};
  CrossNet::Workspace ws;
  std::vector<float> out(1);
  net.Forward(params, x0, 1, &ws, absl::MakeSpan(out));
  EXPECT_FLOAT_EQ(out[0], 5.2f);
  std::vector<float> gw(4), gb(2), gout(2), dx(2, 0.0f);
  const std::vector<absl::Span<float>> grads = {
      absl::MakeSpan(gw), absl::MakeSpan(gb), absl::MakeSpan(gout)};
  const std::vector<float> dout = {1.0f};
  net.Backward(params, ws, dout, 1, grads, absl::MakeSpan(dx));
  EXPECT_EQ(gw, (std::vector<float>{1, -2, 2, -4}));
  EXPECT_EQ(gb, (std::vector<float>{1, -2}));
  EXPECT_FLOAT_EQ(gout[0], 5.6f);
  EXPECT_FLOAT_EQ(gout[1], 0.4f);
  EXPECT_FLOAT_EQ(dx[0], 8.1f);
  EXPECT_FLOAT_EQ(dx[1], 1.8f);
}

TEST(ModelKindTest, NamesRoundTripAndUnknownIsRefused) {
  for (ModelKind kind :
       {ModelKind::kWideDeep, ModelKind::kDeepFm, ModelKind::kDcn,
        ModelKind::kLr, ModelKind::kDeepFwFm}) {
    ASSERT_OK_AND_ASSIGN(ModelKind parsed, ParseModelKind(ModelKindName(kind)));
    EXPECT_EQ(parsed, kind);
  }
  const absl::StatusOr<ModelKind> bad = ParseModelKind("xgboost");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("'xgboost'"));
}

// Which tables each model has, in order, with the seeds Wide&Deep's keep.
// At 512 examples per update (powers of two: exact in float): alpha, (beta /
// 512)^2, lambda1 / 512, lambda2 / 1024, the square-root schedule, no decay.
TEST(WideFtrlTest, PerExampleHyperparametersAtTheUpdatesScale) {
  WideDeepConfig c;
  c.wide_lr_power = -1.0f;
  c.wide_accumulator_decay = 0.99f;
  SetWideFtrlProximal({.alpha = 0.25, .beta = 2, .lambda1 = 1, .lambda2 = 4},
                      512, &c);
  EXPECT_EQ(c.wide_lr, 0.25f);
  EXPECT_EQ(c.wide_initial_accumulator, 1.0f / (256 * 256));
  EXPECT_EQ(c.wide_l1, 1.0f / 512);
  EXPECT_EQ(c.wide_l2, 4.0f / 1024);
  EXPECT_EQ(c.wide_lr_power, -0.5f);
  EXPECT_EQ(c.wide_accumulator_decay, 1.0f);
  // One example per update is the per-example algorithm itself.
  SetWideFtrlProximal({.alpha = 0.1, .beta = 1}, 1, &c);
  EXPECT_EQ(c.wide_initial_accumulator, 1.0f);
  EXPECT_EQ(c.wide_l1, 0.0f);
  EXPECT_EQ(c.wide_l2, 0.0f);
}

TEST(WideFtrlTest, LrHasItsOwnDefaultsTheOthersShareOne) {
  const FtrlProximal lr = DefaultWideFtrl(ModelKind::kLr);
  EXPECT_EQ(lr.alpha, 0.2);
  EXPECT_EQ(lr.beta, 1.0);
  EXPECT_EQ(lr.lambda1, 1.0);
  EXPECT_EQ(lr.lambda2, 1.0);
  for (ModelKind kind : {ModelKind::kWideDeep, ModelKind::kDeepFm,
                         ModelKind::kDcn, ModelKind::kDeepFwFm}) {
    const FtrlProximal f = DefaultWideFtrl(kind);
    EXPECT_EQ(f.alpha, 0.1) << ModelKindName(kind);
    EXPECT_EQ(f.beta, 1.0);
    EXPECT_EQ(f.lambda1, 0.0);
    EXPECT_EQ(f.lambda2, 0.0);
  }
}

TEST(ModelTableSpecsTest, EachModelHasItsTables) {
  auto names = [](ModelKind kind) {
    WideDeepConfig c;
    c.kind = kind;
    c.hidden = {8};
    std::vector<std::string> out;
    for (const TableSpec& s : ModelTableSpecs(c)) out.push_back(s.name);
    return out;
  };
  const std::vector<std::string> wd = {
      "wide", "deep", "wide_linear", "mlp.w0", "mlp.b0", "mlp.w1", "mlp.b1"};
  EXPECT_EQ(names(ModelKind::kWideDeep), wd);
  EXPECT_EQ(names(ModelKind::kDeepFm), wd);
  std::vector<std::string> dcn = wd;
  dcn.insert(dcn.end(),
             {"cross.w0", "cross.b0", "cross.w1", "cross.b1", "cross.out"});
  EXPECT_EQ(names(ModelKind::kDcn), dcn);
  std::vector<std::string> fwfm = wd;
  fwfm.push_back("fwfm.r");
  EXPECT_EQ(names(ModelKind::kDeepFwFm), fwfm);
  // Its 325 pair weights start at pair_weight_init, every one, and learn
  // with Adam at pair_lr while the MLP's tensors keep dense_lr.
  WideDeepConfig fwfm_config;
  fwfm_config.kind = ModelKind::kDeepFwFm;
  const TableSpec r = ModelTableSpecs(fwfm_config).back();
  EXPECT_EQ(r.initializer.kind, InitKind::kConstant);
  EXPECT_EQ(r.initializer.a, 0.1f);
  EXPECT_EQ(r.optimizer.kind, optim::OptimizerKind::kAdam);
  EXPECT_EQ(r.optimizer.learning_rate, 0.01f);
  fwfm_config.pair_lr = 0.02f;
  fwfm_config.pair_weight_init = 0.5f;
  fwfm_config.dense_lr = 0.003f;
  const std::vector<TableSpec> tuned = ModelTableSpecs(fwfm_config);
  EXPECT_EQ(tuned.back().name, "fwfm.r");
  EXPECT_EQ(tuned.back().optimizer.learning_rate, 0.02f);
  EXPECT_EQ(tuned.back().initializer.a, 0.5f);
  EXPECT_EQ(tuned[3].name, "mlp.w0");
  EXPECT_EQ(tuned[3].optimizer.learning_rate, 0.003f);
  // New deep rows are uniform in [-deep_init, deep_init].
  EXPECT_EQ(ModelTableSpecs(fwfm_config)[1].initializer.a, -0.002f);
  EXPECT_EQ(ModelTableSpecs(fwfm_config)[1].initializer.b, 0.002f);
  EXPECT_EQ(names(ModelKind::kLr),
            (std::vector<std::string>{"wide", "wide_linear"}));
  // wide_field_scale adds "wide.scale" after the wide tables: 26 scales at
  // 1, Adam at wide_scale_lr.
  WideDeepConfig scaled;
  scaled.wide_field_scale = true;
  scaled.wide_scale_lr = 0.03f;
  const std::vector<TableSpec> scaled_specs = ModelTableSpecs(scaled);
  ASSERT_GT(scaled_specs.size(), 3u);
  EXPECT_EQ(scaled_specs[3].name, "wide.scale");
  EXPECT_EQ(scaled_specs[3].initializer.kind, InitKind::kConstant);
  EXPECT_EQ(scaled_specs[3].initializer.a, 1.0f);
  EXPECT_EQ(scaled_specs[3].optimizer.kind, optim::OptimizerKind::kAdam);
  EXPECT_EQ(scaled_specs[3].optimizer.learning_rate, 0.03f);
  // The wide FTRL's accumulator, power and decay reach both wide tables.
  WideDeepConfig newton;
  newton.wide_initial_accumulator = 1e-4f;
  newton.wide_lr_power = -1.0f;
  newton.wide_accumulator_decay = 0.99f;
  const std::vector<TableSpec> newton_specs = ModelTableSpecs(newton);
  for (int t : {0, 2}) {
    const optim::OptimizerSpec& o = newton_specs[t].optimizer;
    EXPECT_EQ(o.kind, optim::OptimizerKind::kFtrl);
    EXPECT_EQ(o.initial_accumulator, 1e-4f);
    EXPECT_EQ(o.lr_power, -1.0f);
    EXPECT_EQ(o.accumulator_decay, 0.99f);
  }
  EXPECT_EQ(ModelTableSpecs(WideDeepConfig{})[0].optimizer.accumulator_decay,
            1.0f);
  WideDeepConfig lr;
  lr.kind = ModelKind::kLr;
  EXPECT_EQ(EmbeddingTables(lr), (std::vector<std::string>{"wide"}));
  EXPECT_EQ(EmbeddingTables(WideDeepConfig{}),
            (std::vector<std::string>{"wide", "deep"}));
  // The cross weights are 429 x 429 at the default deep_dim.
  WideDeepConfig dcn_default;
  dcn_default.kind = ModelKind::kDcn;
  const WideDeepShape shape = ShapeOf(dcn_default);
  EXPECT_EQ(shape.cross.TensorSizes(),
            (std::vector<size_t>{429 * 429, 429, 429 * 429, 429, 429}));
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

TEST(WideDeepMathTest, DefaultShapeIs429To64To32To1) {
  const WideDeepShape shape = ShapeOf(WideDeepConfig{});
  EXPECT_EQ(shape.mlp.sizes(), (std::vector<int>{429, 64, 32, 1}));
  EXPECT_EQ(shape.mlp.TensorSizes(),
            (std::vector<size_t>{429 * 64, 64, 64 * 32, 32, 32, 1}));
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
