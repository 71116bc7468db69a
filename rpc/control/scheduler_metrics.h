// What ps-scheduler exposes to Prometheus (rpc/wire/metrics_http.h serves
// it at GET /metrics): the membership, read from the backend's CurrentMap()
// and Status() at scrape time, so the figures are the scheduler's own and
// never a second copy.
//
//   psdb_scheduler_live_nodes{role}      registered nodes that beat in time
//   psdb_scheduler_dead_nodes{role}      nodes marked dead (they keep ranks)
//   psdb_scheduler_joining_nodes{role}   servers JOINING (not on the ring)
//   psdb_scheduler_expected_nodes{role}  server_num (on the ring) / worker_num
//   psdb_scheduler_cluster_ready         1 once every rank has registered
//   psdb_scheduler_cluster_epoch         the epoch servers route with
//   psdb_scheduler_map_version           bumps with every membership change
//   psdb_scheduler_leader                1 when this scheduler leads
//   psdb_scheduler_healthy               0 when it cannot serve (etcd down)
//
// With etcd unreachable only the last two are exported.
// role is "server" or "worker"; all are gauges.
//
// Thread-safety: the collector is thread-safe (backends are). `scheduler`
// must outlive the collector's scrapes (stop the MetricsHttpServer first).
#ifndef PSDB_RPC_CONTROL_SCHEDULER_METRICS_H_
#define PSDB_RPC_CONTROL_SCHEDULER_METRICS_H_

#include <memory>

#include "prometheus/collectable.h"
#include "rpc/control/scheduler.h"

namespace psdb::rpc {

// REQUIRES: scheduler != nullptr.
std::shared_ptr<prometheus::Collectable> NewSchedulerCollector(
    SchedulerBackend* scheduler);

}  // namespace psdb::rpc

#endif  // PSDB_RPC_CONTROL_SCHEDULER_METRICS_H_
