#include "train/synthetic.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/testing/test_util.h"
#include "train/criteo_reader.h"
#include "train/metrics.h"

namespace psdb::train {
namespace {

using ::psdb::testing::ScratchDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

GeneratorOptions Small() {
  GeneratorOptions o;
  o.train_rows = 3000;
  o.test_rows = 1000;
  o.train_files = 3;
  o.max_vocab = 500;
  return o;
}

TEST(GeneratorTest, WritesCriteoFilesAndMeta) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(GeneratorResult r,
                       GenerateSynthetic(Small(), dir.path()));
  ASSERT_EQ(r.files.size(), 5u);
  EXPECT_EQ(r.files.back(), dir.Sub("meta.json"));
  ASSERT_OK_AND_ASSIGN(DataDir data, LoadDataDir(dir.path()));
  EXPECT_EQ(data.train_files,
            (std::vector<std::string>{dir.Sub("train.txt-00000"),
                                      dir.Sub("train.txt-00001"),
                                      dir.Sub("train.txt-00002")}));
  EXPECT_EQ(data.test_files, (std::vector<std::string>{dir.Sub("test.txt")}));
  ASSERT_TRUE(data.bayes_auc.has_value());
  EXPECT_NEAR(*data.bayes_auc, r.bayes_auc, 1e-6);
  // A learnable signal, far from both chance and perfection.
  EXPECT_GT(r.bayes_auc, 0.65);
  EXPECT_LT(r.bayes_auc, 0.95);
  EXPECT_NEAR(r.bayes_auc_expected, r.bayes_auc, 0.05);
  EXPECT_GT(r.train_ctr, 0.05);
  EXPECT_LT(r.train_ctr, 0.6);

  // Every line parses; the row counts are exact.
  ASSERT_OK_AND_ASSIGN(auto reader, CriteoReader::Open(data.train_files));
  CriteoBatch batch;
  ASSERT_OK_AND_ASSIGN(size_t n, reader->Next(100000, &batch));
  EXPECT_EQ(n, 3000u);
  EXPECT_EQ(reader->malformed_lines(), 0u);
  ASSERT_OK_AND_ASSIGN(auto test_reader, CriteoReader::Open(data.test_files));
  ASSERT_OK_AND_ASSIGN(n, test_reader->Next(100000, &batch));
  EXPECT_EQ(n, 1000u);

