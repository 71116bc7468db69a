// The files a training run leaves next to its checkpoints:
//   metrics.csv   step,epoch,samples,train_loss,train_auc,eval_auc,
//                 eval_logloss,wide_loss,deep_loss,valid_auc,valid_logloss
//                 (eval_* on the test files, valid_* on the validation
//                 split; empty cells where a value was not measured at that
//                 row; wide_loss and deep_loss are the training window's
//                 per-part losses, WideDeepLoss in train/wide_deep.h)
//   metrics.png   losses (train, each part's, validation, test) and AUC
//                 against step,
//                 rendered by gnuplot
//   summary.json  the run's headline numbers
//
// Thread-safety: thread-compatible.
#ifndef PSDB_TRAIN_REPORT_H_
#define PSDB_TRAIN_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::train {

struct MetricsRow {
  int64_t step = 0;
  int epoch = 0;
  uint64_t samples = 0;
  std::optional<double> train_loss;
  std::optional<double> train_auc;
  std::optional<double> eval_auc;
  std::optional<double> eval_logloss;
  std::optional<double> wide_loss;  // log-loss of the wide part alone
  std::optional<double> deep_loss;  // log-loss of the deep part alone
  std::optional<double> valid_auc;  // on the validation split
  std::optional<double> valid_logloss;
};

absl::Status WriteMetricsCsv(absl::string_view path,
                             const std::vector<MetricsRow>& rows);

// The gnuplot script PlotMetrics runs: two panels against step, the losses
// (train, wide part, deep part, validation, test) and the AUCs (train,
// validation, test, a
// horizontal line at bayes_auc when given). Columns are named by their
// metrics.csv header, not their position.
std::string MetricsPlotScript(absl::string_view csv, absl::string_view png,
                              std::optional<double> bayes_auc);

// Renders `csv` to `png` with gnuplot (MetricsPlotScript). Unavailable (with a
// message saying so) if gnuplot is not on PATH; Internal if it fails.
absl::Status PlotMetrics(absl::string_view csv, absl::string_view png,
                         std::optional<double> bayes_auc);

// Where `program` is on $PATH, if it is.
std::optional<std::string> FindOnPath(absl::string_view program);

// A flat JSON object writer: numbers, strings, null for absent optionals.
class JsonObject {
 public:
  JsonObject& Add(absl::string_view key, double value);
  JsonObject& Add(absl::string_view key, int64_t value);
  JsonObject& Add(absl::string_view key, uint64_t value);
  JsonObject& Add(absl::string_view key, std::optional<double> value);
  JsonObject& Add(absl::string_view key, absl::string_view value);
  JsonObject& AddRaw(absl::string_view key, absl::string_view json);
  std::string ToString() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

std::string JsonEscape(absl::string_view s);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_REPORT_H_
