#include "rpc/server/server_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "rpc/wire/metric_families.h"

namespace psdb::rpc {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr std::array<absl::string_view, kNumRpcMethods> kMethodNames = {
    "Pull",        "Push",      "PullRows",   "PutRows",
    "CreateTable", "DropTable", "ListTables", "Checkpoint",
    "Stats",       "Reshard",   "Migrate",    "PullTables"};

bool HasKeys(RpcMethod method) {
  return method == RpcMethod::kPull || method == RpcMethod::kPush ||
         method == RpcMethod::kPullRows || method == RpcMethod::kPutRows ||
         method == RpcMethod::kMigrate || method == RpcMethod::kPullTables;
}

// Request latency buckets: from 50 us (a small pull on loopback) to 10 s (a
// checkpoint of a large shard), about 2.5x apart; +Inf is implicit.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
      50e-3, 100e-3, 250e-3, 500e-3, 1,    2.5,    5,    10};
  return *buckets;
}

// Keys per request: powers of 4 from 1 up to the default batch limit
// (65536) and one step beyond it for servers configured higher.
const prometheus::Histogram::BucketBoundaries& KeyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144};
  return *buckets;
}

// Swap time: from 10 ms (a small delta on a quiet replica) to 10 min (a
// whole large checkpoint verified under SCHED_IDLE on a busy machine),
// about 2-2.5x apart.
const prometheus::Histogram::BucketBoundaries& SwapSecondsBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 600};
  return *buckets;
}

// Bytes read per swap: powers of 4 from 64 KiB (a delta of a few thousand
// rows) to 64 GiB (a whole giant shard read again).
const prometheus::Histogram::BucketBoundaries& SwapBytesBuckets() {
  static const auto* buckets = [] {
    auto* b = new prometheus::Histogram::BucketBoundaries;
    for (double v = 64.0 * 1024; v <= 64.0 * (1ull << 30); v *= 4) {
      b->push_back(v);
    }
    return b;
  }();
  return *buckets;
}

double UnixSeconds(absl::Time t) {
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

}  // namespace

absl::string_view RpcMethodName(RpcMethod method) {
  return kMethodNames[static_cast<int>(method)];
}

