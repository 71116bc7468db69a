// Synthetic Criteo-format data with a known best achievable AUC, in three
// structurally different kinds (`ps-train gen --kind=...`), so a model can be
// judged on data it was not tuned to.
//
// Common to all kinds: each of the 26 categorical fields has its own
// vocabulary (sizes spread log-uniformly from min_vocab to max_vocab) from
// which ids are drawn with a Zipf(zipf_s) law, the heavy-tailed shape of real
// click logs. Ids are written as 8 hex digits through a bijection of
// (field, rank), so distinct ids stay distinct. The 13 integer features are
// log-normal counts. Any feature is missing with probability missing_rate and
// then contributes 0. Labels are Bernoulli(sigmoid(logit)) where, with
// w_f(id) ~ N(0, field_std_f^2) fixed per (seed, field, id):
//
//   additive  logit = bias + sum_f w_f(id_f) + sum_j a_j * log1p(x_j)
//             (today's generator, "psdb-synthetic-v1": byte-identical files)
//   pairs     additive + sum_{(f,g) in P} <u_fg(id_f), v_fg(id_g)>: explicit
//             field-pair interactions through hidden factors of dimension
//             factor_dim over interaction_pairs seeded pairs of fields, the
//             factor entries zero-mean so an id's interaction effect averages
//             to ~0 over its partners; its std over examples is
//             interaction_std. A model of main effects alone cannot reach the
//             Bayes-optimal AUC.
//   longtail  additive over time t in [0, 1] (row index over the train files,
//             then the test file, in that order): a present categorical value
//             is, with probability singleton_rate, a fresh id written once in
//             the whole data set (with its own hidden weight, so a model
//             cannot learn it); the id weights rotate with time,
//             w_f(id, t) = cos(weight_drift t) w_f(id) + sin(weight_drift t)
//             w'_f(id), and the bias drifts by bias_drift (t - 1/2), so the
//             click rate of the test file (the latest rows) differs from
//             the first training rows'.
//
// The true click probability of every test example is known, so the
// generator reports the Bayes-optimal AUC: the AUC those probabilities score
// on the test labels (`bayes_auc`, what a perfect model would get on this
// very test set) and its expectation over label draws
// (`bayes_auc_expected`). SyntheticModel recomputes that probability from a
// written line, so the claim can be checked against the files.
//
// Output (DIR): train.txt-00000 .. train.txt-<train_files-1>, test.txt,
// meta.json. Same options (seed included) -> byte-identical files.
//
// Thread-safety: GenerateSynthetic is a pure function of its options
// (single-threaded); a SyntheticModel is immutable (const methods may be
// called from any thread).
#ifndef PSDB_TRAIN_SYNTHETIC_H_
#define PSDB_TRAIN_SYNTHETIC_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "train/criteo_reader.h"

namespace psdb::train {

enum class GeneratorKind : int { kAdditive = 0, kPairs = 1, kLongtail = 2 };

// "additive", "pairs", "longtail".
absl::string_view GeneratorKindName(GeneratorKind kind);
// InvalidArgument naming the kinds if `name` is none of them.
absl::StatusOr<GeneratorKind> ParseGeneratorKind(absl::string_view name);

struct GeneratorOptions {
  // Which hidden model labels the data (see above). Default: kAdditive
  GeneratorKind kind = GeneratorKind::kAdditive;
  // Default: 1
  uint64_t seed = 1;
  // Default: 400000
  int64_t train_rows = 400000;
  // Default: 100000
  int64_t test_rows = 100000;
  // Train part files (train.txt-0000N). Default: 4
  int train_files = 4;
  // Smallest and largest field vocabulary. Defaults: 4, 50000
  int64_t min_vocab = 4;
  int64_t max_vocab = 50000;
  // Zipf exponent of id frequencies. Default: 1.2
  double zipf_s = 1.2;
  // Probability that any one feature is empty. Default: 0.05
  double missing_rate = 0.05;
  // Largest per-field std of the hidden id weights (each field draws its own
  // in [0, cat_weight_std]). Default: 0.5
  double cat_weight_std = 0.5;
  // Std of the hidden integer-feature weights. Default: 0.15
  double int_weight_std = 0.15;
  // Hidden model bias (sets the click rate). Default: -1.8
  double bias = -1.8;

