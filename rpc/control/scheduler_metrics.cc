#include "rpc/control/scheduler_metrics.h"

#include <vector>

#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "rpc/wire/metric_families.h"

namespace psdb::rpc {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;

class SchedulerCollector final : public prometheus::Collectable {
 public:
  explicit SchedulerCollector(SchedulerBackend* scheduler)
      : scheduler_(scheduler) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    const v1::SchedulerStatus status = scheduler_->Status();
    AddGaugeFamily(&out, "psdb_scheduler_leader",
                   "1 when this scheduler leads the cluster.",
                   status.leader() ? 1 : 0);
    AddGaugeFamily(&out, "psdb_scheduler_healthy",
                   "1 when this scheduler can answer nodes (with etcd: etcd "
                   "answers).",
                   status.healthy() ? 1 : 0);
    absl::StatusOr<v1::ClusterMap> current = scheduler_->CurrentMap();
    if (!current.ok()) return out;
    const v1::ClusterMap& map = *current;
    MetricFamily live = NewMetricFamily(
        "psdb_scheduler_live_nodes",
        "Registered nodes whose heartbeats arrive in time, by role.",
        MetricType::Gauge);
    MetricFamily dead = NewMetricFamily(
        "psdb_scheduler_dead_nodes",
        "Nodes marked dead (missed heartbeats), by role; they keep their "
        "ranks.",
        MetricType::Gauge);
    MetricFamily joining = NewMetricFamily(
        "psdb_scheduler_joining_nodes",
        "Servers registered to join (ps-server --join), not yet on the ring "
        "(add-server puts them there).",
        MetricType::Gauge);
    MetricFamily expected = NewMetricFamily(
        "psdb_scheduler_expected_nodes",
        "Nodes the cluster is configured for, by role (servers: those on the "
        "ring, following add-server and drain-server).",
        MetricType::Gauge);
    const auto add = [&](const char* role, const auto& nodes, int want) {
      int alive = 0, marked_dead = 0, joins = 0;
      for (const v1::NodeEntry& n : nodes) {
        if (n.state() == v1::NODE_STATE_ALIVE) ++alive;
        if (n.state() == v1::NODE_STATE_DEAD) ++marked_dead;
        if (n.state() == v1::NODE_STATE_JOINING) ++joins;
      }
      AddMetricSample(&live, {{"role", role}}, alive);
      AddMetricSample(&dead, {{"role", role}}, marked_dead);
      AddMetricSample(&joining, {{"role", role}}, joins);
      AddMetricSample(&expected, {{"role", role}}, want);
    };
    add("server", map.servers(), map.server_num());
    add("worker", map.workers(), map.worker_num());

    out.push_back(std::move(live));
    out.push_back(std::move(dead));
    out.push_back(std::move(joining));
    out.push_back(std::move(expected));
    AddGaugeFamily(&out, "psdb_scheduler_cluster_ready",
                   "1 once every server and worker rank has registered.",
                   map.ready() ? 1 : 0);
    AddGaugeFamily(
        &out, "psdb_scheduler_cluster_epoch",
        "The cluster epoch servers and clients route with (0 until ready).",
        static_cast<double>(map.epoch()));
    AddGaugeFamily(&out, "psdb_scheduler_map_version",
                   "Increases with every membership change.",
                   static_cast<double>(map.version()));
    return out;
  }

 private:
  SchedulerBackend* const scheduler_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> NewSchedulerCollector(
    SchedulerBackend* scheduler) {
  return std::make_shared<SchedulerCollector>(scheduler);
}

}  // namespace psdb::rpc