// Reads Store::Stats() (and the serving status) at scrape time and turns it
// into metric families; it keeps no figures of its own.
class ServerMetrics::StoreCollector final : public prometheus::Collectable {
 public:
  // Exactly one of store and follower is set.
  StoreCollector(Store* store, CheckpointFollower* follower)
      : store_(store), follower_(follower) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    if (follower_ != nullptr) {
      // Hold the served snapshot while its store is read.
      const std::shared_ptr<ServingSnapshot> snapshot = follower_->Acquire();
      CollectStore(snapshot->Stats(), &out);
      CollectServing(*snapshot, follower_->status(), &out);
    } else {
      CollectStore(store_->Stats(), &out);
    }
    return out;
  }

 private:
  static void CollectStore(const StoreStats& stats,
                           std::vector<MetricFamily>* out) {
    // Per-table counters: one family each, one sample per table.
    struct PerTable {
      const char* name;
      const char* help;
      uint64_t TableStats::*field;
    };
    static constexpr PerTable kCounters[] = {
        {"psdb_store_memory_hits_total", "Lookups served by the memory tier.",
         &TableStats::hits},
        {"psdb_store_memory_misses_total",
         "Lookups the memory tier missed (read from RocksDB or created).",
         &TableStats::misses},
        {"psdb_store_rows_created_total",
         "Rows created by deterministic initialization.", &TableStats::created},
        {"psdb_store_evictions_total", "Rows evicted from the memory tier.",
         &TableStats::evictions},
        {"psdb_store_background_evictions_total",
         "Of the evictions, those done by the background evictor.",
         &TableStats::background_evictions},
        {"psdb_store_dirty_writes_total",
         "Evicted dirty rows written to RocksDB.", &TableStats::dirty_writes},
        {"psdb_store_disk_write_errors_total",
         "Eviction writes the disk refused (rows stayed in memory).",
         &TableStats::disk_write_errors},
        {"psdb_store_non_finite_updates_total",
         "Row updates undone because they would have made the row "
         "non-finite.",
         &TableStats::non_finite_updates},
        {"psdb_store_not_admitted_total",
         "Sightings of keys below the admission threshold.",
         &TableStats::not_admitted},
    };
    for (const PerTable& c : kCounters) {
      MetricFamily family =
          NewMetricFamily(c.name, c.help, MetricType::Counter);
      for (const TableStats& t : stats.tables) {
        AddMetricSample(&family, {{"table", t.name}},
                        static_cast<double>(t.*c.field));
      }
      out->push_back(std::move(family));
    }

    MetricFamily rows = NewMetricFamily(
        "psdb_store_rows",
        "Rows per tier: memory (resident), disk (RocksDB's estimate).",
        MetricType::Gauge);
    MetricFamily bytes = NewMetricFamily(
        "psdb_store_bytes",
        "Bytes per tier: memory (arena), disk (live SST files).",
        MetricType::Gauge);
    MetricFamily step =
        NewMetricFamily("psdb_store_table_step", "The table's current step.",
                        MetricType::Gauge);
    MetricFamily pending = NewMetricFamily(
        "psdb_store_disk_compaction_pending",
        "1 when RocksDB wants to compact the table.", MetricType::Gauge);
    for (const TableStats& t : stats.tables) {
      AddMetricSample(&rows, {{"table", t.name}, {"tier", "memory"}},
                      static_cast<double>(t.memory_rows));
      AddMetricSample(&rows, {{"table", t.name}, {"tier", "disk"}},
                      static_cast<double>(t.disk_rows));
      AddMetricSample(&bytes, {{"table", t.name}, {"tier", "memory"}},
                      static_cast<double>(t.memory_bytes));
      AddMetricSample(&bytes, {{"table", t.name}, {"tier", "disk"}},
                      static_cast<double>(t.disk_bytes));
      AddMetricSample(&step, {{"table", t.name}}, static_cast<double>(t.step));
      AddMetricSample(&pending, {{"table", t.name}},
                      t.disk_compaction_pending ? 1 : 0);
    }
    out->push_back(std::move(rows));
    out->push_back(std::move(bytes));
    out->push_back(std::move(step));
    out->push_back(std::move(pending));

    AddGaugeFamily(out, "psdb_store_memory_budget_bytes",
                   "The memory tier's byte budget.",
                   static_cast<double>(stats.memory_budget_bytes));
    AddGaugeFamily(out, "psdb_store_memory_used_bytes",
                   "Bytes the memory tier uses.",
                   static_cast<double>(stats.memory_used_bytes));
    AddGaugeFamily(out, "psdb_store_memory_yielded_bytes",
                   "Bytes of the memory tier's share given up to what RocksDB "
                   "pins beyond its own.",
                   static_cast<double>(stats.memory_yielded_bytes));
    AddGaugeFamily(out, "psdb_store_disk_running_compactions",
                   "RocksDB compactions running now.",
                   static_cast<double>(stats.disk_running_compactions));
    AddGaugeFamily(out, "psdb_store_last_checkpoint_duration_seconds",
                   "How long the last checkpoint took (0 before the first).",
                   absl::ToDoubleSeconds(stats.last_checkpoint_duration));

    // The store keeps a count and a total, not a distribution: a summary
    // without quantiles is exactly that (_count, _sum), and
    // rate(_sum)/rate(_count) is the mean duration.
    MetricFamily duration = NewMetricFamily(
        "psdb_store_checkpoint_duration_seconds",
        "Checkpoints taken by this store and their total duration.",
        MetricType::Summary);
    ClientMetric summary;
    summary.summary.sample_count = stats.checkpoints;
    summary.summary.sample_sum =
        absl::ToDoubleSeconds(stats.total_checkpoint_duration);
    duration.metric.push_back(std::move(summary));
    out->push_back(std::move(duration));
  }

  // Step and age from the snapshot whose store was read; the follower's
  // running totals from its status.
  static void CollectServing(const ServingSnapshot& snapshot,
                             const ServingStatus& status,
                             std::vector<MetricFamily>* out) {
    AddGaugeFamily(out, "psdb_serving_step",
                   "Step of the checkpoint being served.",
                   static_cast<double>(snapshot.step));
    AddGaugeFamily(out, "psdb_serving_checkpoint_timestamp_seconds",
                   "Creation time (unix) of the checkpoint being served.",
                   UnixSeconds(snapshot.created));
    AddGaugeFamily(out, "psdb_serving_lag_seconds",
                   "Seconds since the checkpoint being served was created: "
                   "how far serving is behind training.",
                   absl::ToDoubleSeconds(absl::Now() - snapshot.created));
    MetricFamily swaps = NewMetricFamily(
        "psdb_serving_swaps_total", "Checkpoints swapped in after the first.",
        MetricType::Counter);
    AddMetricSample(&swaps, {}, static_cast<double>(status.swaps));
    out->push_back(std::move(swaps));
    MetricFamily refused = NewMetricFamily(
        "psdb_serving_refused_total",
        "Checkpoints that failed verification and were not served.",
        MetricType::Counter);
    AddMetricSample(&refused, {}, static_cast<double>(status.refused));
    out->push_back(std::move(refused));
  }

  Store* const store_;
  CheckpointFollower* const follower_;
};

ServerMetrics::ServerMetrics(Store* store) : ServerMetrics(store, nullptr) {}

ServerMetrics::ServerMetrics(CheckpointFollower* follower)
    : ServerMetrics(nullptr, follower) {}

