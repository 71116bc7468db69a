// SyntheticModel (train/synthetic.h): the hidden models of `ps-train gen`.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "train/synthetic.h"
#include "train/synthetic_random.h"
#include "util/hash.h"

namespace psdb::train {

using synthetic_internal::NormalOf;
using synthetic_internal::Rng;
using synthetic_internal::Scramble32;
using synthetic_internal::ToUnit;
using synthetic_internal::Unscramble32;

namespace {

// Keeps each field's ids apart: rank r of field f is written as
// Scramble32(r ^ FieldSalt(f)).
uint32_t FieldSalt(int field) {
  return 0x9e3779b9u * static_cast<uint32_t>(field + 1);
}

constexpr int kAllPairs = kNumCatFeatures * (kNumCatFeatures - 1) / 2;

}  // namespace

absl::string_view GeneratorKindName(GeneratorKind kind) {
  switch (kind) {
    case GeneratorKind::kPairs:
      return "pairs";
    case GeneratorKind::kLongtail:
      return "longtail";
    case GeneratorKind::kAdditive:
      break;
  }
  return "additive";
}

absl::StatusOr<GeneratorKind> ParseGeneratorKind(absl::string_view name) {
  for (GeneratorKind k : {GeneratorKind::kAdditive, GeneratorKind::kPairs,
                          GeneratorKind::kLongtail}) {
    if (name == GeneratorKindName(k)) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "generator kind must be additive, pairs or longtail, not '", name, "'"));
}

uint32_t SyntheticModel::IdOf(int field, int64_t rank) {
  return Scramble32(static_cast<uint32_t>(rank) ^ FieldSalt(field));
}

int64_t SyntheticModel::RankOf(int field, uint32_t id) {
  return static_cast<int64_t>(Unscramble32(id) ^ FieldSalt(field));
}

absl::StatusOr<SyntheticModel> SyntheticModel::Create(
    const GeneratorOptions& o) {
  if (o.train_rows < 1 || o.test_rows < 2 || o.train_files < 1 ||
      o.min_vocab < 1 || o.max_vocab < o.min_vocab ||
      o.max_vocab > (int64_t{1} << 31) || o.zipf_s <= 0 || o.missing_rate < 0 ||
      o.missing_rate >= 1) {
    return absl::InvalidArgumentError(
        "generator: need train_rows >= 1, test_rows >= 2, train_files >= 1, "
        "1 <= min_vocab <= max_vocab <= 2^31, zipf_s > 0, "
        "missing_rate in [0, 1)");
  }
  if (o.kind == GeneratorKind::kPairs &&
      (o.interaction_pairs < 1 || o.interaction_pairs > kAllPairs ||
       o.factor_dim < 1 || o.factor_dim > 64 || !(o.interaction_std >= 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "generator pairs: need interaction_pairs in [1, ", kAllPairs,
        "], factor_dim in [1, 64], interaction_std >= 0"));
  }
  if (o.kind == GeneratorKind::kLongtail) {
    // Singleton ranks follow the vocabulary and must stay 32-bit ids.
    if (!(o.singleton_rate >= 0 && o.singleton_rate < 1) ||
        !std::isfinite(o.weight_drift) || !std::isfinite(o.bias_drift) ||
        o.max_vocab + o.train_rows + o.test_rows > (int64_t{1} << 32)) {
      return absl::InvalidArgumentError(
          "generator longtail: need singleton_rate in [0, 1), finite drifts "
          "and max_vocab + train_rows + test_rows <= 2^32");
    }
  }
  SyntheticModel m;
  m.options_ = o;
  const uint64_t seed = o.seed;
  for (int f = 0; f < kNumCatFeatures; ++f) {
    const double t = static_cast<double>(f) / (kNumCatFeatures - 1);
    const int64_t vocab = std::max<int64_t>(
        1, std::llround(
               o.min_vocab *
               std::pow(static_cast<double>(o.max_vocab) / o.min_vocab, t)));
    m.vocab_.push_back(vocab);
    m.field_std_.push_back(o.cat_weight_std *
                           ToUnit(HashKey(f, seed ^ 0x6669656c64ULL)));
    std::vector<double> cdf(vocab);
    double sum = 0;
    for (int64_t r = 0; r < vocab; ++r) {
      sum += std::pow(static_cast<double>(r + 1), -o.zipf_s);
      cdf[r] = sum;
    }
    for (double& c : cdf) c /= sum;
    m.cdf_.push_back(std::move(cdf));
  }
  for (int j = 0; j < kNumIntFeatures; ++j) {
    m.int_weight_[j] =
        o.int_weight_std * NormalOf(HashKey(j, seed ^ 0x696e74ULL));
    m.int_mu_[j] = 4.0 * ToUnit(HashKey(j, seed ^ 0x6d75ULL));
  }
  if (o.kind == GeneratorKind::kPairs) {
    std::vector<std::pair<int, int>> all;
    for (int f = 0; f < kNumCatFeatures; ++f) {
      for (int g = f + 1; g < kNumCatFeatures; ++g) all.emplace_back(f, g);
    }
    Rng rng(seed ^ 0x7061697273ULL);  // "pairs"
    for (size_t i = all.size() - 1; i > 0; --i) {
      std::swap(all[i], all[rng.Next() % (i + 1)]);  // Fisher-Yates
    }
    m.pairs_.assign(all.begin(), all.begin() + o.interaction_pairs);
    // Each factor product has variance s^4; P * k of them sum to
    // interaction_std^2.
    m.factor_std_ = std::pow(o.interaction_std * o.interaction_std /
                                 (o.interaction_pairs * o.factor_dim),
                             0.25);
  }
  return m;
}

