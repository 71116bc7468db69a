// Building prometheus::MetricFamily values by hand, for collectors that read
// a component's own figures at scrape time (the store's Stats(), the
// scheduler's map) instead of keeping counters of their own. One place for
// the few lines prometheus-cpp's plain structs need.
//
//   prometheus::MetricFamily f = NewMetricFamily(
//       "psdb_scheduler_live_nodes", "Live nodes by role.", kGauge);
//   AddMetricSample(&f, {{"role", "server"}}, 3);
//
// Thread-safety: free functions over values.
#ifndef PSDB_RPC_WIRE_METRIC_FAMILIES_H_
#define PSDB_RPC_WIRE_METRIC_FAMILIES_H_

#include <string>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace psdb::rpc {

using MetricLabelList = std::vector<std::pair<std::string, std::string>>;

// A family with no samples yet. REQUIRES: type is Counter or Gauge for
// AddMetricSample (summaries and histograms fill their ClientMetric).
prometheus::MetricFamily NewMetricFamily(std::string name, std::string help,
                                         prometheus::MetricType type);

// Appends one sample: the counter's or the gauge's value, per family type.
void AddMetricSample(prometheus::MetricFamily* family, MetricLabelList labels,
                     double value);

// Appends to `out` a gauge family with one unlabelled sample.
void AddGaugeFamily(std::vector<prometheus::MetricFamily>* out,
                    std::string name, std::string help, double value);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_WIRE_METRIC_FAMILIES_H_