  // pairs: how many distinct field pairs interact, in [1, 325]. Default: 13
  int interaction_pairs = 13;
  // pairs: dimension of the hidden factors. Default: 4
  int factor_dim = 4;
  // pairs: std of the interaction part of the logit when every field is
  // present. Default: 1.5
  double interaction_std = 1.5;

  // longtail: probability that a present categorical value is a singleton
  // (an id that occurs once in the whole data set), in [0, 1). Default: 0.3
  double singleton_rate = 0.3;
  // longtail: rotation of the id weights from the first row to the last, in
  // radians. Default: 1.2
  double weight_drift = 1.2;
  // longtail: change of the bias from the first row to the last (the click
  // rate drifts). Default: 1.0
  double bias_drift = 1.0;
};

struct GeneratorResult {
  std::vector<std::string> files;  // everything written, meta.json last
  std::vector<int64_t> vocab_sizes;
  std::vector<double> field_weight_std;  // SyntheticModel::field_weight_std
  double train_ctr = 0;
  double test_ctr = 0;
  double bayes_auc = 0;
  double bayes_auc_expected = 0;
  double bayes_logloss = 0;
  // longtail: categorical values written as singletons (each a distinct id
  // that occurs once); 0 for the other kinds.
  int64_t singleton_values = 0;
};

// The hidden model of the data set GeneratorOptions describe.
class SyntheticModel {
 public:
  // One example's features as drawn: ranks index the field vocabularies
  // (longtail singletons have ranks >= the vocabulary size).
  struct Example {
    int64_t ints[kNumIntFeatures];
    bool int_set[kNumIntFeatures];
    int64_t ranks[kNumCatFeatures];
    bool cat_set[kNumCatFeatures];
  };

  // InvalidArgument on bad options (the generator's own check).
  static absl::StatusOr<SyntheticModel> Create(const GeneratorOptions& options);

  // The logit of `example` at 0-based `row` (train rows first, then test).
  double Logit(const Example& example, int64_t row) const;

  // The true click probability of a line the generator wrote for `row`.
  // InvalidArgument if the line cannot be one of this data set's.
  absl::StatusOr<double> Probability(absl::string_view line, int64_t row) const;

  // The 8-hex-digit id written for `rank` of `field`, and back.
  static uint32_t IdOf(int field, int64_t rank);
  static int64_t RankOf(int field, uint32_t id);

  // A Zipf-distributed rank of `field` for a uniform u in [0, 1).
  int64_t SampleRank(int field, double u) const;
  // The mean of log(x_j) of integer feature j.
  double IntMu(int j) const { return int_mu_[j]; }
  // The std of field f's per-id weights, w_f(id) ~ N(0, std_f^2): the prior
  // a Bayes estimator of the additive kind's weights would use.
  const std::vector<double>& field_weight_std() const { return field_std_; }
  const GeneratorOptions& options() const { return options_; }
  const std::vector<int64_t>& vocab_sizes() const { return vocab_; }
  // pairs: the interacting field pairs, in seeded order.
  const std::vector<std::pair<int, int>>& pairs() const { return pairs_; }

 private:
  SyntheticModel() = default;
  double IdWeight(int field, int64_t rank, uint64_t salt) const;
  double Factor(size_t pair, int side, int64_t rank, int c) const;

  GeneratorOptions options_;
  std::vector<int64_t> vocab_;
  std::vector<double> field_std_;
  std::vector<std::vector<double>> cdf_;  // Zipf CDF over ranks per field
  double int_weight_[kNumIntFeatures] = {};
  double int_mu_[kNumIntFeatures] = {};
  std::vector<std::pair<int, int>> pairs_;
  double factor_std_ = 0;
};

// Writes the data set into `dir` (created if missing; existing train*/test*
// files there are overwritten). InvalidArgument on bad options.
absl::StatusOr<GeneratorResult> GenerateSynthetic(
    const GeneratorOptions& options, absl::string_view dir);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_SYNTHETIC_H_