  const std::string meta = ReadAll(dir.Sub("meta.json"));
  for (const char* key : {"seed", "train_rows", "test_rows", "vocab_sizes",
                          "bayes_auc_expected", "bayes_logloss", "train_ctr"}) {
    EXPECT_THAT(meta, ::testing::HasSubstr(key));
  }
  EXPECT_EQ(JsonNumber(meta, "train_rows"), 3000.0);
  EXPECT_EQ(r.vocab_sizes.front(), 4);
  EXPECT_EQ(r.vocab_sizes.back(), 500);
}

// meta.json names each field's weight std (the prior of a Bayes estimator,
// tools/bench/lr_reference.py), and it is the std the weights are drawn
// with: the logit of an example with field f alone, minus the bias, is
// w_f(rank), whose sample std over 20000 ranks is within 4% of it (the
// standard error is 0.5%).
TEST(GeneratorTest, MetaHasEachFieldsWeightStdAndTheWeightsHaveIt) {
  ScratchDir dir;
  const GeneratorOptions o = Small();
  ASSERT_OK_AND_ASSIGN(GeneratorResult r, GenerateSynthetic(o, dir.path()));
  ASSERT_OK_AND_ASSIGN(SyntheticModel model, SyntheticModel::Create(o));
  ASSERT_EQ(r.field_weight_std, model.field_weight_std());
  ASSERT_EQ(r.field_weight_std.size(), static_cast<size_t>(kNumCatFeatures));
  std::vector<std::string> written;
  for (double s : r.field_weight_std) {
    EXPECT_GE(s, 0);
    EXPECT_LE(s, o.cat_weight_std);
    written.push_back(absl::StrFormat("%.9g", s));
  }
  EXPECT_THAT(
      ReadAll(dir.Sub("meta.json")),
      ::testing::HasSubstr(absl::StrCat("\"field_weight_std\": [",
                                        absl::StrJoin(written, ", "), "]")));
  for (int f : {0, 12, 25}) {
    SyntheticModel::Example e = {};
    e.cat_set[f] = true;
    constexpr int kRanks = 20000;
    double sum = 0, sum_sq = 0;
    for (int rank = 0; rank < kRanks; ++rank) {
      e.ranks[f] = rank;
      const double w = model.Logit(e, 0) - o.bias;
      sum += w;
      sum_sq += w * w;
    }
    const double mean = sum / kRanks;
    const double std = std::sqrt(sum_sq / kRanks - mean * mean);
    EXPECT_NEAR(std, r.field_weight_std[f], 0.04 * r.field_weight_std[f])
        << "field " << f;
  }
}

TEST(GeneratorTest, SameSeedSameBytesOtherSeedOtherData) {
  ScratchDir a, b, c;
  GeneratorOptions o = Small();
  ASSERT_OK(GenerateSynthetic(o, a.path()));
  ASSERT_OK(GenerateSynthetic(o, b.path()));
  o.seed = 2;
  ASSERT_OK(GenerateSynthetic(o, c.path()));
  for (const char* f :
       {"train.txt-00000", "train.txt-00002", "test.txt", "meta.json"}) {
    EXPECT_EQ(ReadAll(a.Sub(f)), ReadAll(b.Sub(f))) << f;
    EXPECT_NE(ReadAll(a.Sub(f)), ReadAll(c.Sub(f))) << f;
  }
}

TEST(GeneratorTest, RejectsBadOptions) {
  ScratchDir dir;
  GeneratorOptions o = Small();
  o.train_rows = 0;
  EXPECT_THAT(GenerateSynthetic(o, dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = Small();
  o.min_vocab = 1000;
  EXPECT_THAT(GenerateSynthetic(o, dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psdb::train

namespace psdb::train {
namespace {

std::vector<std::string> Lines(const std::string& path) {
  return absl::StrSplit(ReadAll(path), '\n', absl::SkipEmpty());
}

// Every data line, train files then the test file: the generator's row order.
std::vector<std::string> AllRows(const ScratchDir& dir, int train_files) {
  std::vector<std::string> rows;
  for (int k = 0; k < train_files; ++k) {
    for (std::string& l : Lines(dir.Sub(absl::StrFormat("train.txt-%05d", k))))
      rows.push_back(std::move(l));
  }
  for (std::string& l : Lines(dir.Sub("test.txt")))
    rows.push_back(std::move(l));
  return rows;
}

GeneratorOptions OfKind(GeneratorKind kind) {
  GeneratorOptions o = Small();
  o.kind = kind;
  return o;
}

const GeneratorKind kKinds[] = {GeneratorKind::kAdditive, GeneratorKind::kPairs,
                                GeneratorKind::kLongtail};

TEST(GeneratorKindTest, NamesParseBack) {
  for (GeneratorKind k : kKinds) {
    ASSERT_OK_AND_ASSIGN(GeneratorKind back,
                         ParseGeneratorKind(GeneratorKindName(k)));
    EXPECT_EQ(back, k);
  }
  EXPECT_THAT(ParseGeneratorKind("zipf"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(GeneratorKindTest, IdsAreABijectionOfFieldAndRank) {
  std::set<uint32_t> ids;
  for (int f = 0; f < kNumCatFeatures; ++f) {
    for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{4999}, int64_t{1} << 31,
                      (int64_t{1} << 32) - 1}) {
      const uint32_t id = SyntheticModel::IdOf(f, r);
      EXPECT_EQ(SyntheticModel::RankOf(f, id), r);
      ids.insert(id);
    }
  }
  EXPECT_EQ(ids.size(), 5u * kNumCatFeatures);
}

TEST(GeneratorKindTest, EveryKindIsDeterministicBySeed) {
  for (GeneratorKind k : kKinds) {
    ScratchDir a, b, c;
    GeneratorOptions o = OfKind(k);
    ASSERT_OK(GenerateSynthetic(o, a.path()));
    ASSERT_OK(GenerateSynthetic(o, b.path()));
    o.seed = 2;
    ASSERT_OK(GenerateSynthetic(o, c.path()));
    for (const char* f : {"train.txt-00000", "test.txt", "meta.json"}) {
      EXPECT_TRUE(ReadAll(a.Sub(f)) == ReadAll(b.Sub(f)))
          << GeneratorKindName(k) << " " << f;
      EXPECT_FALSE(ReadAll(a.Sub(f)) == ReadAll(c.Sub(f)))
          << GeneratorKindName(k) << " " << f;
    }
    EXPECT_THAT(ReadAll(a.Sub("meta.json")),
                ::testing::HasSubstr(
                    absl::StrCat("\"kind\": \"", GeneratorKindName(k), "\"")));
  }
  // The kinds are different data from the same seed.
  ScratchDir x, y;
  ASSERT_OK(GenerateSynthetic(OfKind(GeneratorKind::kAdditive), x.path()));
  ASSERT_OK(GenerateSynthetic(OfKind(GeneratorKind::kPairs), y.path()));
  EXPECT_FALSE(ReadAll(x.Sub("test.txt")) == ReadAll(y.Sub("test.txt")));
}

// The reported Bayes AUC is the AUC of the true probabilities, recomputed
// from the written lines, on the written labels; every train line is a line
// of the model too.
TEST(GeneratorKindTest, BayesAucIsWhatTheTrueProbabilitiesGiveOnTheFiles) {
  for (GeneratorKind k : kKinds) {
    SCOPED_TRACE(GeneratorKindName(k));
    ScratchDir dir;
    const GeneratorOptions o = OfKind(k);
    ASSERT_OK_AND_ASSIGN(GeneratorResult r, GenerateSynthetic(o, dir.path()));
    ASSERT_OK_AND_ASSIGN(SyntheticModel model, SyntheticModel::Create(o));
    const std::vector<std::string> rows = AllRows(dir, o.train_files);
    ASSERT_EQ(rows.size(), static_cast<size_t>(o.train_rows + o.test_rows));
    std::vector<float> probs, labels;
    double train_pos = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(double p, model.Probability(rows[i], i));
      ASSERT_TRUE(p > 0 && p < 1);
      if (i < static_cast<size_t>(o.train_rows)) {
        train_pos += rows[i][0] == '1';
        continue;
      }
      probs.push_back(static_cast<float>(p));
      labels.push_back(rows[i][0] == '1' ? 1.0f : 0.0f);
    }
    ASSERT_OK_AND_ASSIGN(double auc, Auc(probs, labels));
    EXPECT_EQ(auc, r.bayes_auc);
    ASSERT_OK_AND_ASSIGN(double logloss, LogLoss(probs, labels));
    EXPECT_EQ(logloss, r.bayes_logloss);
    EXPECT_EQ(train_pos / o.train_rows, r.train_ctr);
    EXPECT_NEAR(*JsonNumber(ReadAll(dir.Sub("meta.json")), "bayes_auc"),
                r.bayes_auc, 1e-6);
    // Learnable and not trivial.
    EXPECT_GT(r.bayes_auc, 0.65);
    EXPECT_LT(r.bayes_auc, 0.97);
  }
}

// A logistic model of main effects (one weight per field value, the 13
// log1p(x) counts, a bias), fit by Adagrad on the train files: its test AUC.
double MainEffectsAuc(const ScratchDir& dir, const GeneratorOptions& o) {
  const std::vector<std::string> rows = AllRows(dir, o.train_files);
  struct Parsed {
    float label;
    double x[kNumIntFeatures];
    std::string ids[kNumCatFeatures];
  };
  std::vector<Parsed> data(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<absl::string_view> f = absl::StrSplit(rows[i], '\t');
    data[i].label = f[0] == "1" ? 1.0f : 0.0f;
    for (int j = 0; j < kNumIntFeatures; ++j) {
      int64_t v = 0;
      data[i].x[j] = f[1 + j].empty() || !absl::SimpleAtoi(f[1 + j], &v)
                         ? 0
                         : std::log1p(static_cast<double>(v));
    }
    for (int c = 0; c < kNumCatFeatures; ++c) {
      data[i].ids[c] = absl::StrCat(c, ":", f[1 + kNumIntFeatures + c]);
    }
  }
  absl::flat_hash_map<std::string, std::pair<double, double>> w;  // w, G
  double dense[kNumIntFeatures + 1] = {}, dense_g[kNumIntFeatures + 1] = {};
  const double lr = 0.1, l2 = 1e-4;
  auto logit = [&](const Parsed& e) {
    double z = dense[kNumIntFeatures];
    for (int j = 0; j < kNumIntFeatures; ++j) z += dense[j] * e.x[j];
    for (const std::string& id : e.ids) z += w[id].first;
    return z;
  };
  auto step = [&](double* v, double* g2, double grad) {
    *g2 += grad * grad;
    *v -= lr * grad / std::sqrt(*g2 + 1e-8);
  };
  for (int epoch = 0; epoch < 4; ++epoch) {
    for (int64_t i = 0; i < o.train_rows; ++i) {
      const Parsed& e = data[i];
      const double g = 1.0 / (1.0 + std::exp(-logit(e))) - e.label;
      for (int j = 0; j < kNumIntFeatures; ++j) {
        step(&dense[j], &dense_g[j], g * e.x[j]);
      }
      step(&dense[kNumIntFeatures], &dense_g[kNumIntFeatures], g);
      for (const std::string& id : e.ids) {
        auto& [v, g2] = w[id];
        step(&v, &g2, g + l2 * v);
      }
    }
  }
  std::vector<float> scores, labels;
  for (size_t i = o.train_rows; i < data.size(); ++i) {
    scores.push_back(static_cast<float>(logit(data[i])));
    labels.push_back(data[i].label);
  }
  return *Auc(scores, labels);
}

TEST(GeneratorKindTest, PairsLabelsNeedInteractionsThatMainEffectsMiss) {
  std::map<GeneratorKind, double> gap;
  for (GeneratorKind k : {GeneratorKind::kAdditive, GeneratorKind::kPairs}) {
    ScratchDir dir;
    GeneratorOptions o = OfKind(k);
    o.train_rows = 40000;
    o.test_rows = 10000;
    o.max_vocab = 100;
    ASSERT_OK_AND_ASSIGN(GeneratorResult r, GenerateSynthetic(o, dir.path()));
    gap[k] = r.bayes_auc - MainEffectsAuc(dir, o);
    std::printf("%s: Bayes AUC %.4f, main effects %.4f\n",
                std::string(GeneratorKindName(k)).c_str(), r.bayes_auc,
                r.bayes_auc - gap[k]);
  }
  // Additive data is a main-effects model: the fit comes close to Bayes.
  EXPECT_LT(gap[GeneratorKind::kAdditive], 0.02);
  // Pairs data is not: the same fit stays measurably below.
  EXPECT_GT(gap[GeneratorKind::kPairs], 0.05);
}

TEST(GeneratorKindTest, LongtailHasSingletonsAndDriftingClickRates) {
  ScratchDir dir;
  GeneratorOptions o = OfKind(GeneratorKind::kLongtail);
  o.train_rows = 20000;
  o.test_rows = 5000;
  ASSERT_OK_AND_ASSIGN(GeneratorResult r, GenerateSynthetic(o, dir.path()));
  ASSERT_OK_AND_ASSIGN(SyntheticModel model, SyntheticModel::Create(o));
  const std::vector<std::string> rows = AllRows(dir, o.train_files);
  absl::flat_hash_map<std::string, int> count;  // "field:id" -> occurrences
  int64_t present = 0, past_vocab = 0;
  for (const std::string& row : rows) {
    const std::vector<absl::string_view> f = absl::StrSplit(row, '\t');
    for (int c = 0; c < kNumCatFeatures; ++c) {
      const absl::string_view id = f[1 + kNumIntFeatures + c];
      if (id.empty()) continue;
      ++present;
      ++count[absl::StrCat(c, ":", id)];
      uint32_t v;
      ASSERT_TRUE(absl::SimpleHexAtoi(id, &v));
      past_vocab += SyntheticModel::RankOf(c, v) >= r.vocab_sizes[c];
    }
  }
  int64_t once = 0;
  for (const auto& [id, n] : count) once += n == 1;
  // Every singleton is an id of its own, used once; the vocabulary's tail
  // adds more ids seen once.
  EXPECT_EQ(past_vocab, r.singleton_values);
  EXPECT_GE(once, r.singleton_values);
  const double rate = static_cast<double>(r.singleton_values) / present;
  EXPECT_NEAR(rate, o.singleton_rate, 0.005) << present;
  EXPECT_THAT(ReadAll(dir.Sub("meta.json")),
              ::testing::HasSubstr(
                  absl::StrCat("\"singleton_values\": ", r.singleton_values)));

  // The click rate drifts: the first quarter of the train rows against the
  // test rows (the latest), in labels and in true probabilities.
  auto ctr = [&](size_t begin, size_t end) {
    double pos = 0;
    for (size_t i = begin; i < end; ++i) pos += rows[i][0] == '1';
    return pos / (end - begin);
  };
  const double early = ctr(0, o.train_rows / 4);
  const double late = ctr(o.train_rows, rows.size());
  EXPECT_GT(late - early, 0.05) << early << " " << late;
  // The same line scored as an early row and as a late one: the weights
  // themselves move with time.
  ASSERT_OK_AND_ASSIGN(double p_late,
                       model.Probability(rows[0], rows.size() - 1));
  ASSERT_OK_AND_ASSIGN(double p_early, model.Probability(rows[0], 0));
  EXPECT_NE(p_late, p_early);
}

TEST(GeneratorKindTest, RejectsBadKindOptions) {
  ScratchDir dir;
  GeneratorOptions o = OfKind(GeneratorKind::kPairs);
  o.interaction_pairs = 326;
  EXPECT_THAT(GenerateSynthetic(o, dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = OfKind(GeneratorKind::kLongtail);
  o.singleton_rate = 1;
  EXPECT_THAT(GenerateSynthetic(o, dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = OfKind(GeneratorKind::kLongtail);
  o.max_vocab = int64_t{1} << 31;
  o.train_rows = int64_t{1} << 31;
  EXPECT_THAT(GenerateSynthetic(o, dir.path()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("test.txt")));
}

}  // namespace
}  // namespace psdb::train
