// Synthetic Criteo-format data with a known best achievable AUC.
//
// Each of the 26 categorical fields has its own vocabulary (sizes spread
// log-uniformly from min_vocab to max_vocab) from which ids are drawn with a
// Zipf(zipf_s) law, the heavy-tailed shape of real click logs. Ids are
// written as 8 hex digits through a bijection, so distinct ids stay
// distinct. The 13 integer features are log-normal counts. Labels come from
// a hidden logistic model:
//   logit = bias + sum_f w_f(id_f) + sum_j a_j * log1p(x_j)
// with w_f(id) ~ N(0, field_std_f^2) fixed per (seed, field, id) and a
// missing field contributing 0. The true click probability of every test
// example is known, so the generator reports the Bayes-optimal AUC: the AUC
// those probabilities score on the test labels (`bayes_auc`, what a perfect
// model would get on this very test set) and its expectation over label
// draws (`bayes_auc_expected`).
//
// Output (DIR): train.txt-00000 .. train.txt-<train_files-1>, test.txt,
// meta.json. Same options -> byte-identical files.
//
// Thread-safety: pure function of its options (single-threaded).
#ifndef PSDB_TRAIN_SYNTHETIC_H_
#define PSDB_TRAIN_SYNTHETIC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::train {

struct GeneratorOptions {
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
};

struct GeneratorResult {
  std::vector<std::string> files;  // everything written, meta.json last
  std::vector<int64_t> vocab_sizes;
  double train_ctr = 0;
  double test_ctr = 0;
  double bayes_auc = 0;
  double bayes_auc_expected = 0;
  double bayes_logloss = 0;
};

// Writes the data set into `dir` (created if missing; existing train*/test*
// files there are overwritten). InvalidArgument on bad options.
absl::StatusOr<GeneratorResult> GenerateSynthetic(
    const GeneratorOptions& options, absl::string_view dir);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_SYNTHETIC_H_
