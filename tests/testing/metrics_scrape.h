// How tests read a psdb process's metrics: scrape GET /metrics with curl (a
// real HTTP client, as Prometheus is one) and look samples up in the
// Prometheus text exposition format by name and exact label set.
//
// Thread-safety: free functions over values; thread-compatible.
#ifndef PSDB_TESTS_TESTING_METRICS_SCRAPE_H_
#define PSDB_TESTS_TESTING_METRICS_SCRAPE_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psdb::testing {

using MetricLabels = std::map<std::string, std::string>;

// The body of http://<address>/metrics (address is host:port), fetched with
// `curl -sf`; UNAVAILABLE with curl's output when it fails.
absl::StatusOr<std::string> ScrapeMetrics(const std::string& address);

// The value of the sample `name` whose labels are exactly `labels` in a
// text-format exposition; nullopt when there is none. Histogram series are
// named with their suffix: "psdb_x_seconds_count", "psdb_x_seconds_bucket"
// with {"le", "0.001"}.
std::optional<double> MetricValue(absl::string_view exposition,
                                  absl::string_view name,
                                  const MetricLabels& labels = {});

// The sum of every sample `name` whose labels include all of `labels`
// (0 when none does).
double MetricSum(absl::string_view exposition, absl::string_view name,
                 const MetricLabels& labels = {});

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TESTING_METRICS_SCRAPE_H_
