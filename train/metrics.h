// Evaluation metrics of a binary classifier: ROC AUC (exact, by sorting,
// ties counted as one half) and log-loss.
//
// Thread-safety: pure functions.
#ifndef PSDB_TRAIN_METRICS_H_
#define PSDB_TRAIN_METRICS_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psdb::train {

// Area under the ROC curve of `scores` against `labels` (0 or 1): the
// probability that a random positive scores above a random negative, ties
// counting 1/2 (Mann-Whitney U with mid-ranks). O(n log n).
// InvalidArgument if the sizes differ or either class is absent.
absl::StatusOr<double> Auc(absl::Span<const float> scores,
                           absl::Span<const float> labels);

// Mean of -[y log p + (1-y) log(1-p)], p clipped to [1e-7, 1 - 1e-7].
// InvalidArgument if the sizes differ or the input is empty.
absl::StatusOr<double> LogLoss(absl::Span<const float> probs,
                               absl::Span<const float> labels);

// Expected AUC of a perfect model when labels are Bernoulli(probs):
// sum over pairs i != j of p_i (1 - p_j) [p_i > p_j, 1/2 if equal], divided
// by sum over pairs of p_i (1 - p_j). O(n log n).
absl::StatusOr<double> ExpectedAuc(absl::Span<const float> probs);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_METRICS_H_
