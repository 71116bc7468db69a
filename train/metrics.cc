#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psdb::train {

absl::StatusOr<double> Auc(absl::Span<const float> scores,
                           absl::Span<const float> labels) {
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AUC: ", scores.size(), " scores but ", labels.size(), " labels"));
  }
  const size_t n = scores.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, mid-ranked) ranks of the positives.
  double rank_sum = 0;
  double positives = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    double group_pos = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) {
      group_pos += labels[order[j]] > 0.5f ? 1 : 0;
      ++j;
    }
    const double mid_rank = 0.5 * (static_cast<double>(i + 1) + j);
    rank_sum += group_pos * mid_rank;
    positives += group_pos;
    i = j;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0 || negatives == 0) {
    return absl::InvalidArgumentError(absl::StrCat("AUC needs both classes (",
                                                   positives, " positives, ",
                                                   negatives, " negatives)"));
  }
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

absl::StatusOr<double> LogLoss(absl::Span<const float> probs,
                               absl::Span<const float> labels) {
  if (probs.size() != labels.size() || probs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("log-loss: ", probs.size(),
                                                   " probabilities, ",
                                                   labels.size(), " labels"));
  }
  constexpr double kEps = 1e-7;
  double sum = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double p = std::clamp<double>(probs[i], kEps, 1 - kEps);
    sum -= labels[i] > 0.5f ? std::log(p) : std::log1p(-p);
  }
  return sum / static_cast<double>(probs.size());
}

absl::StatusOr<double> ExpectedAuc(absl::Span<const float> probs) {
  if (probs.size() < 2) return absl::InvalidArgumentError("ExpectedAuc: n < 2");
  std::vector<float> p(probs.begin(), probs.end());
  std::sort(p.begin(), p.end());
  // Walking up in p: each i (as the positive) beats every lower j (negative).
  double neg_below = 0;  // sum of (1 - p_j) over strictly lower j
  double numer = 0;
  double total_pos = 0, total_neg = 0, self = 0;
  for (size_t i = 0; i < p.size();) {
    size_t j = i;
    double group_pos = 0, group_neg = 0;
    while (j < p.size() && p[j] == p[i]) {
      group_pos += p[j];
      group_neg += 1 - p[j];
      self += static_cast<double>(p[j]) * (1 - p[j]);
      ++j;
    }
    // Pairs inside the tie group count one half (minus the i == j pairs).
    numer += group_pos * neg_below + 0.5 * (group_pos * group_neg);
    neg_below += group_neg;
    total_pos += group_pos;
    total_neg += group_neg;
    i = j;
  }
  numer -= 0.5 * self;
  const double denom = total_pos * total_neg - self;
  if (denom <= 0) return absl::InvalidArgumentError("ExpectedAuc: degenerate");
  return numer / denom;
}

}  // namespace psdb::train