ServerMetrics::ServerMetrics(Store* store, CheckpointFollower* follower)
    : registry_(std::make_shared<prometheus::Registry>()),
      collector_(std::make_shared<StoreCollector>(store, follower)),
      follower_(follower) {
  requests_family_ =
      &prometheus::BuildCounter()
           .Name("psdb_server_requests_total")
           .Help(
               "ParameterService calls answered, by method and gRPC status "
               "code (errors: code != OK).")
           .Register(*registry_);
  auto& latency = prometheus::BuildHistogram()
                      .Name("psdb_server_request_duration_seconds")
                      .Help(
                          "Time from a call's arrival to its answer, queueing "
                          "included, by method.")
                      .Register(*registry_);
  auto& keys = prometheus::BuildHistogram()
                   .Name("psdb_server_request_keys")
                   .Help("Keys per request, by method (keyed methods).")
                   .Register(*registry_);
  checkpoint_time_family_ =
      &prometheus::BuildGauge()
           .Name("psdb_server_last_checkpoint_timestamp_seconds")
           .Help("Unix time of the last successful Checkpoint call.")
           .Register(*registry_);
  for (int m = 0; m < kNumRpcMethods; ++m) {
    const auto method = static_cast<RpcMethod>(m);
    const std::string name(RpcMethodName(method));
    latency_[m] = &latency.Add({{"method", name}}, LatencyBuckets());
    if (HasKeys(method)) keys_[m] = &keys.Add({{"method", name}}, KeyBuckets());
    RequestCounter(method, absl::StatusCode::kOk);
  }
  if (follower_ != nullptr) {
    prometheus::Histogram* seconds =
        &prometheus::BuildHistogram()
             .Name("psdb_serving_swap_seconds")
             .Help(
                 "Time from taking a newer checkpoint up to serving it, per "
                 "swap (the first open excluded).")
             .Register(*registry_)
             .Add({}, SwapSecondsBuckets());
    prometheus::Histogram* bytes =
        &prometheus::BuildHistogram()
             .Name("psdb_serving_swap_bytes_read")
             .Help(
                 "Bytes read from checkpoint files per swap (verifying, "
                 "opening and warming; the first open excluded).")
             .Register(*registry_)
             .Add({}, SwapBytesBuckets());
    // The follower may still be running a copy of the observer when this
    // object goes: the copy keeps the registry, hence both histograms.
    // Its first open happened in CheckpointFollower::Start, before any
    // observer could be set, so every report seen here is a swap.
    follower_->SetSwapObserver(
        [registry = registry_, seconds, bytes](const SwapReport& report) {
          seconds->Observe(absl::ToDoubleSeconds(report.took));
          bytes->Observe(static_cast<double>(report.bytes_read));
        });
  }
}

ServerMetrics::~ServerMetrics() {
  if (follower_ != nullptr) follower_->SetSwapObserver(nullptr);
}

std::shared_ptr<prometheus::Collectable> ServerMetrics::requests() const {
  return registry_;
}

std::shared_ptr<prometheus::Collectable> ServerMetrics::store_collector()
    const {
  return collector_;
}

prometheus::Counter* ServerMetrics::RequestCounter(RpcMethod method,
                                                   absl::StatusCode code) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= kNumCodes) {
    code = absl::StatusCode::kUnknown;
    c = static_cast<int>(code);
  }
  std::atomic<prometheus::Counter*>& slot =
      requests_[static_cast<int>(method)][c];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter != nullptr) return counter;
  absl::MutexLock lock(&resolve_mu_);
  counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter =
        &requests_family_->Add({{"method", std::string(RpcMethodName(method))},
                                {"code", absl::StatusCodeToString(code)}});
    slot.store(counter, std::memory_order_release);
  }
  return counter;
}

void ServerMetrics::RecordRequest(RpcMethod method, absl::StatusCode code,
                                  absl::Duration latency,
                                  std::optional<size_t> keys, absl::Time now) {
  const int m = static_cast<int>(method);
  RequestCounter(method, code)->Increment();
  latency_[m]->Observe(absl::ToDoubleSeconds(latency));
  if (keys.has_value() && keys_[m] != nullptr) {
    keys_[m]->Observe(static_cast<double>(*keys));
  }
  if (method == RpcMethod::kCheckpoint && code == absl::StatusCode::kOk) {
    prometheus::Gauge* gauge =
        last_checkpoint_time_.load(std::memory_order_acquire);
    if (gauge == nullptr) {
      absl::MutexLock lock(&resolve_mu_);
      gauge = last_checkpoint_time_.load(std::memory_order_acquire);
      if (gauge == nullptr) {
        gauge = &checkpoint_time_family_->Add({});
        last_checkpoint_time_.store(gauge, std::memory_order_release);
      }
    }
    gauge->Set(UnixSeconds(now));
  }
}

}  // namespace psdb::rpc
