#include "rpc/wire/metric_families.h"

namespace psdb::rpc {

prometheus::MetricFamily NewMetricFamily(std::string name, std::string help,
                                         prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddMetricSample(prometheus::MetricFamily* family, MetricLabelList labels,
                     double value) {
  prometheus::ClientMetric metric;
  for (auto& [name, label_value] : labels) {
    prometheus::ClientMetric::Label label;
    label.name = std::move(name);
    label.value = std::move(label_value);
    metric.label.push_back(std::move(label));
  }
  if (family->type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family->metric.push_back(std::move(metric));
}

void AddGaugeFamily(std::vector<prometheus::MetricFamily>* out,
                    std::string name, std::string help, double value) {
  prometheus::MetricFamily family = NewMetricFamily(
      std::move(name), std::move(help), prometheus::MetricType::Gauge);
  AddMetricSample(&family, {}, value);
  out->push_back(std::move(family));
}

}  // namespace psdb::rpc