int64_t SyntheticModel::SampleRank(int field, double u) const {
  const std::vector<double>& cdf = cdf_[field];
  return std::min<int64_t>(
      std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin(),
      vocab_[field] - 1);
}

double SyntheticModel::IdWeight(int field, int64_t rank, uint64_t salt) const {
  // salt 0 is the additive generator's weight (psdb-synthetic-v1).
  return field_std_[field] *
         NormalOf(HashKey(static_cast<uint64_t>(rank),
                          options_.seed * 0x100000001b3ULL +
                              static_cast<uint64_t>(field) +
                              salt * 0x9e3779b97f4a7c15ULL));
}

double SyntheticModel::Factor(size_t pair, int side, int64_t rank,
                              int c) const {
  const uint64_t key = 0x7061697200000000ULL | (pair << 8) |
                       (static_cast<uint64_t>(side) << 7) |
                       static_cast<uint64_t>(c);
  return factor_std_ * NormalOf(HashKey(static_cast<uint64_t>(rank),
                                        Mix64(options_.seed ^ key)));
}

double SyntheticModel::Logit(const Example& e, int64_t row) const {
  const GeneratorOptions& o = options_;
  double logit = o.bias;
  double t = 0;
  if (o.kind == GeneratorKind::kLongtail) {
    const int64_t rows = o.train_rows + o.test_rows;
    t = static_cast<double>(row) / static_cast<double>(rows - 1);
    logit += o.bias_drift * (t - 0.5);
  }
  for (int j = 0; j < kNumIntFeatures; ++j) {
    if (e.int_set[j]) {
      logit += int_weight_[j] * std::log1p(static_cast<double>(e.ints[j]));
    }
  }
  if (o.kind == GeneratorKind::kLongtail) {
    const double a = std::cos(o.weight_drift * t);
    const double b = std::sin(o.weight_drift * t);
    for (int f = 0; f < kNumCatFeatures; ++f) {
      if (!e.cat_set[f]) continue;
      logit += a * IdWeight(f, e.ranks[f], 0) + b * IdWeight(f, e.ranks[f], 1);
    }
    return logit;
  }
  for (int f = 0; f < kNumCatFeatures; ++f) {
    if (e.cat_set[f]) logit += IdWeight(f, e.ranks[f], 0);
  }
  for (size_t p = 0; p < pairs_.size(); ++p) {
    const auto [f, g] = pairs_[p];
    if (!e.cat_set[f] || !e.cat_set[g]) continue;
    for (int c = 0; c < o.factor_dim; ++c) {
      logit += Factor(p, 0, e.ranks[f], c) * Factor(p, 1, e.ranks[g], c);
    }
  }
  return logit;
}

absl::StatusOr<double> SyntheticModel::Probability(absl::string_view line,
                                                   int64_t row) const {
  const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
  if (fields.size() != kNumCriteoFields) {
    return absl::InvalidArgumentError(
        absl::StrCat("line has ", fields.size(), " fields"));
  }
  const int64_t rows = options_.train_rows + options_.test_rows;
  if (row < 0 || row >= rows) {
    return absl::InvalidArgumentError(absl::StrCat("row ", row, " of ", rows));
  }
  Example e;
  for (int j = 0; j < kNumIntFeatures; ++j) {
    const absl::string_view v = fields[1 + j];
    e.int_set[j] = !v.empty();
    e.ints[j] = 0;
    if (e.int_set[j] && !absl::SimpleAtoi(v, &e.ints[j])) {
      return absl::InvalidArgumentError(absl::StrCat("I", j + 1, " '", v, "'"));
    }
  }
  for (int f = 0; f < kNumCatFeatures; ++f) {
    const absl::string_view v = fields[1 + kNumIntFeatures + f];
    e.cat_set[f] = !v.empty();
    e.ranks[f] = 0;
    if (!e.cat_set[f]) continue;
    uint32_t id;
    if (v.size() != 8 || !absl::SimpleHexAtoi(v, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("C", f + 1, " '", v, "'"));
    }
    e.ranks[f] = RankOf(f, id);
    const int64_t limit =
        vocab_[f] + (options_.kind == GeneratorKind::kLongtail ? rows : 0);
    if (e.ranks[f] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("C", f + 1, " '", v, "' is no id of this data set"));
    }
  }
  return 1.0 / (1.0 + std::exp(-Logit(e, row)));
}

}  // namespace psdb::train
