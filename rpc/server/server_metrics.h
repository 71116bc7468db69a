// ServerMetrics: what a ps-server (training or serving) exposes to
// Prometheus (rpc/wire/metrics_http.h serves it at GET /metrics).
//
// Each figure is recorded where it happens or read where it already lives,
// so none is counted twice:
//  - Requests are recorded in the request path (PsServer's one dispatch
//    point calls RecordRequest once per finished call):
//      psdb_server_requests_total{method,code}        counter; errors are
//                                                     the code!="OK" series
//      psdb_server_request_duration_seconds{method}   histogram, from the
//                                                     call's arrival to its
//                                                     answer (queueing too)
//      psdb_server_request_keys{method}               histogram of keys per
//                                                     request (keyed methods)
//      psdb_server_last_checkpoint_timestamp_seconds  gauge, unix time of the
//                                                     last successful
//                                                     Checkpoint call; absent
//                                                     before the first
//  - The store's own figures (Store::Stats(), psdb/parameter_client.h) are
//    read when Prometheus scrapes, by a collector, and never copied into
//    counters of ours: per table (label `table`)
//      psdb_store_memory_hits_total, psdb_store_memory_misses_total,
//      psdb_store_rows_created_total, psdb_store_evictions_total,
//      psdb_store_background_evictions_total, psdb_store_dirty_writes_total,
//      psdb_store_not_admitted_total,
//      psdb_store_disk_write_errors_total,
//      psdb_store_non_finite_updates_total            counters
//      psdb_store_rows{tier}, psdb_store_bytes{tier}  gauges, tier = memory
//                                                     | disk (RocksDB's
//                                                     estimate)
//      psdb_store_table_step, psdb_store_disk_compaction_pending  gauges
//    and store-wide psdb_store_memory_budget_bytes,
//    psdb_store_memory_used_bytes, psdb_store_memory_yielded_bytes,
//    psdb_store_disk_running_compactions
//    (gauges), psdb_store_checkpoint_duration_seconds (a summary without
//    quantiles: _count checkpoints, _sum their total duration) and
//    psdb_store_last_checkpoint_duration_seconds (gauge).
//  - Serving (read-only replicas, rpc/server/checkpoint_follower.h): the
//    store figures above are the served checkpoint's (every shard it holds,
//    merged by MergeStoreStats), and at scrape time,
//    from the served snapshot and the follower's status()
//      psdb_serving_step                          the served checkpoint's step
//      psdb_serving_checkpoint_timestamp_seconds  its creation time (unix)
//      psdb_serving_lag_seconds                   now - its creation time:
//                                                 how far serving is behind
//                                                 training (freshness)
//      psdb_serving_swaps_total                   checkpoints swapped in
//      psdb_serving_refused_total                 checkpoints that failed
//                                                 verification
//    and, observed at each swap (CheckpointFollower::SetSwapObserver, from
//    its SwapReport; swaps after the first open only, as swaps_total
//    counts them: the first open is start-up, not freshness)
//      psdb_serving_swap_seconds                  histogram of swap time,
//                                                 taking a checkpoint up to
//                                                 serving it
//      psdb_serving_swap_bytes_read               histogram of bytes read
//                                                 from checkpoint files per
//                                                 swap
//
// Label values are bounded: methods and codes are enums, tables are the
// store's tables.
//
// Thread-safety: thread-safe. RecordRequest is on every request's path and
// costs two or three atomic adds plus one short mutex inside prometheus-cpp's
// Histogram::Observe per histogram; the per-(method, code) counter is
// resolved once (the first call with a code creates it) and found again by
// array index, never by a label-map lookup. `store` must outlive this object
// and every scrape of it (stop the MetricsHttpServer first); so must
// `follower`, whose swap observer a serving ServerMetrics holds for its
// lifetime (and clears when destroyed).
#ifndef PSDB_RPC_SERVER_SERVER_METRICS_H_
#define PSDB_RPC_SERVER_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "psdb/store.h"
#include "rpc/server/checkpoint_follower.h"

namespace psdb::rpc {

// ParameterService's methods (rpc/wire/psdb.proto), as metric labels.
enum class RpcMethod : int {
  kPull = 0,
  kPush,
  kPullRows,
  kPutRows,
  kCreateTable,
  kDropTable,
  kListTables,
  kCheckpoint,
  kStats,
  kReshard,
  kMigrate,
  kPullTables,
};
inline constexpr int kNumRpcMethods = 12;
// "Pull", "Push", ... as in psdb.proto.
absl::string_view RpcMethodName(RpcMethod method);

class ServerMetrics {
 public:
  // A training server: `store`'s figures. REQUIRES: store != nullptr,
  // outliving this object and its scrapes.
  explicit ServerMetrics(Store* store);
  // A read-only serving replica: the figures of the checkpoint `follower`
  // serves at scrape time (they start from zero at each swap, which
  // Prometheus's rate() treats as a counter reset), its step and lag, and
  // its swaps (this sets the follower's swap observer, replacing any).
  // REQUIRES: follower != nullptr, outliving this object and its scrapes.
  explicit ServerMetrics(CheckpointFollower* follower);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Everything this server exposes, for MetricsHttpServer::Register: the
  // request registry and the store/serving collector.
  std::shared_ptr<prometheus::Collectable> requests() const;
  std::shared_ptr<prometheus::Collectable> store_collector() const;

  // One finished call of `method` answered with `code` after `latency`;
  // `keys` is the request's key count for keyed methods (Pull, Push,
  // PullRows, PutRows), nullopt for the others. A successful kCheckpoint
  // also sets the last-checkpoint timestamp to `now`.
  void RecordRequest(RpcMethod method, absl::StatusCode code,
                     absl::Duration latency, std::optional<size_t> keys,
                     absl::Time now = absl::Now());

 private:
  class StoreCollector;
  // gRPC's codes 0..16 (absl::StatusCode has the same numbers).
  static constexpr int kNumCodes = 17;

  prometheus::Counter* RequestCounter(RpcMethod method, absl::StatusCode code);

  ServerMetrics(Store* store, CheckpointFollower* follower);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<StoreCollector> collector_;
  CheckpointFollower* const follower_;  // serving; null when training
  prometheus::Family<prometheus::Counter>* requests_family_;
  prometheus::Family<prometheus::Gauge>* checkpoint_time_family_;
  std::array<prometheus::Histogram*, kNumRpcMethods> latency_{};
  // Null for the methods that carry no keys.
  std::array<prometheus::Histogram*, kNumRpcMethods> keys_{};
  // Resolved counters by [method][code]; null until first used (OK is
  // resolved up front so every method's rate is defined from the start).
  std::array<std::array<std::atomic<prometheus::Counter*>, kNumCodes>,
             kNumRpcMethods>
      requests_{};
  std::atomic<prometheus::Gauge*> last_checkpoint_time_{nullptr};
  absl::Mutex resolve_mu_;  // serializes first-use creation
};

}  // namespace psdb::rpc

#endif  // PSDB_RPC_SERVER_SERVER_METRICS_H_
